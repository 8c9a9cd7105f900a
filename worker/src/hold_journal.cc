#include "lockfleet/worker/hold_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "lockfleet/lockcore/lock_client.h"

namespace lockfleet::worker {
namespace {

// One slot: magic, fence, owner and lock lengths, FNV-1a checksum of
// everything after it, then owner and lock bytes; zero-padded.
constexpr size_t kSlotBytes = 2048;
constexpr size_t kHeaderBytes = 1 + 8 + 2 + 2 + 4;
constexpr size_t kMaxOwnerBytes = 256;
static_assert(kHeaderBytes + kMaxOwnerBytes + kMaxLockNameBytes <= kSlotBytes);
constexpr unsigned char kMagic = 0xA7;

// FNV-1a over the slot's fence and lengths (bytes 1..12) and its `body`
// bytes: everything a slot says but the magic and the checksum itself.
uint32_t Checksum(const unsigned char* slot, size_t body) {
  uint32_t hash = 2166136261u;
  auto add = [&hash](const unsigned char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash ^= data[i];
      hash *= 16777619u;
    }
  };
  add(slot + 1, 12);
  add(slot + kHeaderBytes, body);
  return hash;
}

void PutLe(unsigned char* at, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) at[i] = (value >> (8 * i)) & 0xff;
}

uint64_t GetLe(const unsigned char* at, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= uint64_t{at[i]} << (8 * i);
  return value;
}

// Wall-clock time (it must compare across processes and restarts).
int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

bool IsNetworkFilesystem(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0x6969:      // NFS
    case 0x517B:      // SMB
    case 0xFF534D42:  // CIFS
    case 0xFE534D42:  // SMB2
    case 0x00C36400:  // Ceph
    case 0x65735546:  // FUSE (sshfs, s3fs, ...)
    case 0x01021997:  // 9P / v9fs
    case 0x013111A8:  // IBRIX
    case 0x47504653:  // GPFS
    case 0x0BD00BD0:  // Lustre
      return true;
    default:
      return false;
  }
}

// The slot's hold, or false for an empty or damaged slot.
bool Decode(const unsigned char* slot, HoldJournal::Hold* hold) {
  if (slot[0] != kMagic) return false;
  const size_t owner_len = GetLe(slot + 9, 2);
  const size_t lock_len = GetLe(slot + 11, 2);
  if (owner_len == 0 || owner_len > kMaxOwnerBytes || lock_len == 0 ||
      lock_len > kMaxLockNameBytes) {
    return false;
  }
  const unsigned char* body = slot + kHeaderBytes;
  if (GetLe(slot + 13, 4) != Checksum(slot, owner_len + lock_len)) {
    return false;
  }
  hold->fence = static_cast<int64_t>(GetLe(slot + 1, 8));
  hold->owner.assign(reinterpret_cast<const char*>(body), owner_len);
  hold->lock.assign(reinterpret_cast<const char*>(body) + owner_len, lock_len);
  return hold->fence > 0;
}

}  // namespace

HoldJournal::Entry::Entry(Entry&& other) noexcept
    : journal_(std::exchange(other.journal_, nullptr)), slot_(other.slot_) {}

HoldJournal::Entry& HoldJournal::Entry::operator=(Entry&& other) noexcept {
  if (this != &other) {
    if (journal_ != nullptr) journal_->Clear(slot_);
    journal_ = std::exchange(other.journal_, nullptr);
    slot_ = other.slot_;
  }
  return *this;
}

HoldJournal::Entry::~Entry() {
  if (journal_ != nullptr) journal_->Clear(slot_);
}

std::unique_ptr<HoldJournal> HoldJournal::Open(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error(Errno("cannot create state directory", dir));
  }
  // flock on a network filesystem cannot prove the other process dead (NFS
  // locks are host-local or lease-based, and can be lost unseen).
  struct statfs fs;
  if (statfs(dir.c_str(), &fs) == 0 && IsNetworkFilesystem(fs.f_type)) {
    throw std::runtime_error(
        "state directory " + dir +
        " is on a network filesystem; use a directory local to the worker's "
        "host or pod");
  }
  const std::string path = dir + "/holds";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(Errno("cannot open", path));
  auto fail = [&](const std::string& message) {
    close(fd);
    throw std::runtime_error(message);
  };
  // The lock is on the journal itself: a process writing it holds it, so
  // deleting or replacing the file cannot make a live process's grants
  // look abandoned (a new file has none).
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    fail(errno == EWOULDBLOCK
             ? "state directory " + dir +
                   " is in use by another running worker (each worker "
                   "needs its own worker.state_dir)"
             : Errno("cannot lock", path));
  }
  struct stat opened, named;
  if (fstat(fd, &opened) != 0 || stat(path.c_str(), &named) != 0 ||
      opened.st_ino != named.st_ino || opened.st_dev != named.st_dev) {
    fail(path + " was replaced while it was being opened; try again");
  }
  unsigned char slot[kSlotBytes];
  std::vector<Hold> left;
  for (off_t at = 0;; at += kSlotBytes) {
    const ssize_t n = pread(fd, slot, kSlotBytes, at);
    if (n < static_cast<ssize_t>(kSlotBytes)) break;  // end (or a torn tail)
    Hold hold;
    if (Decode(slot, &hold)) left.push_back(std::move(hold));
  }
  // What was left is returned to the caller to give back; the file starts
  // empty for this process.
  if (ftruncate(fd, 0) != 0) fail(Errno("cannot truncate", path));
  // The previous start: "START_MS CLEAN CRASHES" (see MarkRunning).
  int crashes = 0;
  {
    std::ifstream in(dir + "/starts");
    int64_t started = 0;
    int clean = 1, before = 0;
    if (in >> started >> clean >> before && clean == 0) {
      const int64_t gap = NowMs() - started;
      // A negative gap is a clock step, not a crash.
      if (gap >= 0 && gap < std::chrono::milliseconds(kCrashWindow).count()) {
        crashes = std::min(before + 1, 1000);
      }
    }
  }
  return std::unique_ptr<HoldJournal>(
      new HoldJournal(dir, fd, std::move(left), crashes));
}

HoldJournal::HoldJournal(const std::string& dir, int file_fd,
                         std::vector<Hold> left, int recent_crashes)
    : fd_(file_fd),
      left_(std::move(left)),
      starts_path_(dir + "/starts"),
      recent_crashes_(recent_crashes),
      started_ms_(NowMs()) {}

void HoldJournal::WriteStart(bool clean) {
  // Written whole to a new file, then renamed over the old one.
  const std::string tmp = starts_path_ + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << started_ms_ << ' ' << (clean ? 1 : 0) << ' ' << recent_crashes_
        << '\n';
    if (!out) return;  // then the next start just does not see this one
  }
  std::rename(tmp.c_str(), starts_path_.c_str());
}

void HoldJournal::MarkRunning() { WriteStart(/*clean=*/false); }

void HoldJournal::MarkCleanExit() { WriteStart(/*clean=*/true); }

std::chrono::milliseconds JoinDelay(int crashes) {
  if (crashes <= 0) return std::chrono::milliseconds(0);
  const int doublings = std::min(crashes - 1, 5);  // 2 s .. 64 s
  return std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(2000) * (1 << doublings),
      std::chrono::seconds(60));
}

HoldJournal::~HoldJournal() {
  close(fd_);  // drops the flock
}

HoldJournal::Entry HoldJournal::Record(std::string_view lock,
                                       std::string_view owner, int64_t fence) {
  std::lock_guard guard(mu_);
  if (lock.empty() || lock.size() > kMaxLockNameBytes || owner.empty() ||
      owner.size() > kMaxOwnerBytes || fence <= 0) {
    return Entry();
  }
  size_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = slots_++;
  }
  unsigned char data[kSlotBytes] = {};
  data[0] = kMagic;
  PutLe(data + 1, static_cast<uint64_t>(fence), 8);
  PutLe(data + 9, owner.size(), 2);
  PutLe(data + 11, lock.size(), 2);
  unsigned char* body = data + kHeaderBytes;
  std::memcpy(body, owner.data(), owner.size());
  std::memcpy(body + owner.size(), lock.data(), lock.size());
  PutLe(data + 13, Checksum(data, owner.size() + lock.size()), 4);
  if (pwrite(fd_, data, kSlotBytes, static_cast<off_t>(slot * kSlotBytes)) !=
      static_cast<ssize_t>(kSlotBytes)) {
    free_.push_back(slot);
    return Entry();
  }
  return Entry(this, slot);
}

void HoldJournal::Clear(size_t slot) {
  std::lock_guard guard(mu_);
  static const unsigned char kZero[kSlotBytes] = {};
  // Only the magic byte matters; the whole slot keeps the file tidy.
  // A failed write leaves an ended grant behind: harmless, the next
  // process's ForceUnlock then finds the lock free or held by another grant.
  [[maybe_unused]] const ssize_t n =
      pwrite(fd_, kZero, kSlotBytes, static_cast<off_t>(slot * kSlotBytes));
  free_.push_back(slot);
}

std::vector<GiveBack> GiveBackLeftHolds(const HoldJournal& journal,
                                        LockClient& locks) {
  std::vector<GiveBack> out;
  for (const HoldJournal::Hold& hold : journal.Left()) {
    const std::string what =
        "lock '" + hold.lock + "' (fence " + std::to_string(hold.fence) + ")";
    try {
      const ForceUnlockResult r = locks.ForceUnlock(
          hold.lock, {.expect_owner = hold.owner, .expect_fence = hold.fence});
      if (r.was_locked) {
        out.push_back({GiveBack::Outcome::kGivenBack,
                       "gave back " + what +
                           ", held by the previous process of this state "
                           "directory when it ended"});
      } else {
        out.push_back(
            {GiveBack::Outcome::kPassedOn,
             "left " + what + " alone: it has ended or passed on since"});
      }
    } catch (const std::exception& e) {
      out.push_back({GiveBack::Outcome::kFailed,
                     "could not give back " + what + ": " + e.what() +
                         " (it runs out with its lease)"});
    }
  }
  return out;
}

}  // namespace lockfleet::worker
