// HoldJournal: the grants a worker process holds right now, kept in a file
// of its state directory (worker.state_dir), so that the next process
// started on that directory — after a crash, the OOM killer, a SIGKILL, a
// container restart — gives them back at once instead of leaving them to run
// out their lease (locks.lease, 30 s by default) while the rest of the fleet
// waits for them. A crash-looping worker otherwise strands a few locks per
// crash; with a handful of hot locks the whole fleet stalls.
//
// Safety: the directory belongs to one process at a time. Open() takes an
// exclusive flock(2) on the journal file, DIR/holds, and keeps it for the
// life of the journal; the kernel drops it when the process ends, however it
// ends. So a process that gets it knows the writer of what it finds there is
// gone (a dead holder neither renews nor writes) and may give its grants
// back. Deleting or replacing the file cannot fool this: the new file is
// empty. A directory on a network filesystem (NFS, SMB, Ceph, FUSE, ...) is
// refused: flock there cannot prove another host's process dead. A grant is
// given back only as that very grant — ForceUnlock with the recorded owner and
// fencing token as expectations — so a lock that has passed to anyone else
// since is left alone. A second process on a directory in use is refused.
//
// The file is an array of fixed-size slots, one per grant held; each is written
// with one pwrite(2) when the grant is taken and zeroed when it ends, and
// carries a checksum (a slot torn by a crash of the machine mid-write is
// ignored: the lease covers it, as it covers every hold when the whole node
// goes away).
//
// The directory also remembers this worker's last start (DIR/starts):
// RecentCrashes() counts the starts in a row that were followed within
// kCrashWindow by another start without MarkCleanExit() in between, so a
// crash-looping worker can hold back from what its crashes disturb (the jobs
// group: see JoinDelay). A start counts once MarkRunning() is called (when
// the worker serves), so exits at start (Redis down, a bad config) do not.
//
// Thread-safety: Record and Entry's destructor may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace lockfleet {
class LockClient;
}

namespace lockfleet::worker {

class HoldJournal {
 public:
  struct Hold {
    std::string lock;
    std::string owner;
    int64_t fence = 0;
  };

  // Clears its slot when destroyed (the grant ended). Movable; a
  // default-constructed Entry records nothing.
  class Entry {
   public:
    Entry() = default;
    Entry(Entry&& other) noexcept;
    Entry& operator=(Entry&& other) noexcept;
    ~Entry();
    explicit operator bool() const { return journal_ != nullptr; }

   private:
    friend class HoldJournal;
    Entry(HoldJournal* journal, size_t slot) : journal_(journal), slot_(slot) {}
    HoldJournal* journal_ = nullptr;
    size_t slot_ = 0;
  };

  // Locks `dir` (created if missing, mode 0700) and reads what an earlier
  // process left in it (Left()), then empties the journal. Throws
  // std::runtime_error naming the path when the directory cannot be used
  // (or is on a network filesystem), or when another live process holds it.
  static std::unique_ptr<HoldJournal> Open(const std::string& dir);

  ~HoldJournal();
  HoldJournal(const HoldJournal&) = delete;
  HoldJournal& operator=(const HoldJournal&) = delete;

  // The grants the previous process of this directory held when it ended
  // (none after a graceful shutdown).
  const std::vector<Hold>& Left() const { return left_; }

  // Records a grant just taken. A write error (or an owner token longer
  // than 256 bytes) gives an empty Entry: the grant is then only covered by
  // its lease, as without a journal.
  Entry Record(std::string_view lock, std::string_view owner, int64_t fence);

  // A start followed by another one sooner than this, without a clean
  // exit in between, counts as a crash of a crash loop.
  static constexpr std::chrono::seconds kCrashWindow{60};
  // How many starts in a row before this one ended so (0: the last one ended
  // cleanly, began longer than kCrashWindow ago, or never served).
  int RecentCrashes() const { return recent_crashes_; }
  // Records this start (call once the worker serves): if it ends without
  // MarkCleanExit() within kCrashWindow of now, the next start counts it.
  void MarkRunning();
  // Records that this process is ending gracefully (call at the end of a
  // shutdown): the next start is not counted as after a crash.
  void MarkCleanExit();

 private:
  HoldJournal(const std::string& dir, int file_fd, std::vector<Hold> left,
              int recent_crashes);
  void Clear(size_t slot);
  void WriteStart(bool clean);

  const int fd_;  // DIR/holds, flock'ed
  const std::vector<Hold> left_;
  const std::string starts_path_;  // DIR/starts
  const int recent_crashes_;
  const int64_t started_ms_;
  mutable std::mutex mu_;
  std::vector<size_t> free_;  // guarded by mu_; slots to reuse
  size_t slots_ = 0;          // guarded by mu_; slots in the file
};

// How long a worker that crashed `crashes` times in a row waits before it
// joins the jobs group: 0 for none, then 2 s doubling to 60 s. (Each join
// and each death of a member makes the whole group rebalance; a member
// that dies holding partitions strands them until the broker drops it.)
std::chrono::milliseconds JoinDelay(int crashes);

// What became of one grant the previous process left.
struct GiveBack {
  enum class Outcome {
    kGivenBack,  // it was still that grant: removed
    kPassedOn,   // it had ended or passed to another grant: left alone
    kFailed,     // Redis failed: it runs out with its lease
  };
  Outcome outcome;
  std::string message;  // for the log: "gave back lock 'NAME' (fence N)..."
};

// Gives back the grants `journal` found (see the class comment): each with
// ForceUnlock expecting its owner and fence. Never throws.
std::vector<GiveBack> GiveBackLeftHolds(const HoldJournal& journal,
                                        LockClient& locks);

}  // namespace lockfleet::worker
