// How librdkafka's log lines and error events reach a LogSink (no Kafka: an
// event is built by hand).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "rdkafka_common.h"

namespace lockfleet::notifier {
namespace {

class FakeEvent : public RdKafka::Event {
 public:
  FakeEvent(Type type, Severity severity, std::string fac, std::string str,
            RdKafka::ErrorCode err = RdKafka::ERR_NO_ERROR)
      : type_(type),
        severity_(severity),
        fac_(std::move(fac)),
        str_(std::move(str)),
        err_(err) {}
  Type type() const override { return type_; }
  RdKafka::ErrorCode err() const override { return err_; }
  Severity severity() const override { return severity_; }
  std::string fac() const override { return fac_; }
  std::string str() const override { return str_; }
  int throttle_time() const override { return 0; }
  std::string broker_name() const override { return ""; }
  int broker_id() const override { return -1; }
  bool fatal() const override { return false; }

 private:
  Type type_;
  Severity severity_;
  std::string fac_;
  std::string str_;
  RdKafka::ErrorCode err_;
};

struct Lines {
  std::vector<std::pair<LogLevel, std::string>> seen;
  LogSink sink() {
    return [this](LogLevel level, std::string_view line) {
      seen.emplace_back(level, std::string(line));
    };
  }
};

FakeEvent Log(RdKafka::Event::Severity severity, std::string fac,
              std::string str) {
  return FakeEvent(RdKafka::Event::EVENT_LOG, severity, std::move(fac),
                   std::move(str));
}

TEST(ClientLog, LibrdkafkaLevelsMapOntoOurs) {
  Lines lines;
  RateLimitedLog logs;
  FakeEvent error = Log(RdKafka::Event::EVENT_SEVERITY_ERROR, "FAIL", "down");
  FakeEvent warning = Log(RdKafka::Event::EVENT_SEVERITY_WARNING, "SESSTMOUT",
                          "Consumer group session timed out");
  FakeEvent debug = Log(RdKafka::Event::EVENT_SEVERITY_DEBUG, "HEARTBEAT",
                        "Heartbeat for group");
  FakeEvent notice = Log(RdKafka::Event::EVENT_SEVERITY_NOTICE, "CGRPOP", "x");
  for (FakeEvent* e : {&error, &warning, &debug, &notice}) {
    EXPECT_EQ(LogClientEvent(*e, logs, lines.sink(), "note"),
              ClientEvent::kOther);
  }
  ASSERT_EQ(lines.seen.size(), 4u);
  EXPECT_EQ(lines.seen[0], std::make_pair(LogLevel::kError,
                                          std::string("rdkafka FAIL: down")));
  EXPECT_EQ(lines.seen[1],
            std::make_pair(LogLevel::kWarning,
                           std::string("rdkafka SESSTMOUT: Consumer group "
                                       "session timed out")));
  EXPECT_EQ(lines.seen[2].first, LogLevel::kDebug);
  EXPECT_EQ(lines.seen[3].first, LogLevel::kDebug);
}

// Warnings are rate-limited per facility: a flood of one kind does not hide
// another kind.
TEST(ClientLog, WarningsAreRateLimitedPerFacility) {
  Lines lines;
  RateLimitedLog logs;
  FakeEvent a = Log(RdKafka::Event::EVENT_SEVERITY_WARNING, "A", "a");
  FakeEvent b = Log(RdKafka::Event::EVENT_SEVERITY_WARNING, "B", "b");
  for (int i = 0; i < 5; ++i) LogClientEvent(a, logs, lines.sink(), "");
  LogClientEvent(b, logs, lines.sink(), "");
  ASSERT_EQ(lines.seen.size(), 2u);
  EXPECT_EQ(lines.seen[1].second, "rdkafka B: b");
}

// One property bag serves every client of a process: librdkafka's note that
// a producer ignores a consumer property is no warning.
TEST(ClientLog, AnIgnoredPropertyNoteIsDebugOnly) {
  Lines lines;
  RateLimitedLog logs;
  FakeEvent note = Log(RdKafka::Event::EVENT_SEVERITY_WARNING, "CONFWARN",
                       "Configuration property session.timeout.ms is a "
                       "consumer property and will be ignored by this "
                       "producer instance");
  FakeEvent other = Log(RdKafka::Event::EVENT_SEVERITY_WARNING, "CONFWARN",
                        "Configuration property x is deprecated");
  LogClientEvent(note, logs, lines.sink(), "");
  LogClientEvent(other, logs, lines.sink(), "");
  ASSERT_EQ(lines.seen.size(), 2u);
  EXPECT_EQ(lines.seen[0].first, LogLevel::kDebug);
  EXPECT_EQ(lines.seen[1].first, LogLevel::kWarning);
}

TEST(ClientLog, TransportErrorsCarryTheNote) {
  Lines lines;
  RateLimitedLog logs;
  FakeEvent down(RdKafka::Event::EVENT_ERROR,
                 RdKafka::Event::EVENT_SEVERITY_ERROR, "", "Disconnected",
                 RdKafka::ERR__TRANSPORT);
  EXPECT_EQ(LogClientEvent(down, logs, lines.sink(), "waiters fall back"),
            ClientEvent::kTransport);
  ASSERT_EQ(lines.seen.size(), 1u);
  EXPECT_EQ(lines.seen[0].first, LogLevel::kWarning);
  EXPECT_NE(lines.seen[0].second.find("waiters fall back"), std::string::npos);
}

}  // namespace
}  // namespace lockfleet::notifier
