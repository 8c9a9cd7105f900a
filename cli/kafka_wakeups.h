// Kafka unlock events for `lockfleet lock`: a speed-up, never a dependency.
//
// With --kafka BOOTSTRAP (or $LOCKFLEET_KAFKA) lockfleet publishes an unlock
// event when it releases a lock, and a lockfleet waiting for that lock in
// another process wakes up on it at once instead of at its next retry (at
// most --park-cap later). Without Kafka, or while Kafka is unreachable, only
// waiters in the same process are woken early and every other waiter retries
// on its park bound: slower, never wrong. Nothing Kafka does changes whether
// the lock is acquired, how COMMAND runs or the exit status.
//
// Thread-safety: the functions are thread-safe; see each class.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

// Checks the form of a bootstrap list, "HOST[:PORT][,HOST[:PORT]...]" (a
// PORT must be 1..65535; an IPv6 HOST goes in brackets). Returns an empty
// string if it is fine, else what is wrong with it.
std::string CheckBootstrap(std::string_view bootstrap);

// A KafkaNotifier for `options` whose warnings and errors go to stderr as
// "lockfleet: kafka warning: ..." lines (librdkafka's own rate-limited
// messages; nothing below warning level) unless options.log is set. Does not
// wait for the broker. Throws Error(kInvalidArgument) for a bad bootstrap,
// key or property, Error(kKafka) if librdkafka refuses to start.
std::shared_ptr<notifier::KafkaNotifier> StartKafka(
    notifier::KafkaOptions options);

// StartKafka for a tool to which Kafka is only a speed-up: nullptr without
// `options`. A bad bootstrap, key or property is the user's: it is printed
// as "SOURCE: ..." and *bad set (exit 2). Any other failure is one warning,
// "cannot start the Kafka client (...); WITHOUT", and nullptr.
std::shared_ptr<notifier::KafkaNotifier> StartOptionalKafka(
    const std::optional<notifier::KafkaOptions>& options,
    const std::string& source, std::string_view without, bool* bad);

// Destroys `notifier` — which flushes its last unlock events for up to 1 s —
// on another thread, and waits for that at most `budget`. Returns false if
// it did not finish in time: a consumer thread blocked inside librdkafka
// (which happens when the broker dies in the middle of certain requests)
// keeps it from finishing, maybe for good. The process must then end with
// _exit, without running destructors. REQUIRES: nothing else holds a
// reference to `notifier` (or the wait covers nothing).
bool ShutDownKafka(std::shared_ptr<notifier::KafkaNotifier> notifier,
                   std::chrono::milliseconds budget);

// The end of a tool that may have started Kafka: returns `status` after
// ShutDownKafka(notifier, budget) — or, when that did not finish in time,
// says so on stderr and ends the process with `status` at once (_exit: a
// thread stuck inside librdkafka cannot be joined). A null notifier: just
// `status`.
int FinishWithKafka(std::shared_ptr<notifier::KafkaNotifier> notifier,
                    int status,
                    std::chrono::milliseconds budget = std::chrono::seconds(5));

// Subscribes a LockClient to a notifier for its own lifetime, so that the
// client is always unsubscribed before it is destroyed: declare it after
// the client. A null notifier makes it a no-op.
class ScopedSubscription {
 public:
  ScopedSubscription(notifier::KafkaNotifier* notifier, LockClient* client);
  ~ScopedSubscription();
  ScopedSubscription(const ScopedSubscription&) = delete;
  ScopedSubscription& operator=(const ScopedSubscription&) = delete;

 private:
  notifier::KafkaNotifier* notifier_;
  LockClient* client_;
};

}  // namespace lockfleet::cli
