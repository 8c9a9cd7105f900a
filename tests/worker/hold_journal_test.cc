// HoldJournal: what a crashed process leaves in its state directory, and
// giving it back against a real redis-server. A crash is a forked child
// that records holds and _exits without running a destructor.
#include "lockfleet/worker/hold_journal.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "lockcore/lock_fixture.h"

namespace lockfleet::worker {
namespace {

using std::chrono::milliseconds;

class StateDir {
 public:
  StateDir() {
    char tmpl[] = "/tmp/lockfleet-state-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~StateDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `body` in a child process that then dies without cleaning up (as a
// SIGKILL would leave things); returns its exit status.
int CrashAfter(const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> Names(const HoldJournal& journal) {
  std::vector<std::string> names;
  for (const HoldJournal::Hold& hold : journal.Left()) {
    names.push_back(hold.lock + "/" + hold.owner + "/" +
                    std::to_string(hold.fence));
  }
  return names;
}

TEST(HoldJournal, ACrashedProcessLeavesWhatItHeldAndNothingElse) {
  StateDir dir;
  ASSERT_EQ(CrashAfter([&] {
              auto journal = HoldJournal::Open(dir.path() + "/w");
              static HoldJournal::Entry a, c;  // never destroyed: _exit
              a = journal->Record("a", "owner-1", 7);
              {
                HoldJournal::Entry b = journal->Record("b", "owner-1", 8);
              }  // ended: cleared
              c = journal->Record(std::string(1024, 'n'), "owner-2", 9);
              journal.release();  // a crash runs no destructor
            }),
            0);
  auto journal = HoldJournal::Open(dir.path() + "/w");
  EXPECT_EQ(Names(*journal),
            (std::vector<std::string>{"a/owner-1/7",
                                      std::string(1024, 'n') + "/owner-2/9"}));
  // Taken over: this process starts with an empty journal, and a graceful
  // end leaves nothing for the next one.
  { HoldJournal::Entry d = journal->Record("d", "owner-3", 1); }
  journal.reset();
  EXPECT_TRUE(HoldJournal::Open(dir.path() + "/w")->Left().empty());
}

TEST(HoldJournal, ADirectoryInUseIsRefused) {
  StateDir dir;
  auto first = HoldJournal::Open(dir.path());
  try {
    HoldJournal::Open(dir.path());
    ADD_FAILURE() << "a second journal opened a directory in use";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another running worker"),
              std::string::npos)
        << e.what();
  }
  first.reset();
  EXPECT_NO_THROW(HoldJournal::Open(dir.path()));
}

TEST(HoldJournal, DamagedSlotsAreIgnored) {
  StateDir dir;
  ASSERT_EQ(CrashAfter([&] {
              auto journal = HoldJournal::Open(dir.path());
              static HoldJournal::Entry a, b;
              a = journal->Record("a", "owner", 1);
              b = journal->Record("b", "owner", 2);
              journal.release();
            }),
            0);
  {
    // Flip one byte of slot "b" and cut the file inside a third slot.
    std::fstream file(dir.path() + "/holds",
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(2048 + 20);
    file.put('X');
    file.seekp(0, std::ios::end);
    file.write("partial", 7);
  }
  EXPECT_EQ(Names(*HoldJournal::Open(dir.path())),
            std::vector<std::string>{"a/owner/1"});
}

// Deleting the journal under a live worker (a tmp cleaner, an operator)
// must not make its live grants look abandoned: the lock is on the file.
TEST(HoldJournal, AJournalDeletedUnderALiveWorkerGivesNothingBack) {
  StateDir dir;
  auto live = HoldJournal::Open(dir.path());
  HoldJournal::Entry held = live->Record("live", "owner", 5);
  ASSERT_EQ(unlink((dir.path() + "/holds").c_str()), 0);
  auto second = HoldJournal::Open(dir.path());
  EXPECT_TRUE(second->Left().empty());
}

// Starts that end without a clean exit soon after they began count as a
// crash loop; a start that never served (MarkRunning) does not add one; a
// clean exit resets the count.
TEST(HoldJournal, CountsCrashLoopsFromServingStarts) {
  StateDir dir;
  auto start = [&] { return HoldJournal::Open(dir.path()); };
  auto first = start();
  EXPECT_EQ(first->RecentCrashes(), 0);
  first->MarkRunning();
  first.reset();  // crashed
  auto second = start();
  EXPECT_EQ(second->RecentCrashes(), 1);
  second->MarkRunning();
  second.reset();
  auto third = start();
  EXPECT_EQ(third->RecentCrashes(), 2);
  third.reset();  // ended before serving (Redis down at start, say)
  auto fourth = start();
  EXPECT_EQ(fourth->RecentCrashes(), 2);
  fourth->MarkRunning();
  fourth->MarkCleanExit();
  fourth.reset();
  EXPECT_EQ(start()->RecentCrashes(), 0);

  EXPECT_EQ(JoinDelay(0), milliseconds(0));
  EXPECT_EQ(JoinDelay(1), milliseconds(2000));
  EXPECT_EQ(JoinDelay(2), milliseconds(4000));
  EXPECT_EQ(JoinDelay(5), milliseconds(32000));
  EXPECT_EQ(JoinDelay(6), milliseconds(60000));
  EXPECT_EQ(JoinDelay(1000), milliseconds(60000));
}

TEST(HoldJournal, UnusableDirectoryIsAClearError) {
  try {
    HoldJournal::Open("/proc/lockfleet-no-such-dir/state");
    ADD_FAILURE() << "opened a journal under /proc";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/lockfleet-no-such-dir/state"),
              std::string::npos)
        << e.what();
  }
}

class HoldJournalGiveBack : public testing::LockTest {};

// The restarted process gives back exactly the grants its crashed
// predecessor held — and leaves a lock alone that has passed on since.
TEST_F(HoldJournalGiveBack, GivesBackTheCrashedHoldsOnlyAsTheyWere) {
  StateDir dir;
  auto crashed = NewClient();  // its holds outlive it (explicit leases)
  AcquireResult kept =
      crashed->TryAcquire("kept", {.lease = milliseconds(60000)});
  AcquireResult moved =
      crashed->TryAcquire("moved", {.lease = milliseconds(60000)});
  ASSERT_TRUE(kept);
  ASSERT_TRUE(moved);
  const HoldJournal::Hold k{"kept", kept.lease.owner(), kept.lease.fence()};
  const HoldJournal::Hold m{"moved", moved.lease.owner(), moved.lease.fence()};
  // "again": taken again by the same owner later, under a newer grant.
  AcquireResult again =
      crashed->TryAcquire("again", {.lease = milliseconds(60000)});
  ASSERT_TRUE(again);
  const HoldJournal::Hold g{"again", again.lease.owner(), again.lease.fence()};
  ASSERT_EQ(CrashAfter([&] {
              auto journal = HoldJournal::Open(dir.path());
              static HoldJournal::Entry a, b, c;
              a = journal->Record(k.lock, k.owner, k.fence);
              b = journal->Record(m.lock, m.owner, m.fence);
              c = journal->Record(g.lock, g.owner, g.fence);
              journal.release();
            }),
            0);
  // "moved" passed on meanwhile: its grant expired and someone else took it.
  auto admin = NewClient();
  ASSERT_TRUE(admin->ForceUnlock("moved").was_locked);
  auto other = NewClient();
  AcquireResult next =
      other->TryAcquire("moved", {.lease = milliseconds(60000)});
  ASSERT_TRUE(next);

  ASSERT_TRUE(admin->ForceUnlock("again").was_locked);
  AcquireResult newer =
      crashed->TryAcquire("again", {.lease = milliseconds(60000)});
  ASSERT_TRUE(newer);
  ASSERT_EQ(newer.lease.owner(), g.owner);  // same owner, new fence
  ASSERT_GT(newer.lease.fence(), g.fence);

  auto journal = HoldJournal::Open(dir.path());
  auto restarted = NewClient();
  const std::vector<GiveBack> lines = GiveBackLeftHolds(*journal, *restarted);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(
      lines[0].message.rfind(
          "gave back lock 'kept' (fence " + std::to_string(k.fence) + ")", 0),
      0u)
      << lines[0].message;
  EXPECT_EQ(lines[0].outcome, GiveBack::Outcome::kGivenBack);
  EXPECT_EQ(lines[1].outcome, GiveBack::Outcome::kPassedOn);
  EXPECT_EQ(lines[2].outcome, GiveBack::Outcome::kPassedOn);
  EXPECT_EQ(lines[1].message.rfind("left lock 'moved'", 0), 0u)
      << lines[1].message;
  EXPECT_EQ(lines[2].message.rfind("left lock 'again'", 0), 0u)
      << lines[2].message;
  EXPECT_EQ(restarted->Inspect("again").fence, newer.lease.fence());
  EXPECT_FALSE(restarted->Inspect("kept").locked);
  const LockInfo now = restarted->Inspect("moved");
  EXPECT_TRUE(now.locked);
  EXPECT_EQ(now.owner, next.lease.owner());
  EXPECT_EQ(now.fence, next.lease.fence());
  EXPECT_EQ(next.lease.Release(), ReleaseStatus::kReleased);
}

}  // namespace
}  // namespace lockfleet::worker
