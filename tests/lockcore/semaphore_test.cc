// Semaphore against a real redis-server: permits set, taken and given back;
// strict FIFO among waiters needing different counts; hand-offs woken by
// the release's own process or by the unlock event (clients on the loopback
// bus), and by the bounded park when the event is lost; permits of a holder
// that stops renewing coming back when its lease ends; and what must never
// happen: more permits out than the semaphore has, whatever events say.
#include "lockfleet/lockcore/semaphore.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class SemaphoreTest : public ConnectedLockTest {
 protected:
  // A waiting acquisition of `k` permits on `client`, on its own thread;
  // returns once `observer` sees `queued` waiters and the call has parked
  // (its refused attempt counted).
  static std::future<PermitResult> Queue(LockClient& client,
                                         LockClient& observer,
                                         const std::string& name, int64_t k,
                                         int64_t queued, PermitOptions o = {},
                                         milliseconds wait = seconds(60)) {
    const uint64_t parks = client.stats().permit_parks;
    auto f = std::async(std::launch::async, [&client, name, k, o, wait] {
      return client.Semaphore(name).AcquireFor(k, wait, o);
    });
    EXPECT_TRUE(WaitUntil([&] {
      return observer.Semaphore(name).Inspect().waiters == queued &&
             client.stats().permit_parks > parks;
    }));
    return f;
  }

  template <typename T>
  static bool StillWaiting(std::future<T>& f, milliseconds after) {
    return f.wait_for(after) == std::future_status::timeout;
  }
};

TEST_F(SemaphoreTest, SetsTakesAndGivesBackPermits) {
  auto client = Connected();
  Semaphore s = client->Semaphore("exports");
  EXPECT_EQ(s.name(), "exports");
  EXPECT_FALSE(s.Inspect().exists);
  ASSERT_TRUE(s.TrySetPermits(3));
  EXPECT_FALSE(s.TrySetPermits(5)) << "set already";
  SemaphoreInfo info = s.Inspect();
  EXPECT_TRUE(info.exists);
  EXPECT_EQ(info.permits, 3);
  EXPECT_EQ(info.available, 3);

  PermitResult two = s.TryAcquire(2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two.permits.count(), 2);
  EXPECT_EQ(two.permits.name(), "exports");
  EXPECT_FALSE(two.permits.id().empty());
  EXPECT_FALSE(two.permits.lost());
  PermitResult one = s.TryAcquire(1);
  ASSERT_TRUE(one);
  EXPECT_NE(one.permits.id(), two.permits.id());
  PermitResult none = s.TryAcquire(1);
  EXPECT_FALSE(none);
  EXPECT_EQ(none.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(none.available, 0);
  info = s.Inspect();
  EXPECT_EQ(info.used, 3);
  EXPECT_EQ(info.available, 0);
  EXPECT_EQ(info.holders, 2);

  EXPECT_EQ(two.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(two.permits.held());
  EXPECT_EQ(s.Inspect().available, 2);
  EXPECT_EQ(s.AddPermits(2), 5);
  EXPECT_EQ(s.Inspect().available, 4);
  EXPECT_EQ(s.AddPermits(-1), 4);
  s.SetPermits(6);
  s.SetPermits(6);  // idempotent: each process may set its config's number
  EXPECT_EQ(s.Inspect().permits, 6);
  s.SetPermits(4);
  EXPECT_EQ(s.Inspect().permits, 4);
  client->Semaphore("made-by-set").SetPermits(2);
  EXPECT_EQ(client->Semaphore("made-by-set").Inspect().permits, 2);
  EXPECT_EQ(client->stats().permit_acquisitions, 2u);
  EXPECT_EQ(client->stats().permit_releases, 1u);
  // A Permits object gives its set back when it goes.
  { PermitResult scoped = s.TryAcquire(3); }
  EXPECT_EQ(s.Inspect().available, 3);
}

TEST_F(SemaphoreTest, BadArgumentsAreRefused) {
  auto client = Connected();
  Semaphore s = client->Semaphore("bad");
  auto code = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code([&] { s.TryAcquire(1); }), ErrorCode::kInvalidArgument)
      << "no such semaphore";
  EXPECT_EQ(code([&] { s.TrySetPermits(-1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { s.TrySetPermits(kMaxSemaphorePermits + 1); }),
            ErrorCode::kInvalidArgument);
  ASSERT_TRUE(s.TrySetPermits(2));
  EXPECT_EQ(code([&] { s.TryAcquire(0); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { s.TryAcquire(-3); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { s.AcquireFor(3, seconds(5)); }),
            ErrorCode::kInvalidArgument)
      << "more than the semaphore has";
  EXPECT_EQ(code([&] { s.TryAcquire(1, {.lease = milliseconds(0)}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { s.AddPermits(-3); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { s.SetPermits(-1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.Inspect().permits, 2) << "a refused change changes nothing";
  EXPECT_EQ(code([&] { s.Release(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.Release("no-such-id"), ReleaseStatus::kNotHeld);
  EXPECT_EQ(code([&] { client->Semaphore(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { client->Semaphore("}x"); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.Inspect().waiters, 0) << "the refused wait left no queue entry";
}

TEST_F(SemaphoreTest, WaitersAreServedFirstComeFirstServed) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("fifo");
  ASSERT_TRUE(s.TrySetPermits(3));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  // The first waiter needs all 3; a later one needing 1 must not overtake
  // it although 2 are free (it would starve the big one).
  auto big = Queue(*b, *a, "fifo", 3, 1);
  auto small = Queue(*b, *a, "fifo", 1, 2);
  EXPECT_FALSE(s.TryAcquire(1)) << "a try does not jump the queue";
  EXPECT_TRUE(StillWaiting(small, milliseconds(300)));
  EXPECT_TRUE(StillWaiting(big, milliseconds(0)));

  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  PermitResult got_big = big.get();
  ASSERT_TRUE(got_big);
  EXPECT_EQ(got_big.permits.count(), 3);
  EXPECT_TRUE(StillWaiting(small, milliseconds(200)));
  ASSERT_EQ(got_big.permits.Release(), ReleaseStatus::kReleased);
  PermitResult got_small = small.get();
  ASSERT_TRUE(got_small);
  // Woken by the releases, never by a bound (park cap and presence are long).
  EXPECT_EQ(a->stats().wakeups_bound + b->stats().wakeups_bound, 0u);
  EXPECT_GE(b->stats().wakeups_event, 1u) << "another process's release";
  EXPECT_GE(b->stats().wakeups_local, 1u) << "its own process's release";
}

TEST_F(SemaphoreTest, OneReleaseWakesEveryWaiterItsPermitsFit) {
  auto a = Connected();
  std::vector<std::unique_ptr<LockClient>> others;
  for (int i = 0; i < 3; ++i) others.push_back(Connected());
  Semaphore s = a->Semaphore("fan");
  ASSERT_TRUE(s.TrySetPermits(3));
  PermitResult all = s.TryAcquire(3);
  ASSERT_TRUE(all);
  std::vector<std::future<PermitResult>> waiting;
  for (int i = 0; i < 3; ++i)
    waiting.push_back(Queue(*others[i], *a, "fan", 1, i + 1));
  ASSERT_EQ(all.permits.Release(), ReleaseStatus::kReleased);
  std::vector<PermitResult> got;
  for (auto& f : waiting) {
    got.push_back(f.get());
    EXPECT_TRUE(got.back());
  }
  EXPECT_EQ(s.Inspect().used, 3);
  for (auto& o : others) EXPECT_EQ(o->stats().wakeups_bound, 0u);
}

TEST_F(SemaphoreTest, ALostEventCostsOneBoundedParkNotTheWait) {
  auto a = Connected();
  // Not on the bus: no event reaches it. Short presence: parks <= 100 ms.
  LockClientOptions o;
  o.presence_window = milliseconds(300);
  o.claim_window = milliseconds(250);
  auto deaf = NewClient(o);
  Semaphore s = a->Semaphore("deaf");
  ASSERT_TRUE(s.TrySetPermits(1));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  auto waiter = Queue(*deaf, *a, "deaf", 1, 1, {}, seconds(60));
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  PermitResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_GE(deaf->stats().wakeups_bound, 1u);
  EXPECT_EQ(deaf->stats().wakeups_event, 0u);
}

TEST_F(SemaphoreTest, AHolderThatStopsRenewingGivesItsPermitsBack) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("crash");
  ASSERT_TRUE(s.TrySetPermits(2));
  // An explicit lease is not renewed: as a holder that died, its permits
  // come back when the lease ends, and no event says so — the waiter's park
  // is bounded by the earliest lease's end.
  PermitResult dead = s.TryAcquire(2, {.lease = milliseconds(2000)});
  ASSERT_TRUE(dead);
  auto waiter = Queue(*b, *a, "crash", 1, 1);
  PermitResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_TRUE(dead.permits.lost());
  EXPECT_EQ(dead.permits.Release(), ReleaseStatus::kNotHeld)
      << "an expired set is not given back twice";
  EXPECT_EQ(s.Inspect().used, 1);
}

TEST_F(SemaphoreTest, TheWatchdogKeepsHeldPermitsAlive) {
  LockClientOptions o;
  o.default_lease = milliseconds(1000);
  auto a = Connected(o);
  auto b = Connected();
  Semaphore s = a->Semaphore("renewed");
  ASSERT_TRUE(s.TrySetPermits(1));
  std::atomic<int> lost{0};
  PermitResult held = s.TryAcquire(
      1, {.on_lost = [&](const std::string&, int64_t) { ++lost; }});
  ASSERT_TRUE(held);
  // Several leases long: renewed every lease/3, never lost, never taken.
  std::this_thread::sleep_for(milliseconds(3500));
  EXPECT_FALSE(held.permits.lost());
  EXPECT_FALSE(b->Semaphore("renewed").TryAcquire(1));
  EXPECT_GE(a->stats().renewals, 2u);
  EXPECT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(b->Semaphore("renewed").TryAcquire(1));
  EXPECT_EQ(lost.load(), 0);
}

TEST_F(SemaphoreTest, ASetTakenAwayIsToldAsLost) {
  LockClientOptions o;
  o.default_lease = milliseconds(1000);
  auto a = Connected(o);
  auto b = Connected();
  Semaphore s = a->Semaphore("taken");
  ASSERT_TRUE(s.TrySetPermits(1));
  std::atomic<int> lost{0};
  PermitResult held = s.TryAcquire(
      1, {.on_lost = [&](const std::string& name, int64_t permits) {
        EXPECT_EQ(name, "taken");
        EXPECT_EQ(permits, 1);
        ++lost;
      }});
  ASSERT_TRUE(held);
  const std::stop_token token = held.permits.stop_token();
  // Another process gives the set back by its id (e.g. an operator): the
  // holder's next renewal learns it is gone.
  EXPECT_EQ(b->Semaphore("taken").Release(held.permits.id()),
            ReleaseStatus::kReleased);
  EXPECT_TRUE(WaitUntil([&] { return lost.load() == 1; }));
  EXPECT_TRUE(token.stop_requested());
  EXPECT_TRUE(held.permits.lost());
  EXPECT_EQ(held.permits.Release(), ReleaseStatus::kNotHeld);
}

TEST_F(SemaphoreTest, ASetReleasedByIdInItsOwnClientIsToldAsLost) {
  auto a = Connected();
  Semaphore s = a->Semaphore("own");
  ASSERT_TRUE(s.TrySetPermits(1));
  std::atomic<int> lost{0};
  PermitResult held = s.TryAcquire(
      1, {.on_lost = [&](const std::string&, int64_t) { ++lost; }});
  ASSERT_TRUE(held);
  EXPECT_EQ(s.Release(held.permits.id()), ReleaseStatus::kReleased);
  EXPECT_TRUE(held.permits.lost()) << "at once, not at its lease's end";
  // The stop token and on_lost follow on the watchdog thread (as for any
  // lost lease), moments later rather than within the Release call.
  const std::stop_token token = held.permits.stop_token();
  EXPECT_TRUE(
      WaitUntil([&] { return lost.load() == 1 && token.stop_requested(); }));
  EXPECT_EQ(held.permits.Release(), ReleaseStatus::kNotHeld);
  EXPECT_EQ(s.Inspect().used, 0);
}

TEST_F(SemaphoreTest, AHandleOutlivingItsClientGetsNothing) {
  auto a = Connected();
  Semaphore s = a->Semaphore("gone");
  ASSERT_TRUE(s.TrySetPermits(1));
  subscribed_.clear();
  bus_.Unsubscribe(a.get());
  a.reset();
  EXPECT_THROW(s.TryAcquire(1), Error);
  EXPECT_EQ(NewClient()->Semaphore("gone").Inspect().used, 0)
      << "the set granted after the client went was given back";
}

TEST_F(SemaphoreTest, LoweringPermitsDropsAWaiterThatCanNoLongerFit) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("drop");
  ASSERT_TRUE(s.TrySetPermits(3));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  auto big = Queue(*b, *a, "drop", 3, 1);
  auto small = Queue(*b, *a, "drop", 1, 2);
  // 1 free of 2, the head needs 3: it is dropped (and woken: its try is
  // refused), the next one served by the same change (no bound: park cap
  // and presence are long).
  EXPECT_EQ(s.AddPermits(-1), 2);
  EXPECT_TRUE(small.get());
  EXPECT_THROW(big.get(), Error);
  EXPECT_EQ(b->stats().wakeups_bound, 0u);
}

TEST_F(SemaphoreTest, AForgedEventWakesButGrantsNothing) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("forged");
  ASSERT_TRUE(s.TrySetPermits(1));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  auto waiter = Queue(*b, *a, "forged", 1, 1);
  // Events naming every kind of waiter id — the real waiter's too, read
  // from the queue — as anyone who can write to the topic could send them:
  // the waiter wakes, asks Redis, parks again.
  const uint64_t parks = b->stats().permit_parks;
  const Reply queue = redis_->Execute(
      {"LRANGE", "lockfleet:{forged}:semaphore:queue", "0", "-1"});
  ASSERT_EQ(queue.elements.size(), 1u);
  for (const std::string& next :
       {std::string(), std::string("nobody"), queue.elements[0].str,
        queue.elements[0].str}) {
    UnlockEvent forged;
    forged.lock = "forged";
    forged.cause = UnlockCause::kPermits;
    forged.next_waiter = next;
    forged.client_id = "someone-else";
    b->DeliverUnlockEvent(forged);
  }
  EXPECT_TRUE(WaitUntil([&] { return b->stats().permit_parks > parks; }))
      << "woken, refused, parked again";
  EXPECT_TRUE(StillWaiting(waiter, milliseconds(500)));
  EXPECT_EQ(s.Inspect().used, 1) << "no permit out beyond the holder's";
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(waiter.get());
}

TEST_F(SemaphoreTest, AHandOffNobodyClaimsComesBack) {
  LockClientOptions o;
  o.presence_window = milliseconds(900);
  o.claim_window = milliseconds(400);
  auto a = Connected(o);
  auto b = Connected(o);
  Semaphore s = a->Semaphore("ghost");
  ASSERT_TRUE(s.TrySetPermits(1));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  // A waiter of a process that died after it queued (its presence still
  // runs): the release hands it the permit, nobody claims it.
  const Reply t = redis_->Execute({"TIME"});
  const long long now_ms = std::stoll(t.elements[0].str) * 1000 +
                           std::stoll(t.elements[1].str) / 1000;
  redis_->Execute({"RPUSH", "lockfleet:{ghost}:semaphore:queue", "ghost"});
  redis_->Execute({"HSET", "lockfleet:{ghost}:semaphore:waiters", "ghost",
                   std::to_string(now_ms + 60000) + "|1"});
  auto waiter = Queue(*b, *a, "ghost", 1, 2);
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(
      redis_->Execute({"HGET", "lockfleet:{ghost}:semaphore", "p:ghost"}).str,
      "1")
      << "handed to the head of the queue";
  PermitResult got = waiter.get();
  ASSERT_TRUE(got) << "the unclaimed hand-off came back after claim_window";
  EXPECT_EQ(s.Inspect().used, 1);
}

TEST_F(SemaphoreTest, AddingPermitsServesTheQueue) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("grow");
  ASSERT_TRUE(s.TrySetPermits(1));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  auto waiter = Queue(*b, *a, "grow", 1, 1);
  EXPECT_EQ(s.AddPermits(1), 2);
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(b->stats().wakeups_bound, 0u);
}

TEST_F(SemaphoreTest, LoweringPermitsBelowAWaitersNeedEndsItsWait) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("shrink");
  ASSERT_TRUE(s.TrySetPermits(3));
  PermitResult held = s.TryAcquire(2);
  ASSERT_TRUE(held);
  LockClientOptions o;
  o.presence_window = milliseconds(600);
  o.claim_window = milliseconds(300);
  auto short_parks = NewClient(o);
  auto waiter = Queue(*short_parks, *a, "shrink", 3, 1);
  // Permits out stay out: lowering takes back nothing already granted.
  EXPECT_EQ(s.AddPermits(-2), 1);
  EXPECT_FALSE(held.permits.lost());
  EXPECT_THROW(waiter.get(), Error);
  EXPECT_EQ(s.Inspect().waiters, 0);
  EXPECT_EQ(s.Inspect().available, 0) << "2 out of 1: over until released";
  EXPECT_FALSE(b->Semaphore("shrink").TryAcquire(1));
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(b->Semaphore("shrink").TryAcquire(1));
}

TEST_F(SemaphoreTest, ACancelledOrTimedOutWaiterLeavesTheQueue) {
  auto a = Connected();
  auto b = Connected();
  Semaphore s = a->Semaphore("leave");
  ASSERT_TRUE(s.TrySetPermits(1));
  PermitResult held = s.TryAcquire(1);
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto cancelled = Queue(*b, *a, "leave", 1, 1, {.stop = stop.get_token()});
  stop.request_stop();
  EXPECT_EQ(cancelled.get().status, AcquireStatus::kCancelled);
  EXPECT_EQ(s.Inspect().waiters, 0);
  PermitResult timed = b->Semaphore("leave").AcquireFor(1, milliseconds(300));
  EXPECT_EQ(timed.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(s.Inspect().waiters, 0);
  EXPECT_EQ(b->stats().permit_waiting, 0);
  // With nobody left queued, the release frees the permit for anyone.
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(b->Semaphore("leave").TryAcquire(1));
}

// Many threads of several "processes" taking 1 or 2 of 3 permits for a few
// ms: the permits out, counted by the holders themselves, never exceed 3.
TEST_F(SemaphoreTest, NeverMorePermitsOutThanTheSemaphoreHas) {
  constexpr int kClients = 4, kThreads = 3, kRounds = 25;
  constexpr int64_t kPermits = 3;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(Connected());
  ASSERT_TRUE(clients[0]->Semaphore("stress").TrySetPermits(kPermits));
  std::atomic<int64_t> out{0}, most{0}, violations{0}, acquired{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, c, t] {
        std::mt19937 rng(c * 100 + t);
        Semaphore s = clients[c]->Semaphore("stress");
        for (int i = 0; i < kRounds; ++i) {
          const int64_t k = 1 + static_cast<int64_t>(rng() % 2);
          PermitResult r = s.AcquireFor(k, seconds(120));
          if (!r) continue;
          ++acquired;
          const int64_t now = out += k;
          if (now > kPermits) ++violations;
          int64_t seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(milliseconds(1 + rng() % 3));
          out -= k;
          r.permits.Release();
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_LE(most.load(), kPermits);
  EXPECT_EQ(acquired.load(), kClients * kThreads * kRounds);
  SemaphoreInfo info = clients[0]->Semaphore("stress").Inspect();
  EXPECT_EQ(info.used, 0);
  EXPECT_EQ(info.waiters, 0);
}

}  // namespace
}  // namespace lockfleet::testing
