// WATCH/MULTI/EXEC check-and-set under concurrent writers.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet::testing {
namespace {

class Optimistic : public LockTest {};

// "Decrement stock if > 0": returns the writes, or nullopt when sold out.
OptimisticDecide BuyOne(const std::string& key) {
  return [key](const std::vector<std::optional<std::string>>& v)
             -> std::optional<std::vector<Command>> {
    long stock = v[0] ? std::stol(*v[0]) : 0;
    if (stock <= 0) return std::nullopt;
    return std::vector<Command>{{"SET", key, std::to_string(stock - 1)}};
  };
}

TEST_F(Optimistic, ConcurrentBuyersNeverOversell) {
  redis_->Execute({"SET", "stock", "100"});
  constexpr int kThreads = 8;
  constexpr int kTriesEach = 30;  // 240 buyers for 100 units
  std::atomic<int> bought{0}, sold_out{0}, gave_up{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto redis = NewRedis(1);  // each buyer its own connection
      for (int i = 0; i < kTriesEach; ++i) {
        OptimisticResult r =
            redis->OptimisticUpdate({"stock"}, BuyOne("stock"), 1000);
        conflicts += r.conflicts;
        if (r.status == OptimisticStatus::kCommitted) ++bought;
        if (r.status == OptimisticStatus::kAborted) ++sold_out;
        if (r.status == OptimisticStatus::kConflict) ++gave_up;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bought.load(), 100);
  EXPECT_EQ(sold_out.load(), kThreads * kTriesEach - 100);
  EXPECT_EQ(gave_up.load(), 0);
  EXPECT_EQ(redis_->Execute({"GET", "stock"}).str, "0");
  std::printf("optimistic: 100 units sold to %d buyers, %d conflicts retried\n",
              kThreads * kTriesEach, conflicts.load());
}

TEST_F(Optimistic, AbortWritesNothing) {
  OptimisticResult r = redis_->OptimisticUpdate({"empty"}, BuyOne("empty"));
  EXPECT_EQ(r.status, OptimisticStatus::kAborted);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_TRUE(redis_->Execute({"GET", "empty"}).is_nil());
}

TEST_F(Optimistic, ConflictIsReportedWhenRetriesRunOut) {
  redis_->Execute({"SET", "k", "5"});
  auto intruder = NewRedis(1);
  int calls = 0;
  OptimisticResult r = redis_->OptimisticUpdate(
      {"k"},
      [&](const std::vector<std::optional<std::string>>& v)
          -> std::optional<std::vector<Command>> {
        ++calls;
        intruder->Execute({"INCR", "k"});  // a concurrent writer, every time
        return std::vector<Command>{{"SET", "k", *v[0] + "0"}};
      },
      3);
  EXPECT_EQ(r.status, OptimisticStatus::kConflict);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.conflicts, 3);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(redis_->Execute({"GET", "k"}).str, "8");  // only the intruder wrote
}

TEST_F(Optimistic, CommittedRepliesAndMultipleKeys) {
  redis_->Execute({"SET", "{acct}:a", "10"});
  OptimisticResult r = redis_->OptimisticUpdate(
      {"{acct}:a", "{acct}:b"},
      [](const std::vector<std::optional<std::string>>& v)
          -> std::optional<std::vector<Command>> {
        EXPECT_EQ(*v[0], "10");
        EXPECT_FALSE(v[1].has_value());
        return std::vector<Command>{{"DECRBY", "{acct}:a", "3"},
                                    {"INCRBY", "{acct}:b", "3"}};
      });
  ASSERT_EQ(r.status, OptimisticStatus::kCommitted);
  ASSERT_EQ(r.replies.size(), 2u);
  EXPECT_EQ(r.replies[0].integer, 7);
  EXPECT_EQ(r.replies[1].integer, 3);
}

TEST_F(Optimistic, MalformedCommandIsAnErrorNotAConflict) {
  try {
    redis_->OptimisticUpdate(
        {"x"}, [](const auto&) -> std::optional<std::vector<Command>> {
          return std::vector<Command>{{"SET", "x"}};  // wrong arity
        });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  // The connection is still usable afterwards (nothing left WATCHed/queued).
  EXPECT_EQ(redis_->Execute({"PING"}).str, "PONG");
}

}  // namespace
}  // namespace lockfleet::testing
