#include "rdkafka_common.h"

#include <cstdio>

namespace lockfleet::notifier {
namespace {

void StderrLog(LogLevel level, std::string_view message) {
  if (level == LogLevel::kDebug) return;
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "lockfleet notifier [%s]: %.*s\n",
               kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

// kafka.properties go to every client of a process, so a consumer property
// reaches the producers too and librdkafka notes that it ignores it there:
// expected, not worth a warning on every start.
bool IgnoredPropertyNote(RdKafka::Event& event) {
  return event.fac() == "CONFWARN" &&
         event.str().find("will be ignored by this") != std::string::npos;
}

}  // namespace

LogSink SinkOrStderr(const LogSink& sink) { return sink ? sink : StderrLog; }

void Require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, message);
}

Properties CommonProperties(const std::string& bootstrap,
                            const std::string& client_id) {
  return {
      {"bootstrap.servers", bootstrap},
      {"client.id", client_id},
      {"socket.nagle.disable", "true"},
      {"reconnect.backoff.ms", "50"},
      {"reconnect.backoff.max.ms", "1000"},
      {"topic.metadata.refresh.interval.ms", "10000"},
  };
}

std::unique_ptr<RdKafka::Conf> MakeConf(const Properties& defaults,
                                        const Properties& user,
                                        RdKafka::EventCb* events) {
  std::unique_ptr<RdKafka::Conf> conf(
      RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  auto set = [&](const std::string& key, const std::string& value, bool ours) {
    if (conf->set(key, value, err) != RdKafka::Conf::CONF_OK) {
      throw Error(ours ? ErrorCode::kKafka : ErrorCode::kInvalidArgument,
                  "Kafka property '" + key + "': " + err);
    }
  };
  for (const auto& [k, v] : defaults) set(k, v, true);
  for (const auto& [k, v] : user) set(k, v, false);
  SetCallback(*conf, "event_cb", events);
  return conf;
}

ClientEvent LogClientEvent(RdKafka::Event& event, RateLimitedLog& logs,
                           const LogSink& sink,
                           std::string_view transport_note) {
  if (event.type() == RdKafka::Event::EVENT_LOG) {
    // librdkafka's own log lines: errors and warnings (a session timeout, a
    // poll interval exceeded) rate-limited per facility; notices and the
    // `debug` property's lines (opt-in) at debug level, unthrottled.
    const std::string line = "rdkafka " + event.fac() + ": " + event.str();
    if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_ERROR) {
      logs.Log("rdkafka", LogLevel::kError, line, sink);
    } else if (event.severity() == RdKafka::Event::EVENT_SEVERITY_WARNING &&
               !IgnoredPropertyNote(event)) {
      logs.Log("rdkafka " + event.fac(), LogLevel::kWarning, line, sink);
    } else {
      sink(LogLevel::kDebug, line);
    }
    return ClientEvent::kOther;
  }
  if (event.type() != RdKafka::Event::EVENT_ERROR) return ClientEvent::kOther;
  RdKafka::ErrorCode err = event.err();
  if (err == RdKafka::ERR__TRANSPORT || err == RdKafka::ERR__ALL_BROKERS_DOWN ||
      err == RdKafka::ERR__RESOLVE) {
    logs.Log("transport", LogLevel::kWarning,
             "Kafka unreachable (" + RdKafka::err2str(err) +
                 "): " + event.str() + "; " + std::string(transport_note),
             sink);
    return ClientEvent::kTransport;
  }
  logs.Log("error", event.fatal() ? LogLevel::kError : LogLevel::kWarning,
           "Kafka error: " + RdKafka::err2str(err) + ": " + event.str(), sink);
  return ClientEvent::kError;
}

std::chrono::milliseconds ConfFetchWait(RdKafka::Conf& conf) {
  std::string wait;
  conf.get("fetch.wait.max.ms", wait);
  return std::chrono::milliseconds(std::stoll(wait));
}

BrokerFetchWait FitFetchWaitToBroker(
    std::unique_ptr<RdKafka::KafkaConsumer>& consumer, RdKafka::Conf& conf,
    FanOut fan_out) {
  BrokerFetchWait out;
  RdKafka::Metadata* raw = nullptr;
  const RdKafka::ErrorCode rc = consumer->metadata(false, nullptr, &raw, 1000);
  const std::unique_ptr<RdKafka::Metadata> md(raw);
  if (rc != RdKafka::ERR_NO_ERROR) {
    out.error = RdKafka::err2str(rc);
    return out;
  }
  out.answered = true;
  // Empty: a broker too old to tell (Metadata v1 and below): not the mock.
  const std::string id = consumer->clusterid(0);
  out.mock = id.starts_with(kMockClusterIdPrefix);
  const std::chrono::milliseconds wait = FetchWaitFor(id, fan_out);
  const std::chrono::milliseconds before = ConfFetchWait(conf);
  if (wait == before) return out;
  std::unique_ptr<RdKafka::KafkaConsumer> replacement;
  if (conf.set("fetch.wait.max.ms", Millis(wait), out.error) ==
      RdKafka::Conf::CONF_OK) {
    replacement.reset(RdKafka::KafkaConsumer::create(&conf, out.error));
  }
  if (!replacement) {
    out.error = "cannot create a Kafka consumer with a " + Millis(wait) +
                " ms fetch wait: " + out.error;
    std::string ignored;  // the kept consumer's: a value set before
    conf.set("fetch.wait.max.ms", Millis(before), ignored);
    return out;
  }
  consumer->close();
  consumer = std::move(replacement);
  out.replaced = true;
  return out;
}

}  // namespace lockfleet::notifier
