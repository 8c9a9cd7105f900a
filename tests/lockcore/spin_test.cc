// Spinning (issue 16, item 1): the head of a fair queue checks for its grant
// itself around the holder's expected release. What must hold: a check
// claims only a grant made to the checking waiter (never a free lock, never
// another's grant), so there is never a second holder and the queue order
// stands; the head finds its grant without an event; a long hold costs at
// most one bounded episode of checks and a 200 ms hold none; a holder that
// dies mid-hold is not overtaken before its lease ends.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "key_slot.h"
#include "lock_fixture.h"
#include "scripts.h"
#include "spin_advisor.h"
#include "support/fake_clock.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using internal::SpinAdvisor;
using std::chrono::milliseconds;
using std::chrono::seconds;

class Spin : public ConnectedLockTest {
 protected:
  // Two processes' worth of clients; spinning allowed for gaps up to 100 ms
  // (a loaded 2-core machine stretches a 2 ms hold), a 0.9 s park cap as the
  // fallback when a check fails and no event comes.
  std::unique_ptr<LockClient> SpinClient() {
    LockClientOptions o;
    o.presence_window = seconds(30);
    o.claim_window = seconds(20);
    o.park_cap = milliseconds(900);  // not the default: kept as it is
    o.spin_max_hold = milliseconds(100);
    return Connected(o);
  }

  struct Tally {
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> done{0};
    std::mutex mu;
    int64_t last_fence = 0;
    int regressions = 0;
  };

  // `rounds` acquisitions of `name` on each client, each held `hold`; every
  // critical section is checked for overlap and fence order. `after_each`
  // runs after each release with the count of finished acquisitions.
  void PingPong(const std::vector<LockClient*>& clients,
                const std::string& name, int rounds, milliseconds hold,
                Tally& tally,
                const std::function<void(int)>& after_each = nullptr) {
    std::vector<std::thread> threads;
    for (LockClient* client : clients) {
      threads.emplace_back([&, client] {
        for (int i = 0; i < rounds; ++i) {
          AcquireResult r = client->AcquireFor(name, seconds(20));
          ASSERT_TRUE(r) << r.last_error;
          if (tally.inside.fetch_add(1) != 0) ++tally.overlaps;
          {
            std::lock_guard lock(tally.mu);
            if (r.lease.fence() <= tally.last_fence) ++tally.regressions;
            tally.last_fence = r.lease.fence();
          }
          std::this_thread::sleep_for(hold);
          tally.inside.fetch_sub(1);
          ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
          const int done = ++tally.done;
          if (after_each) after_each(done);
        }
      });
    }
    for (auto& t : threads) t.join();
  }

  static uint64_t Sum(const std::vector<LockClient*>& clients,
                      uint64_t LockStats::*field) {
    uint64_t n = 0;
    for (LockClient* c : clients) n += c->stats().*field;
    return n;
  }
};

TEST_F(Spin, TheHeadFindsItsGrantWithoutAnEvent) {
  auto a = SpinClient();
  auto b = SpinClient();
  const std::vector<LockClient*> both = {a.get(), b.get()};
  // First with events (the clients learn how fast the lock changes hands),
  // then with every event lost: only a check, or the 1 s park cap, can
  // tell a waiter that the lock was handed to it.
  constexpr int kRounds = 60;
  std::atomic<uint64_t> spin_wins_at_cut{0}, events_at_cut{0};
  std::atomic<bool> cut{false};
  Tally tally;
  PingPong(both, "hot", kRounds, milliseconds(2), tally, [&](int done) {
    if (done == kRounds && !cut.exchange(true)) {
      bus_.SetDelivering(false);
      spin_wins_at_cut = Sum(both, &LockStats::wakeups_spin);
      events_at_cut = Sum(both, &LockStats::wakeups_event);
    }
  });
  EXPECT_EQ(tally.overlaps.load(), 0);
  EXPECT_EQ(tally.regressions, 0);
  const uint64_t wins = Sum(both, &LockStats::wakeups_spin) - spin_wins_at_cut;
  const uint64_t bound = Sum(both, &LockStats::wakeups_bound);
  std::printf(
      "without events: %llu of %d hand-offs found by a spin check, "
      "%llu park bounds; %llu checks in all\n",
      static_cast<unsigned long long>(wins), kRounds,
      static_cast<unsigned long long>(bound),
      static_cast<unsigned long long>(Sum(both, &LockStats::spins)));
  // Without spinning none would be (only the park cap would end a wait);
  // with it most are, on a quiet machine 59 of 60. A slow cycle on a loaded
  // one (a 2 ms hold taking 10) makes a head's checks miss and that hand-off
  // wait for the cap: a local CI run with the tests 2 at a time saw 2 of 60.
  // So only that spinning works at all is asserted, in every build; how
  // well it works is bench/spin.md's to measure (a ratio is a speed target,
  // not a test).
  EXPECT_GE(wins, 1u);
  EXPECT_LE(Sum(both, &LockStats::spins),
            uint64_t(SpinAdvisor::kMaxChecks * 2 * kRounds));
  EXPECT_FALSE(a->Inspect("hot").locked);
}

TEST_F(Spin, ALongHoldCostsOneBoundedEpisodeOfChecksAtMost) {
  auto a = SpinClient();
  auto b = SpinClient();
  Tally tally;
  PingPong({a.get(), b.get()}, "hot", 20, milliseconds(2), tally);
  ASSERT_EQ(tally.overlaps.load(), 0);
  const uint64_t spins = b->stats().spins;
  const uint64_t events = b->stats().wakeups_event;
  for (int i = 0; i < 2; ++i) {
    AcquireResult held = a->AcquireFor("hot", seconds(20));
    ASSERT_TRUE(held);
    auto waited = Queue(*b, *a, "hot", 1);
    std::this_thread::sleep_for(milliseconds(500));  // far past the gap
    ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
    AcquireResult r = waited.get();
    ASSERT_TRUE(r);
    EXPECT_GT(r.lease.fence(), held.lease.fence());
  }
  // At most one episode of checks: a failed one makes the next skip.
  EXPECT_LE(b->stats().spins - spins, uint64_t(SpinAdvisor::kMaxChecks));
  EXPECT_EQ(b->stats().wakeups_event - events, 2u) << "the event woke it";
}

TEST_F(Spin, ALockHeldFor200msCostsNoCheck) {
  auto a = SpinClient();
  auto b = SpinClient();
  Tally tally;
  PingPong({a.get(), b.get()}, "slow", 4, milliseconds(200), tally);
  EXPECT_EQ(tally.overlaps.load(), 0);
  EXPECT_EQ(a->stats().spins + b->stats().spins, 0u);
  EXPECT_EQ(a->stats().wakeups_spin + b->stats().wakeups_spin, 0u);
}

TEST_F(Spin, AHolderThatDiesMidHoldIsNotOvertaken) {
  auto a = SpinClient();
  auto b = SpinClient();
  Tally tally;
  PingPong({a.get(), b.get()}, "hot", 20, milliseconds(2), tally);
  ASSERT_EQ(tally.overlaps.load(), 0);
  // `a` takes the lock with a 600 ms lease and dies: no release, no
  // renewal, no event. Its grant stands in Redis until the lease ends.
  bus_.SetDelivering(false);
  AcquireResult dead =
      a->AcquireFor("hot", seconds(20), {.lease = milliseconds(600)});
  ASSERT_TRUE(dead);
  const auto taken = std::chrono::steady_clock::now();
  const uint64_t spins = b->stats().spins;
  AcquireResult r = b->AcquireFor("hot", seconds(20));
  const auto got = std::chrono::steady_clock::now();
  ASSERT_TRUE(r);
  EXPECT_GE(got - taken, milliseconds(590)) << "granted before the lease ended";
  EXPECT_GT(r.lease.fence(), dead.lease.fence());
  EXPECT_LE(b->stats().spins - spins, uint64_t(SpinAdvisor::kMaxChecks));
  EXPECT_EQ(dead.lease.Release(), ReleaseStatus::kNotOwner);
}

// The check script itself: it claims a grant pending to its waiter, and
// nothing else.
TEST_F(Spin, ACheckClaimsOnlyAGrantPendingToItsOwnWaiter) {
  const std::string key = LockKey("s");
  auto check = [&](const std::string& owner, const std::string& waiter) {
    return redis_->Eval(internal::SpinClaimScript(), {key},
                        {owner, "5000", "hold-1", waiter});
  };
  // Free: nothing taken, nothing written.
  Reply r = check("o1", "w:1");
  EXPECT_EQ(r.elements[0].integer, 0);
  EXPECT_EQ(r.elements[2].str, "");
  EXPECT_EQ(redis_->Execute({"EXISTS", key}).integer, 0);
  // Handed to w:1 (owner o1), not claimed yet.
  redis_->Execute({"HSET", key, "owner", "o1", "count", "0", "fence", "7",
                   "pending", "w:1"});
  redis_->Execute({"PEXPIRE", key, "2000"});
  // Another waiter — with another owner token, or the same — gets nothing.
  for (const auto& [owner, waiter] :
       std::vector<std::pair<std::string, std::string>>{
           {"o2", "w:2"}, {"o1", "w:2"}, {"o2", "w:1"}}) {
    r = check(owner, waiter);
    EXPECT_EQ(r.elements[0].integer, 0) << owner << " " << waiter;
    EXPECT_EQ(r.elements[2].str, "o1");
    EXPECT_EQ(redis_->Execute({"HGET", key, "pending"}).str, "w:1");
  }
  // The grantee claims it: its hold, its lease, nothing pending (count 1:
  // the pending field left behind means nothing).
  r = check("o1", "w:1");
  ASSERT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[1].integer, 7);
  EXPECT_EQ(redis_->Execute({"HGET", key, "count"}).str, "1");
  EXPECT_EQ(redis_->Execute({"HGET", key, "pending"}).str, "w:1");
  EXPECT_EQ(SpinClient()->Inspect("s").pending_waiter, "");
  EXPECT_EQ(redis_->Execute({"HGET", key, "h:hold-1"}).str, "1");
  EXPECT_GT(redis_->Execute({"PTTL", key}).integer, 2000);
  // A second check (a retry whose first reply was lost) claims nothing
  // more: the caller's full attempt re-enters the grant.
  r = check("o1", "w:1");
  EXPECT_EQ(r.elements[0].integer, 0);
  EXPECT_EQ(r.elements[2].str, "o1");
  EXPECT_EQ(redis_->Execute({"HGET", key, "count"}).str, "1");
}

// The refused attempt of a fair waiter that queues reports its place (1 =
// the head, whom the next release grants to): only the head plans checks.
TEST_F(Spin, ARefusedAttemptReportsItsPlaceInTheQueue) {
  auto holder = SpinClient();
  AcquireResult held = holder->TryAcquire("q");
  ASSERT_TRUE(held);
  const std::string lock = LockKey("q");
  const std::vector<std::string> keys = {
      lock, internal::FenceCounterKey("lockfleet", lock), "lockfleet:{q}:queue",
      "lockfleet:{q}:waiters"};
  auto attempt = [&](const std::string& waiter, const char* enqueue) {
    return redis_->Eval(
        internal::AcquireFairScript(), keys,
        {"o-" + waiter, "5000", "h-" + waiter, waiter, "3000", enqueue});
  };
  Reply r = attempt("w:1", "1");
  ASSERT_EQ(r.elements.size(), 7u);
  EXPECT_EQ(r.elements[0].integer, 0);
  EXPECT_EQ(r.elements[3].integer, 1);
  EXPECT_EQ(r.elements[5].integer, held.lease.fence()) << "behind this grant";
  // The grant's age (its fence is the server's clock when it was made): a
  // moment ago, well under a minute.
  EXPECT_GE(r.elements[4].integer, 0);
  EXPECT_LT(r.elements[4].integer, 60'000'000);
  EXPECT_EQ(r.elements[6].integer, 0) << "a new grant, not a hand-off";
  r = attempt("w:2", "1");
  EXPECT_EQ(r.elements[3].integer, 2);
  r = attempt("w:1", "1");  // a refresh keeps its place
  EXPECT_EQ(r.elements[3].integer, 1);
  r = attempt("w:3", "0");  // a try that does not queue has no place
  EXPECT_EQ(r.elements.size(), 3u);
  // A grant whose fence is not a time (a counter rolled ahead of the clock):
  // its age is unknown, nobody spins on it.
  redis_->Execute({"HSET", lock, "fence", "99999999999999999"});
  r = attempt("w:1", "1");
  EXPECT_EQ(r.elements[4].integer, -1);
  // A claimed hand-off (count 1, the claimed pending field left behind):
  // its age counts from its fence, as any grant's, and it says it is one
  // (its hold began at the claim, later).
  const Reply time = redis_->Execute({"TIME"});
  const std::string now_us =
      std::to_string(std::stoll(time.elements[0].str) * 1'000'000 +
                     std::stoll(time.elements[1].str));
  redis_->Execute({"HSET", lock, "fence", now_us, "pending", "w:9"});
  r = attempt("w:1", "1");
  EXPECT_GE(r.elements[4].integer, 0);
  EXPECT_LT(r.elements[4].integer, 60'000'000);
  EXPECT_EQ(r.elements[6].integer, 1);
  // A hand-off not claimed yet (no hold: count 0): -2 (the hold has not
  // begun).
  redis_->Execute({"HSET", lock, "count", "0"});
  r = attempt("w:1", "1");
  EXPECT_EQ(r.elements[4].integer, -2);
}

// Joining a queue reads the place from the queue's new length (no search);
// past the first 64 the place is unknown (0), as for a waiter already
// queued. The queue's two keys live at least twice the presence of every
// waiter that joined or refreshed: a longer presence raises their time to
// live, a shorter one never lowers it, and a key that lost its time to live
// gets one back.
TEST_F(Spin, PlacesPast64AreUnknownAndTheQueueOutlivesEveryPresence) {
  auto holder = SpinClient();
  AcquireResult held = holder->TryAcquire("deep");
  ASSERT_TRUE(held);
  const std::string lock = LockKey("deep");
  const std::string queue = "lockfleet:{deep}:queue";
  const std::string waiters = "lockfleet:{deep}:waiters";
  const std::vector<std::string> keys = {
      lock, internal::FenceCounterKey("lockfleet", lock), queue, waiters};
  auto attempt = [&](int waiter, int presence_ms) {
    const std::string w = "w:" + std::to_string(waiter);
    Reply r = redis_->Eval(
        internal::AcquireFairScript(), keys,
        {"o-" + w, "5000", "h-" + w, w, std::to_string(presence_ms), "1"});
    EXPECT_EQ(r.elements.size(), 7u);
    EXPECT_EQ(r.elements[0].integer, 0);
    return r.elements[3].integer;
  };
  auto ttl = [&](const std::string& key) {
    return redis_->Execute({"PTTL", key}).integer;
  };
  EXPECT_EQ(attempt(0, 3000), 1);
  for (const std::string& key : {queue, waiters}) {
    EXPECT_GT(ttl(key), 4000) << key;
    EXPECT_LE(ttl(key), 6000) << key;
  }
  EXPECT_EQ(attempt(1, 20000), 2);
  for (const std::string& key : {queue, waiters})
    EXPECT_GT(ttl(key), 30000) << key << ": raised for the longer presence";
  EXPECT_EQ(attempt(2, 1000), 3);
  EXPECT_EQ(attempt(0, 3000), 1);  // a refresh: found by its place
  for (const std::string& key : {queue, waiters})
    EXPECT_GT(ttl(key), 30000) << key << ": a shorter presence keeps it";
  // A key without a time to live (an operator's PERSIST, a restore) gets
  // one at the next join.
  redis_->Execute({"PERSIST", waiters});
  redis_->Execute({"PERSIST", queue});
  EXPECT_EQ(attempt(3, 1000), 4);
  for (const std::string& key : {queue, waiters}) {
    EXPECT_GT(ttl(key), 0) << key;
    EXPECT_LE(ttl(key), 2000) << key;
  }
  for (int i = 4; i < 64; ++i) ASSERT_EQ(attempt(i, 60000), i + 1);
  EXPECT_EQ(attempt(64, 60000), 0) << "the 65th: not looked for";
  EXPECT_EQ(attempt(63, 60000), 64);  // refreshes, found by LPOS
  EXPECT_EQ(attempt(64, 60000), 0);
  EXPECT_EQ(redis_->Execute({"LLEN", queue}).integer, 65);
  EXPECT_EQ(redis_->Execute({"HLEN", waiters}).integer, 65);
}

// A claim (the fair acquire of the waiter a release handed the lock to)
// finds itself off the queue already — the hand-off took it — and leaves
// the rest in order: the next release hands on to the next waiter.
TEST_F(Spin, AClaimLeavesTheRestOfTheQueueInOrder) {
  const std::string lock = LockKey("claims");
  const std::string queue = "lockfleet:{claims}:queue";
  const std::string waiters = "lockfleet:{claims}:waiters";
  const std::vector<std::string> keys = {
      lock, internal::FenceCounterKey("lockfleet", lock), queue, waiters};
  auto attempt = [&](int i) {
    const std::string n = std::to_string(i);
    return redis_->Eval(internal::AcquireFairScript(), keys,
                        {"o" + n, "60000", "h" + n, "w:" + n, "30000", "1"});
  };
  auto release = [&](int i, int64_t fence) {
    const std::string n = std::to_string(i);
    std::vector<std::string> k = keys;
    k.push_back("lockfleet:{claims}:latch:h" + n);
    return redis_->Eval(
        internal::ReleaseScript(), k,
        {"o" + n, std::to_string(fence), "h" + n, "2000", "10000"});
  };
  auto list = [&](std::vector<std::string> command) {
    std::vector<std::string> out;
    for (const Reply& e : redis_->Execute(command).elements)
      out.push_back(e.str);
    return out;
  };
  Reply r = attempt(0);
  ASSERT_EQ(r.elements[0].integer, 1);
  int64_t fence = r.elements[1].integer;
  ASSERT_EQ(attempt(1).elements[0].integer, 0);
  ASSERT_EQ(attempt(2).elements[0].integer, 0);
  for (int holder : {1, 2}) {
    r = release(holder - 1, fence);
    ASSERT_EQ(r.elements[0].integer, 3) << holder;
    EXPECT_EQ(r.elements[1].str, "w:" + std::to_string(holder));
    fence = r.elements[3].integer;
    r = attempt(holder);  // the claim
    ASSERT_EQ(r.elements[0].integer, 1) << holder;
    EXPECT_EQ(r.elements[1].integer, fence);
    const std::vector<std::string> rest = holder == 1
                                              ? std::vector<std::string>{"w:2"}
                                              : std::vector<std::string>{};
    EXPECT_EQ(list({"LRANGE", queue, "0", "-1"}), rest) << holder;
    EXPECT_EQ(list({"HKEYS", waiters}), rest) << holder;
  }
  EXPECT_EQ(release(2, fence).elements[0].integer, 1);  // nobody left
  EXPECT_EQ(redis_->Execute({"EXISTS", lock}).integer, 0);
}

// A waiter at place 2 sends no check while the head and the holder are
// still ahead of it: only the head spins. And spinning keeps the queue's
// order: the head is granted first, then the next, each with a larger
// fence.
TEST_F(Spin, OnlyTheHeadChecks) {
  // Long enough holds that a fresh hold is well inside every plan's window
  // on a loaded machine: 20 ms, spinning allowed up to 100 ms.
  auto holder = SpinClient();
  auto first = SpinClient();
  auto second = SpinClient();
  Tally tally;
  PingPong({first.get(), second.get()}, "q2", 6, milliseconds(20), tally);
  ASSERT_EQ(tally.overlaps.load(), 0);
  AcquireResult held = holder->AcquireFor("q2", seconds(20));
  ASSERT_TRUE(held);
  const uint64_t first_spins = first->stats().spins;
  const uint64_t second_spins = second->stats().spins;
  auto f1 = Queue(*first, *holder, "q2", 1);
  auto f2 = Queue(*second, *holder, "q2", 2);
  std::this_thread::sleep_for(milliseconds(300));  // the head's checks ran
  EXPECT_EQ(second->stats().spins, second_spins) << "place 2 sent a check";
  std::printf(
      "the head sent %llu checks while the lock was held\n",
      static_cast<unsigned long long>(first->stats().spins - first_spins));
  EXPECT_LE(first->stats().spins - first_spins,
            uint64_t(SpinAdvisor::kMaxChecks));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r1 = f1.get();
  ASSERT_TRUE(r1);
  EXPECT_GT(r1.lease.fence(), held.lease.fence());
  ASSERT_EQ(r1.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r2 = f2.get();
  ASSERT_TRUE(r2);
  EXPECT_GT(r2.lease.fence(), r1.lease.fence());
}

// With a clock that never moves (a fake clock), a head's checks are still
// bounded by their number: it sends at most one episode's worth per round
// of its wait, then parks.
TEST_F(Spin, ChecksAreBoundedWhenTheClockStandsStill) {
  auto clock = std::make_shared<FakeClock>();
  LockClientOptions o;
  o.presence_window = seconds(30);
  o.claim_window = seconds(20);
  o.park_cap = milliseconds(900);
  o.spin_max_hold = milliseconds(100);
  o.clock = clock;
  auto waiter = Connected(o);
  auto holder = SpinClient();
  // The waiter's client learns a 2 ms hold (the fake clock moves only here).
  for (int i = 0; i < 5; ++i) {
    AcquireResult r = waiter->TryAcquire("still");
    ASSERT_TRUE(r);
    clock->Advance(milliseconds(2));
    ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  }
  bus_.SetDelivering(false);  // only checks and bounds can end its parks
  AcquireResult held = holder->AcquireFor("still", seconds(20));
  ASSERT_TRUE(held);
  auto waited = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("still", seconds(20));
  });
  std::this_thread::sleep_for(milliseconds(1500));  // about two rounds
  const uint64_t spins = waiter->stats().spins;
  EXPECT_LE(spins, uint64_t(2 * SpinAdvisor::kMaxChecks));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r = waited.get();  // its next round claims the grant
  ASSERT_TRUE(r);
  EXPECT_GT(r.lease.fence(), held.lease.fence());
}

}  // namespace
}  // namespace lockfleet::testing
