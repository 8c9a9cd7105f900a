// ReadWriteLock against a real redis-server: readers share, writers
// exclude; reentrancy, downgrade and a refused upgrade; writer tokens and
// read-grant tokens; fairness (a queued writer holds back later readers);
// one release waking every queued reader with one event; a holder that
// stops renewing giving the lock back; barging; forged events; and what must
// never happen: a writer together with anyone else, in a stress run of
// several clients (processes on the loopback bus).
#include "lockfleet/lockcore/rwlock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/semaphore.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr RwMode kRead = RwMode::kRead;
constexpr RwMode kWrite = RwMode::kWrite;

class RwLockTest : public ConnectedLockTest {
 protected:
  // A waiting acquisition in `mode` on `client`, on its own thread; returns
  // once Redis has `queued` waiters and the call has parked.
  std::future<RwResult> Queue(LockClient& client, const std::string& name,
                              RwMode mode, int64_t queued, RwOptions o = {},
                              milliseconds wait = seconds(60)) {
    const uint64_t parks = client.stats().permit_parks;
    auto f = std::async(std::launch::async, [&client, name, mode, o, wait] {
      return client.ReadWriteLock(name).AcquireFor(mode, wait, o);
    });
    EXPECT_TRUE(WaitUntil([&] {
      return client.ReadWriteLock(name).Inspect().waiters == queued &&
             client.stats().permit_parks > parks;
    }));
    return f;
  }

  static bool StillWaiting(std::future<RwResult>& f, milliseconds after) {
    return f.wait_for(after) == std::future_status::timeout;
  }

  static ErrorCode CodeOf(const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  }
};

TEST_F(RwLockTest, ReadersShareAndAWriterExcludes) {
  auto a = Connected();
  auto b = Connected();
  ReadWriteLock la = a->ReadWriteLock("catalogue");
  ReadWriteLock lb = b->ReadWriteLock("catalogue");
  EXPECT_EQ(la.name(), "catalogue");
  RwResult r1 = la.TryAcquire(kRead);
  RwResult r2 = lb.TryAcquire(kRead);
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2) << "readers share";
  EXPECT_EQ(r1.lease.mode(), kRead);
  EXPECT_NE(r1.lease.id(), r2.lease.id());
  EXPECT_EQ(r1.lease.token(), 0) << "never written";
  EXPECT_FALSE(la.TryAcquire(kWrite, {.owner = "writer"}))
      << "a writer waits for the readers";
  RwInfo info = la.Inspect();
  EXPECT_EQ(info.holders.size(), 2u);
  EXPECT_FALSE(info.write_locked());
  EXPECT_EQ(info.waiters, 0) << "a try never queues";

  EXPECT_EQ(r1.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(r1.lease.held());
  EXPECT_FALSE(la.TryAcquire(kWrite)) << "one reader still holds it";
  EXPECT_EQ(CodeOf([&] { lb.TryAcquire(kWrite); }), ErrorCode::kInvalidArgument)
      << "the other reader may not upgrade";
  EXPECT_EQ(r2.lease.Release(), ReleaseStatus::kReleased);
  RwResult w = la.TryAcquire(kWrite);
  ASSERT_TRUE(w);
  EXPECT_GT(w.lease.token(), 0);
  EXPECT_FALSE(lb.TryAcquire(kRead)) << "no reader beside a writer";
  EXPECT_FALSE(lb.TryAcquire(kWrite)) << "no second writer";
  info = lb.Inspect();
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_TRUE(info.write_locked());
  EXPECT_EQ(info.holders[0].owner, a->DefaultOwner());
  EXPECT_EQ(info.holders[0].token, w.lease.token());
  EXPECT_EQ(info.last_token, w.lease.token());
  const int64_t token = w.lease.token();
  w = {};  // released at scope end (move-assign)
  RwResult read = lb.TryAcquire(kRead);
  ASSERT_TRUE(read);
  EXPECT_EQ(read.lease.token(), token)
      << "a read grant carries the last write grant's token";
  read.lease.Release();
  RwResult w2 = lb.TryAcquire(kWrite);
  ASSERT_TRUE(w2);
  EXPECT_GT(w2.lease.token(), token) << "writer tokens strictly increase";
  EXPECT_EQ(a->stats().rw_acquisitions, 2u);
  EXPECT_EQ(a->stats().rw_releases, 2u);
}

TEST_F(RwLockTest, ReentrancyDowngradeAndARefusedUpgrade) {
  auto a = Connected();
  auto b = Connected();
  ReadWriteLock l = a->ReadWriteLock("reenter");
  RwResult w = l.TryAcquire(kWrite);
  ASSERT_TRUE(w);
  RwResult w2 = l.TryAcquire(kWrite);
  ASSERT_TRUE(w2) << "a writer re-enters";
  EXPECT_EQ(w2.lease.token(), w.lease.token()) << "the same write grant";
  RwResult r = l.TryAcquire(kRead);
  ASSERT_TRUE(r) << "a writer may read";
  EXPECT_EQ(r.lease.token(), w.lease.token());
  // Another owner (another thread of this client, or another client) waits.
  EXPECT_FALSE(b->ReadWriteLock("reenter").TryAcquire(kRead));
  RwResult other = l.TryAcquire(kRead, {.owner = "someone-else"});
  EXPECT_FALSE(other);
  ASSERT_EQ(w2.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(b->ReadWriteLock("reenter").TryAcquire(kRead))
      << "still write-held by the outer hold";
  // Downgrade: the write lock goes, the read stays, with no moment free.
  ASSERT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(r.lease.lost());
  RwResult joined = b->ReadWriteLock("reenter").TryAcquire(kRead);
  EXPECT_TRUE(joined) << "readers join the downgraded holder";
  EXPECT_FALSE(l.TryAcquire(kWrite, {.owner = "someone-else"}));
  // Upgrade: refused at once (it would wait for itself), nothing queued.
  EXPECT_EQ(CodeOf([&] { l.AcquireFor(kWrite, seconds(30)); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(l.Inspect().waiters, 0);
  EXPECT_EQ(l.Inspect().holders.size(), 2u);
  // Re-entering a read never waits, even behind a queued writer that waits
  // for it.
  auto c = Connected();
  auto writer = Queue(*c, "reenter", kWrite, 1);
  RwResult again = l.AcquireFor(kRead, seconds(30));
  ASSERT_TRUE(again);
  EXPECT_EQ(again.attempts, 1);
  again.lease.Release();
  r.lease.Release();
  joined.lease.Release();
  RwResult wrote = writer.get();
  ASSERT_TRUE(wrote);
  EXPECT_EQ(wrote.lease.mode(), kWrite);
}

TEST_F(RwLockTest, AQueuedWriterHoldsBackLaterReaders) {
  auto a = Connected();
  auto b = Connected();
  auto c = Connected();
  RwResult reading = a->ReadWriteLock("fair").TryAcquire(kRead);
  ASSERT_TRUE(reading);
  auto writer = Queue(*b, "fair", kWrite, 1);
  // A reader arriving behind the queued writer waits: readers never starve
  // a writer.
  EXPECT_FALSE(c->ReadWriteLock("fair").TryAcquire(kRead));
  auto reader = Queue(*c, "fair", kRead, 2);
  EXPECT_TRUE(StillWaiting(reader, milliseconds(300)));
  ASSERT_EQ(reading.lease.Release(), ReleaseStatus::kReleased);
  RwResult w = writer.get();
  ASSERT_TRUE(w);
  EXPECT_TRUE(StillWaiting(reader, milliseconds(300)))
      << "the writer came first";
  const int64_t token = w.lease.token();
  ASSERT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  RwResult r = reader.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r.lease.token(), token);
  // Woken by the releases' events, never by a bound (the windows are long).
  EXPECT_EQ(b->stats().wakeups_bound + c->stats().wakeups_bound, 0u);
}

TEST_F(RwLockTest, OneReleaseWakesEveryQueuedReaderWithOneEvent) {
  auto a = Connected();
  std::vector<std::unique_ptr<LockClient>> readers;
  for (int i = 0; i < 3; ++i) readers.push_back(Connected());
  auto late_writer = Connected();
  RwResult w = a->ReadWriteLock("fan").TryAcquire(kWrite);
  ASSERT_TRUE(w);
  std::vector<std::future<RwResult>> waiting;
  for (int i = 0; i < 3; ++i)
    waiting.push_back(Queue(*readers[i], "fan", kRead, i + 1));
  // A writer behind them: the hand-off stops at it.
  auto writer = Queue(*late_writer, "fan", kWrite, 4);
  const uint64_t published = a->stats().events_published;
  ASSERT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  std::vector<RwResult> got;
  for (auto& f : waiting) {
    got.push_back(f.get());
    ASSERT_TRUE(got.back());
  }
  EXPECT_EQ(a->stats().events_published - published, 1u)
      << "one event named the three readers";
  for (auto& r : readers) {
    EXPECT_EQ(r->stats().wakeups_bound, 0u);
    EXPECT_EQ(r->stats().wakeups_event, 1u);
  }
  EXPECT_TRUE(StillWaiting(writer, milliseconds(200)));
  RwInfo info = a->ReadWriteLock("fan").Inspect();
  EXPECT_EQ(info.holders.size(), 3u);
  EXPECT_EQ(info.waiters, 1);
  for (auto& r : got) r.lease.Release();
  EXPECT_TRUE(writer.get());
}

TEST_F(RwLockTest, AHolderThatStopsRenewingGivesTheLockBack) {
  auto a = Connected();
  auto b = Connected();
  // An explicit lease is not renewed: as a holder that died, its lock comes
  // back when the lease ends, and no event says so — the waiter's park is
  // bounded by the lease's end.
  RwResult dead = a->ReadWriteLock("crash").TryAcquire(
      kWrite, {.lease = milliseconds(1500)});
  ASSERT_TRUE(dead);
  auto reader = Queue(*b, "crash", kRead, 1);
  RwResult got = reader.get();
  ASSERT_TRUE(got);
  EXPECT_TRUE(dead.lease.lost());
  EXPECT_EQ(dead.lease.Release(), ReleaseStatus::kNotHeld);
  EXPECT_GE(b->stats().wakeups_bound, 1u);
}

TEST_F(RwLockTest, TheWatchdogKeepsAWriteHoldAndToldWhenItIsTakenAway) {
  LockClientOptions o;
  o.default_lease = milliseconds(1000);
  auto a = Connected(o);
  auto b = Connected();
  std::atomic<int> lost{0};
  std::atomic<int64_t> lost_token{0};
  RwResult w = a->ReadWriteLock("renewed").TryAcquire(
      kWrite, {.on_lost = [&](const std::string& name, int64_t token) {
        EXPECT_EQ(name, "renewed");
        lost_token = token;
        ++lost;
      }});
  ASSERT_TRUE(w);
  // Several leases long: renewed every lease/3, never lost, never taken.
  std::this_thread::sleep_for(milliseconds(3500));
  EXPECT_FALSE(w.lease.lost());
  EXPECT_FALSE(b->ReadWriteLock("renewed").TryAcquire(kRead));
  // Taken away behind its back (its lease ended on the server, as after a
  // pause longer than the lease): the next renewal tells the holder.
  redis_->Execute(
      {"ZADD", "lockfleet:{renewed}:rwlock:expiry", "1", w.lease.id()});
  EXPECT_TRUE(WaitUntil([&] { return lost.load() == 1; }));
  EXPECT_TRUE(w.lease.lost());
  EXPECT_TRUE(w.lease.stop_token().stop_requested());
  EXPECT_EQ(lost_token.load(), w.lease.token());
}

TEST_F(RwLockTest, ABargingWaiterIsWokenByAReleaseAndNeverQueues) {
  auto a = Connected();
  auto b = Connected();
  RwResult w = a->ReadWriteLock("barge").TryAcquire(kWrite);
  ASSERT_TRUE(w);
  const uint64_t parks = b->stats().permit_parks;
  auto barger = std::async(std::launch::async, [&] {
    return b->ReadWriteLock("barge").AcquireFor(kWrite, seconds(60),
                                                {.fair = false});
  });
  ASSERT_TRUE(WaitUntil([&] { return b->stats().permit_parks > parks; }));
  EXPECT_EQ(a->ReadWriteLock("barge").Inspect().waiters, 0);
  ASSERT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  RwResult got = barger.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(b->stats().wakeups_bound, 0u) << "woken by the release's event";
}

TEST_F(RwLockTest, OnlyAReleaseThatLetsSomeoneInIsAnnounced) {
  auto a = Connected();
  auto b = Connected();
  RwResult r1 = a->ReadWriteLock("quiet").TryAcquire(kRead);
  RwResult r2 = b->ReadWriteLock("quiet").TryAcquire(kRead);
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  // A semaphore waiter of the same name is not the read-write lock's.
  ASSERT_TRUE(b->Semaphore("quiet").TrySetPermits(0 + 1));
  PermitResult permit = a->Semaphore("quiet").TryAcquire(1);
  ASSERT_TRUE(permit);
  const uint64_t parks = b->stats().permit_parks;
  auto sem_waiter = std::async(std::launch::async, [&] {
    return b->Semaphore("quiet").AcquireFor(1, seconds(60));
  });
  ASSERT_TRUE(WaitUntil([&] { return b->stats().permit_parks > parks; }));
  const uint64_t published = a->stats().events_published;
  // A reader leaving beside another frees nothing: no event.
  ASSERT_EQ(r1.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(a->stats().events_published, published);
  // The last reader leaving frees the lock (for barging waiters): one event
  // naming nobody, which wakes no semaphore waiter.
  const uint64_t woken = b->stats().wakeups_event + b->stats().wakeups_local;
  ASSERT_EQ(r2.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(b->stats().events_published, 1u);
  EXPECT_EQ(a->stats().events_received, 1u);
  EXPECT_EQ(b->stats().wakeups_event + b->stats().wakeups_local, woken);
  // Releasing a read-write lock set by its id as a semaphore's is not its
  // release: the holder keeps it.
  RwResult w = a->ReadWriteLock("quiet").TryAcquire(kWrite);
  ASSERT_TRUE(w);
  EXPECT_EQ(a->Semaphore("quiet").Release(w.lease.id()),
            ReleaseStatus::kNotHeld);
  EXPECT_FALSE(w.lease.lost());
  EXPECT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  permit.permits.Release();
  EXPECT_TRUE(sem_waiter.get());
}

// Found by model/rwlock.pml: with an owner token shared by two threads, a
// queued write refused as an upgrade (another thread of the token got a
// read meanwhile) must hand on what its place in the queue blocked — the
// script does, and so does the refused call's give-up.
TEST_F(RwLockTest, AWriteRefusedAsAnUpgradeHandsOnWhatItsPlaceBlocked) {
  auto x = Connected();
  auto c1 = Connected();
  auto c0 = Connected();
  RwResult wx = x->ReadWriteLock("shared").TryAcquire(kWrite, {.owner = "x"});
  ASSERT_TRUE(wx);
  auto read1 = Queue(*c1, "shared", kRead, 1, {.owner = "shared"});
  auto write0 = Queue(*c0, "shared", kWrite, 2, {.owner = "shared"});
  const Reply queue =
      redis_->Execute({"LRANGE", "lockfleet:{shared}:rwlock:queue", "0", "-1"});
  ASSERT_EQ(queue.elements.size(), 2u);
  const std::string write0_id = queue.elements[1].str;
  // The read is handed on; the write, now first, does not fit and stays.
  ASSERT_EQ(wx.lease.Release(), ReleaseStatus::kReleased);
  RwResult r1 = read1.get();
  ASSERT_TRUE(r1);
  // A reader queues behind the write, as FIFO wants.
  auto read2 = Queue(*x, "shared", kRead, 2, {.owner = "x"});
  // The write tries again (woken as by its park bound): refused as an
  // upgrade, it leaves — and the reader behind it gets the lock now, woken
  // by the event of that hand-off, not by its bound.
  UnlockEvent wake;
  wake.lock = "shared";
  wake.cause = UnlockCause::kPermits;
  wake.next_waiter = write0_id;
  wake.client_id = "test";
  c0->DeliverUnlockEvent(wake);
  EXPECT_EQ(CodeOf([&] { write0.get(); }), ErrorCode::kInvalidArgument);
  ASSERT_EQ(read2.wait_for(seconds(10)), std::future_status::ready)
      << "the reader behind the refused write waits for its park bound";
  EXPECT_TRUE(read2.get());
  EXPECT_EQ(x->stats().wakeups_bound, 0u);
}

TEST_F(RwLockTest, AForgedEventWakesButGrantsNothing) {
  auto a = Connected();
  auto b = Connected();
  RwResult w = a->ReadWriteLock("forged").TryAcquire(kWrite);
  ASSERT_TRUE(w);
  auto reader = Queue(*b, "forged", kRead, 1);
  const uint64_t parks = b->stats().permit_parks;
  const Reply queue =
      redis_->Execute({"LRANGE", "lockfleet:{forged}:rwlock:queue", "0", "-1"});
  ASSERT_EQ(queue.elements.size(), 1u);
  const std::string real = queue.elements[0].str;
  for (const std::string& next :
       {std::string(), std::string("nobody"), real, "x\n" + real + "\n\n"}) {
    UnlockEvent forged;
    forged.lock = "forged";
    forged.cause = UnlockCause::kPermits;
    forged.next_waiter = next;
    forged.client_id = "someone-else";
    b->DeliverUnlockEvent(forged);
  }
  EXPECT_TRUE(WaitUntil([&] { return b->stats().permit_parks > parks; }))
      << "woken, refused, parked again";
  EXPECT_TRUE(StillWaiting(reader, milliseconds(500)));
  EXPECT_EQ(a->ReadWriteLock("forged").Inspect().holders.size(), 1u);
  ASSERT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(reader.get());
}

TEST_F(RwLockTest, BadArgumentsAreRefused) {
  auto a = Connected();
  EXPECT_EQ(CodeOf([&] { a->ReadWriteLock(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(CodeOf([&] { a->ReadWriteLock("}x"); }),
            ErrorCode::kInvalidArgument);
  ReadWriteLock l = a->ReadWriteLock("bad");
  EXPECT_EQ(CodeOf([&] { l.TryAcquire(kRead, {.lease = milliseconds(0)}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(CodeOf([&] { l.TryAcquire(kWrite, {.lease = milliseconds(-5)}); }),
            ErrorCode::kInvalidArgument);
  std::stop_source stop;
  stop.request_stop();
  RwResult held = l.TryAcquire(kWrite, {.owner = "other"});
  ASSERT_TRUE(held);
  EXPECT_EQ(CodeOf([&] { l.Acquire(kRead, {.stop = stop.get_token()}); }),
            ErrorCode::kCancelled);
  EXPECT_EQ(l.Inspect().waiters, 0) << "the cancelled wait left no entry";
  EXPECT_EQ(std::string(RwModeName(kRead)), "read");
  EXPECT_EQ(std::string(RwModeName(kWrite)), "write");
}

// Threads of several clients taking the lock for reading (mostly) or
// writing for a few ms, fair and barging: the holders themselves count
// readers and writers in, and a writer never overlaps anyone.
class RwLockStress : public RwLockTest,
                     public ::testing::WithParamInterface<bool> {};

TEST_P(RwLockStress, NeverAWriterBesideAnyoneElse) {
  constexpr int kClients = 4, kThreads = 3, kRounds = 25;
  const bool fair = GetParam();
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(Connected());
  std::atomic<int> readers{0}, writers{0}, violations{0}, acquired{0},
      most_readers{0};
  std::atomic<int64_t> last_write_token{0}, token_violations{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, c, t] {
        std::mt19937 rng(c * 100 + t);
        ReadWriteLock l = clients[c]->ReadWriteLock("stress");
        for (int i = 0; i < kRounds; ++i) {
          const RwMode mode = rng() % 4 == 0 ? kWrite : kRead;
          RwResult r = l.AcquireFor(mode, seconds(120), {.fair = fair});
          if (!r) continue;
          ++acquired;
          if (mode == kWrite) {
            if (++writers != 1 || readers.load() != 0) ++violations;
            if (r.lease.token() <= last_write_token.load()) ++token_violations;
            last_write_token = r.lease.token();
          } else {
            const int now = ++readers;
            if (writers.load() != 0) ++violations;
            int seen = most_readers.load();
            while (now > seen &&
                   !most_readers.compare_exchange_weak(seen, now)) {
            }
          }
          std::this_thread::sleep_for(milliseconds(1 + rng() % 3));
          (mode == kWrite ? writers : readers)--;
          r.lease.Release();
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(token_violations.load(), 0);
  EXPECT_EQ(acquired.load(), kClients * kThreads * kRounds);
  EXPECT_GE(most_readers.load(), 2) << "readers did share";
  RwInfo info = clients[0]->ReadWriteLock("stress").Inspect();
  EXPECT_TRUE(info.holders.empty());
  EXPECT_EQ(info.waiters, 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, RwLockStress, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Fair" : "Barging";
                         });

}  // namespace
}  // namespace lockfleet::testing
