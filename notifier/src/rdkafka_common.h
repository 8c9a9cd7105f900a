// What every librdkafka client of this module shares: base properties, the
// Conf builder (the one place librdkafka config errors become lockfleet
// errors), and how client error/log events are logged.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "lockfleet/notifier/log.h"
#include "rate_limited_log.h"

namespace lockfleet::notifier {

using Properties = std::map<std::string, std::string>;

// `sink`, or a stderr logger when it is empty.
LogSink SinkOrStderr(const LogSink& sink);

// Throws Error(kInvalidArgument, message) unless `ok`.
void Require(bool ok, const std::string& message);

// A duration as librdkafka's integer milliseconds.
inline std::string Millis(std::chrono::milliseconds ms) {
  return std::to_string(ms.count());
}

// bootstrap.servers, client.id, Nagle off (lessons.md), quick reconnects and
// a 10 s metadata refresh: the base of every client.
Properties CommonProperties(const std::string& bootstrap,
                            const std::string& client_id);

// A global Conf from `defaults`, then the caller's verbatim `user`
// properties (which override them), then `events` as event_cb. Throws
// Error(kInvalidArgument) naming a bad user property, Error(kKafka) when
// librdkafka refuses one of ours.
std::unique_ptr<RdKafka::Conf> MakeConf(const Properties& defaults,
                                        const Properties& user,
                                        RdKafka::EventCb* events);

// Installs a callback object ("dr_cb", "rebalance_cb", "offset_commit_cb",
// ...) or throws Error(kKafka).
template <typename Callback>
void SetCallback(RdKafka::Conf& conf, const std::string& name, Callback* cb) {
  std::string err;
  if (conf.set(name, cb, err) != RdKafka::Conf::CONF_OK) {
    throw Error(ErrorCode::kKafka, "cannot set " + name + ": " + err);
  }
}

// The fetch wait a consumer Conf holds (fetch.wait.max.ms).
std::chrono::milliseconds ConfFetchWait(RdKafka::Conf& conf);

// What FitFetchWaitToBroker found and did.
struct BrokerFetchWait {
  bool answered = false;  // the broker answered the metadata request
  bool mock = false;      // it is librdkafka's mock cluster (FetchWaitFor)
  bool replaced = false;  // the consumer was replaced
  std::string error;      // why it did not answer, or the replacement failed
};

// A consumer whose fetch wait was not given (KafkaOptions::fetch_wait):
// asks the broker through `consumer` what it is (one metadata request,
// within 1 s, which brings its cluster id) and, if the wait that suits it
// (FetchWaitFor) is not the one `conf` holds, replaces `consumer` by one
// made from `conf` with that wait (a failed replacement keeps `consumer`
// and `conf`'s wait). REQUIRES: `consumer` was made from `conf`, fetches
// nothing yet and is used by no other thread.
BrokerFetchWait FitFetchWaitToBroker(
    std::unique_ptr<RdKafka::KafkaConsumer>& consumer, RdKafka::Conf& conf,
    FanOut fan_out);

enum class ClientEvent {
  kOther,      // nothing to count (a log line, statistics, ...)
  kTransport,  // the broker is unreachable
  kError,      // any other error event
};

// Logs an error event or a severe librdkafka log line through `logs`
// (rate-limited) and says what it was, for the caller to count.
// `transport_note` ends the "unreachable" line: what that means here.
ClientEvent LogClientEvent(RdKafka::Event& event, RateLimitedLog& logs,
                           const LogSink& sink,
                           std::string_view transport_note);

}  // namespace lockfleet::notifier
