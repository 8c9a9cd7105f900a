#include "sentinel.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "redis_connection.h"

namespace lockfleet::internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Silence on the subscribed connection this long: PING it.
constexpr milliseconds kPingEvery{1000};
// The watch loop's reads are this short, so a stop is seen within it.
constexpr milliseconds kReadSlice{200};
// A sentinel that failed: try the next after this (doubling to the cap).
constexpr milliseconds kBackoffMin{100};
constexpr milliseconds kBackoffMax{2000};
// The watch loop's longest single step (connect, query, send).
constexpr milliseconds kStepMax{1000};

}  // namespace

std::optional<RedisNode> ParseSwitchMaster(std::string_view text,
                                           std::string_view master_name) {
  // "<name> <old-ip> <old-port> <new-ip> <new-port>"
  std::vector<std::string_view> words;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (words.size() != 5 || words[0] != master_name || words[3].empty()) {
    return std::nullopt;
  }
  const int port = config::ParsePort(words[4]);
  if (port == 0) return std::nullopt;
  return RedisNode{std::string(words[3]), port};
}

Sentinel::Sentinel(RedisEndpoint url, config::RedisAuthConfig auth,
                   const TlsContext* tls, milliseconds connect_timeout,
                   milliseconds command_timeout)
    : url_(std::move(url)),
      auth_(std::move(auth)),
      tls_(tls),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      where_(url_.Redacted()) {}

Sentinel::~Sentinel() {
  if (watcher_.joinable()) {
    watcher_.request_stop();
    stop_cv_.notify_all();
    watcher_.join();
  }
}

RedisEndpoint Sentinel::SentinelEndpoint(size_t index) const {
  RedisEndpoint endpoint;
  const RedisNode& node = url_.sentinels[index % url_.sentinels.size()];
  endpoint.host = node.host;
  endpoint.port = node.port;
  endpoint.user = auth_.user;
  endpoint.password = auth_.password;
  endpoint.tls = url_.tls;
  return endpoint;
}

std::optional<RedisNode> Sentinel::Ask(RedisConnection& conn,
                                       Deadline deadline) {
  const Command ask{"SENTINEL", "get-master-addr-by-name", url_.master_name};
  const std::vector<Reply> replies = conn.Run({&ask}, Remaining(deadline));
  const Reply& r = replies.front();
  if (r.is_nil()) return std::nullopt;
  if (r.is_error()) {
    // Not a sentinel (a plain Redis: "ERR unknown command 'SENTINEL'"), or
    // one that refuses us.
    throw Error(CodeForErrorReply(r.str, ErrorCode::kRedisUnavailable),
                "refused SENTINEL get-master-addr-by-name: " + r.str +
                    (r.str.find("unknown command") != std::string::npos
                         ? " (a Redis server, not a sentinel?)"
                         : ""));
  }
  if (r.type != Reply::Type::kArray || r.elements.size() != 2 ||
      r.elements[0].str.empty() || config::ParsePort(r.elements[1].str) == 0) {
    throw Error(ErrorCode::kRedisProtocol,
                "an unexpected answer to SENTINEL get-master-addr-by-name");
  }
  return RedisNode{r.elements[0].str, config::ParsePort(r.elements[1].str)};
}

RedisNode Sentinel::AskMaster(Deadline deadline) {
  size_t first = 0;
  {
    std::lock_guard lock(mu_);
    first = preferred_;
  }
  const size_t count = url_.sentinels.size();
  std::string failures;
  std::vector<std::string> unaware;
  for (size_t i = 0; i < count; ++i) {
    const size_t index = (first + i) % count;
    const std::string name = url_.sentinels[index].ToString();
    if (steady_clock::now() >= deadline) {
      throw Error(ErrorCode::kRedisTimeout,
                  "no sentinel of " + where_ + " named the master in time" +
                      (failures.empty() ? "" : ": " + failures));
    }
    try {
      RedisConnection conn(SentinelEndpoint(index), tls_,
                           std::min(connect_timeout_, Remaining(deadline)),
                           command_timeout_, Remaining(deadline));
      if (std::optional<RedisNode> master = Ask(conn, deadline)) {
        std::lock_guard lock(mu_);
        preferred_ = index;
        return *master;
      }
      unaware.push_back(name);
    } catch (const Error& e) {
      // Connection errors name the sentinel already; its answers do not.
      const std::string what = e.what();
      failures += (failures.empty() ? "" : "; ") +
                  (what.find(name) == std::string::npos
                       ? "sentinel " + name + " " + what
                       : what);
    }
  }
  std::string message;
  if (!unaware.empty()) {
    std::string list;
    for (const std::string& name : unaware)
      list += (list.empty() ? "" : ", ") + name;
    message = "no master named '" + url_.master_name + "' is known to " + list +
              " (a wrong master name in the URL?)";
    if (!failures.empty()) message += "; the others failed: " + failures;
  } else {
    message = "no sentinel of " + where_ + " named the master: " + failures;
  }
  throw Error(ErrorCode::kRedisUnavailable, message);
}

void Sentinel::Watch(std::function<void(const RedisNode&)> on_switch) {
  on_switch_ = std::move(on_switch);
  watcher_ = std::jthread([this](std::stop_token stop) { WatchLoop(stop); });
}

void Sentinel::WatchLoop(std::stop_token stop) {
  size_t index = 0;
  {
    std::lock_guard lock(mu_);
    index = preferred_;
  }
  milliseconds backoff = kBackoffMin;
  // Every step is bounded more tightly than the pool's (a second), so that
  // a stop — the client's destruction — waits about that long at most.
  const milliseconds connect = std::min(connect_timeout_, kStepMax);
  const milliseconds step = std::min(command_timeout_, kStepMax);
  while (!stop.stop_requested()) {
    try {
      RedisConnection conn(SentinelEndpoint(index), tls_, connect, step,
                           kStepMax);
      const Command subscribe{"SUBSCRIBE", "+switch-master"};
      conn.Send(subscribe, steady_clock::now() + step);
      // A switch while nobody listened: ask once the subscription is on
      // (its confirmation comes first).
      bool asked = false;
      auto heard = steady_clock::now();
      // When the unanswered PING went out; min() = none outstanding (not an
      // optional: GCC 12's -O1 sanitizer builds misreport it uninitialised).
      steady_clock::time_point ping_sent = steady_clock::time_point::min();
      while (!stop.stop_requested()) {
        std::optional<Reply> r = conn.ReadOne(steady_clock::now() + kReadSlice);
        const auto now = steady_clock::now();
        if (!r) {
          const bool pinged = ping_sent != steady_clock::time_point::min();
          if (pinged && now - ping_sent > command_timeout_) {
            throw Error(ErrorCode::kRedisTimeout,
                        "no answer to PING within " +
                            std::to_string(command_timeout_.count()) + " ms");
          }
          if (!pinged && now - heard > kPingEvery) {
            conn.Send({"PING"}, now + step);
            ping_sent = now;
          }
          continue;
        }
        heard = now;
        ping_sent = steady_clock::time_point::min();
        if (r->type != Reply::Type::kArray || r->elements.empty()) continue;
        const std::string& kind = r->elements.front().str;
        if (kind == "subscribe" && !asked) {
          asked = true;
          backoff = kBackoffMin;
          // A second connection: this one only listens now. Connect and
          // question share one step.
          if (stop.stop_requested()) break;
          const Deadline query_deadline = steady_clock::now() + kStepMax;
          RedisConnection query(SentinelEndpoint(index), tls_, connect, step,
                                kStepMax);
          if (std::optional<RedisNode> master = Ask(query, query_deadline)) {
            on_switch_(*master);
          }
        } else if (kind == "message" && r->elements.size() == 3) {
          if (std::optional<RedisNode> master =
                  ParseSwitchMaster(r->elements[2].str, url_.master_name)) {
            on_switch_(*master);
          }
        }
      }
    } catch (const Error&) {
      // Next sentinel, after a pause; the pool asks for itself meanwhile.
      ++index;
      std::mutex mu;
      std::unique_lock lock(mu);
      stop_cv_.wait_for(lock, stop, backoff, [] { return false; });
      backoff = std::min(backoff * 2, kBackoffMax);
    }
  }
}

}  // namespace lockfleet::internal
