#include "rdkafka_common.h"

#include <cstdio>

namespace lockfleet::notifier {
namespace {

void StderrLog(LogLevel level, std::string_view message) {
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "lockfleet notifier [%s]: %.*s\n",
               kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
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
    if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_ERROR) {
      logs.Log("rdkafka", LogLevel::kError, event.fac() + ": " + event.str(),
               sink);
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

}  // namespace lockfleet::notifier
