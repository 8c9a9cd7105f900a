// Signed unlock events through real KafkaNotifier pairs, the embedded broker
// and a real redis-server: with an event key, records that anyone else
// writes to the unlock topic are counted and never reach a LockClient.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kafka_process.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/event_auth.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::notifier {
namespace {

using lockfleet::testing::WaitUntil;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Forge;
using testing::Process;
using testing::Quiet;

const std::string kKey = "signed-events-test-key-0001";
const std::string kOtherKey = "signed-events-test-key-0002";

class SignedEvents : public testing::KafkaRedisTest {};

// On both brokers: forged records written by another client of the topic.
class ForgedEvents : public testing::BothBrokersTest {};
INSTANTIATE_TEST_SUITE_P(Brokers, ForgedEvents, ::testing::Values(false, true),
                         testing::BrokerName);

TEST_F(SignedEvents, ReleaseWakesAWaiterInAnotherProcess) {
  Process holder(redis_->url(), broker_->bootstrap(), {.event_keys = {kKey}});
  Process waiter(redis_->url(), broker_->bootstrap(),
                 {.event_keys = {kOtherKey, kKey}});
  ASSERT_TRUE(holder.notifier->authenticates_events());
  EXPECT_TRUE(holder.notifier->options().event_keys.empty())
      << "the keys are not handed back out";
  AcquireResult held = holder.locks->TryAcquire("signed:1");  // 30 s lease
  ASSERT_TRUE(held);
  auto fut = std::async(std::launch::async, [&] {
    return waiter.locks->AcquireFor("signed:1", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return waiter.locks->stats().contended_attempts >= 1; }));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  ASSERT_TRUE(fut.get());
  EXPECT_EQ(waiter.locks->stats().wakeups_event, 1u);
  EXPECT_EQ(waiter.notifier->stats().malformed, 0u);
  EXPECT_GE(waiter.notifier->stats().consumed, 1u);
}

// The threat without a key: a forged event reaches the client and wakes a
// waiter (an extra Redis attempt; it finds the lock still held).
TEST_F(SignedEvents, WithoutAKeyAForgedEventWakesAWaiter) {
  Process holder(redis_->url(), broker_->bootstrap());
  Process waiter(redis_->url(), broker_->bootstrap());
  AcquireResult held = holder.locks->TryAcquire("unsigned:1");
  ASSERT_TRUE(held);
  auto fut = std::async(std::launch::async, [&] {
    return waiter.locks->AcquireFor("unsigned:1", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return waiter.locks->stats().contended_attempts >= 1; }));
  Forge(broker_->bootstrap(),
        {R"({"v":1,"lock":"unsigned:1","client":"forger","cause":"release"})"});
  EXPECT_TRUE(
      WaitUntil([&] { return waiter.locks->stats().wakeups_event >= 1; }));
  EXPECT_TRUE(held.lease.held());
  EXPECT_EQ(fut.wait_for(milliseconds(0)), std::future_status::timeout)
      << "the lock is still held: the waiter went back to waiting";
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(fut.get());
}

TEST_P(ForgedEvents, AreCountedAndWakeNobody) {
  Process holder(redis_->url(), bootstrap(),
                 {.event_keys = {kKey}, .topic = unlock_topic()});
  Process waiter(redis_->url(), bootstrap(),
                 {.event_keys = {kKey}, .topic = unlock_topic()});
  AcquireResult held = holder.locks->TryAcquire("forged:1");  // 30 s lease
  ASSERT_TRUE(held);
  auto fut = std::async(std::launch::async, [&] {
    return waiter.locks->AcquireFor("forged:1", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return waiter.locks->stats().contended_attempts >= 1; }));
  const LockStats holder_before = holder.locks->stats();
  const LockStats waiter_before = waiter.locks->stats();

  // What a writer to the topic can send without the key: a plain release,
  // a force-unlock naming the holder's own owner token and fence (both
  // travel on the topic), and events signed with some other key.
  UnlockEvent force{.lock = "forged:1",
                    .owner = held.lease.owner(),
                    .client_id = "forger",
                    .fence = held.lease.fence(),
                    .cause = UnlockCause::kForce};
  UnlockEvent release{.lock = "forged:1", .client_id = "forger"};
  const EventAuthenticator wrong({kOtherKey});
  Forge(bootstrap(),
        {EncodeUnlockEvent(release), EncodeUnlockEvent(force),
         wrong.Encode(release), wrong.Encode(force),
         EncodeUnlockEvent(force, "hmac-sha256-v1:" + std::string(64, '0'))},
        unlock_topic());
  for (Process* p : {&holder, &waiter}) {
    EXPECT_TRUE(WaitUntil([&] {
      return p->Dropped("unsigned") == 2 && p->Dropped("bad_signature") == 3;
    })) << p->Dropped("unsigned")
        << " " << p->Dropped("bad_signature");
  }
  // A refused record is counted when it is refused, so every one of them
  // has been dealt with by now. None reached a LockClient: no event
  // delivered, no wake-up, and the holder's grant untouched.
  EXPECT_EQ(waiter.locks->stats().events_received,
            waiter_before.events_received);
  EXPECT_EQ(waiter.locks->stats().wakeups_event, waiter_before.wakeups_event);
  EXPECT_EQ(holder.locks->stats().events_received,
            holder_before.events_received);
  EXPECT_TRUE(held.lease.held());
  EXPECT_FALSE(held.lease.lost());
  EXPECT_EQ(fut.wait_for(milliseconds(0)), std::future_status::timeout);

  // The genuine release still wakes the waiter at once.
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  ASSERT_TRUE(fut.get());
  EXPECT_EQ(waiter.locks->stats().wakeups_event,
            waiter_before.wakeups_event + 1);
  EXPECT_EQ(waiter.notifier->stats().malformed, 5u);
}

TEST_F(SignedEvents, ProcessesWithoutTheKeyAreNotHeard) {
  Process keyed(redis_->url(), broker_->bootstrap(), {.event_keys = {kKey}});
  Process unkeyed(redis_->url(), broker_->bootstrap());
  Process other_key(redis_->url(), broker_->bootstrap(),
                    {.event_keys = {kOtherKey}});
  ASSERT_TRUE(unkeyed.locks->TryAcquire("mixed:1"));    // publishes unsigned
  ASSERT_TRUE(other_key.locks->TryAcquire("mixed:2"));  // signed, other key
  EXPECT_TRUE(WaitUntil([&] {
    return keyed.Dropped("unsigned") == 1 &&
           keyed.Dropped("bad_signature") == 1;
  }));
  // A process without a key ignores signatures: it hears everyone.
  ASSERT_TRUE(keyed.locks->TryAcquire("mixed:3"));
  EXPECT_TRUE(  // its own event, and both others'
      WaitUntil([&] { return unkeyed.notifier->stats().consumed >= 3; }));
  EXPECT_EQ(unkeyed.notifier->stats().malformed, 0u);
}

TEST_F(SignedEvents, ShortKeyIsRefusedWithoutShowingIt) {
  KafkaOptions k;
  k.bootstrap = broker_->bootstrap();
  k.event_keys = {"too-short-key"};
  k.log = Quiet;
  try {
    KafkaNotifier n(k);
    FAIL() << "accepted a 13-byte key";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).find("too-short-key"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockfleet::notifier
