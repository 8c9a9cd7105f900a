#include "cluster.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::internal {
namespace {

// "host:port" / "[v6]:port" / "v6:port" (Redis writes IPv6 unbracketed).
std::optional<RedisNode> ParseAddress(std::string_view text,
                                      std::string_view asked_host) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) {
    return std::nullopt;
  }
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int number = config::ParsePort(port);
  if (number == 0) return std::nullopt;
  return RedisNode{std::string(host.empty() ? asked_host : host), number};
}

std::optional<RedisNode> NodeOf(const Reply& entry,
                                std::string_view asked_host) {
  if (entry.type != Reply::Type::kArray || entry.elements.size() < 2 ||
      entry.elements[0].type != Reply::Type::kString ||
      entry.elements[1].type != Reply::Type::kInteger) {
    throw Error(ErrorCode::kRedisProtocol,
                "CLUSTER SLOTS: a node entry is not [host, port, ...]");
  }
  const std::string& host = entry.elements[0].str;
  const long long port = entry.elements[1].integer;
  if (host == "?") return std::nullopt;  // the node's endpoint is unknown
  if (port < 1 || port > 65535) {
    throw Error(ErrorCode::kRedisProtocol,
                "CLUSTER SLOTS: a node port out of range");
  }
  return RedisNode{host.empty() ? std::string(asked_host) : host,
                   static_cast<int>(port)};
}

}  // namespace

bool VerbIs(std::string_view verb, std::string_view name) {
  return verb.size() == name.size() &&
         std::equal(verb.begin(), verb.end(), name.begin(), [](char a, char b) {
           return std::toupper(static_cast<unsigned char>(a)) == b;
         });
}

bool VerbIsOneOf(std::string_view verb,
                 std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view name) { return VerbIs(verb, name); });
}

std::optional<Redirect> ParseRedirect(std::string_view error,
                                      std::string_view asked_host) {
  Redirect out;
  if (error.starts_with("MOVED ")) {
    out.kind = Redirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    out.kind = Redirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos || space == 0 || space > 5) {
    return std::nullopt;
  }
  const std::string_view slot = error.substr(0, space);
  if (!std::all_of(slot.begin(), slot.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int number = std::stoi(std::string(slot));
  if (number >= kSlots) return std::nullopt;
  out.slot = static_cast<uint16_t>(number);
  std::optional<RedisNode> node =
      ParseAddress(error.substr(space + 1), asked_host);
  if (!node) return std::nullopt;
  out.node = std::move(*node);
  return out;
}

std::optional<uint16_t> CommandSlot(const Command& command) {
  if (command.empty()) return std::nullopt;
  const std::string& verb = command[0];
  size_t key = 1;
  if (VerbIsOneOf(verb, {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL",
                         "FCALL_RO"})) {
    if (command.size() < 4 || command[2] == "0") return std::nullopt;
    key = 3;
  } else if (VerbIsOneOf(verb, {"OBJECT", "MEMORY", "XINFO", "BITOP"})) {
    key = 2;
  } else if (VerbIsOneOf(
                 verb,
                 {"PING",      "ECHO",       "INFO",      "DBSIZE",
                  "SCAN",      "WAIT",       "SCRIPT",    "CLUSTER",
                  "ROLE",      "MULTI",      "EXEC",      "DISCARD",
                  "UNWATCH",   "ASKING",     "COMMAND",   "CLIENT",
                  "CONFIG",    "TIME",       "FLUSHALL",  "FLUSHDB",
                  "SELECT",    "AUTH",       "HELLO",     "RANDOMKEY",
                  "KEYS",      "LASTSAVE",   "SAVE",      "BGSAVE",
                  "DEBUG",     "PUBLISH",    "FUNCTION",  "SLOWLOG",
                  "LATENCY",   "READONLY",   "READWRITE", "RESET",
                  "SHUTDOWN",  "FAILOVER",   "REPLICAOF", "SLAVEOF",
                  "MONITOR",   "SWAPDB",     "ACL",       "MODULE",
                  "SUBSCRIBE", "PSUBSCRIBE", "XREAD",     "XREADGROUP"})) {
    // (XREAD's keys follow STREAMS; lockfleet sends none: a guess would do.)
    return std::nullopt;
  }
  if (command.size() <= key) return std::nullopt;
  return KeySlot(command[key]);
}

std::vector<SlotRange> ParseClusterSlots(const Reply& reply,
                                         std::string_view asked_host) {
  if (reply.type != Reply::Type::kArray) {
    throw Error(ErrorCode::kRedisProtocol,
                "CLUSTER SLOTS did not answer an array");
  }
  std::vector<SlotRange> ranges;
  for (const Reply& range : reply.elements) {
    if (range.type != Reply::Type::kArray || range.elements.size() < 3 ||
        range.elements[0].type != Reply::Type::kInteger ||
        range.elements[1].type != Reply::Type::kInteger) {
      throw Error(ErrorCode::kRedisProtocol,
                  "CLUSTER SLOTS: a range is not [first, last, master, ...]");
    }
    const long long first = range.elements[0].integer;
    const long long last = range.elements[1].integer;
    if (first < 0 || last < first || last >= kSlots) {
      throw Error(ErrorCode::kRedisProtocol,
                  "CLUSTER SLOTS: a slot range out of 0..16383");
    }
    std::optional<RedisNode> master = NodeOf(range.elements[2], asked_host);
    if (!master) continue;
    SlotRange out{static_cast<uint16_t>(first),
                  static_cast<uint16_t>(last),
                  std::move(*master),
                  {}};
    for (size_t i = 3; i < range.elements.size(); ++i) {
      if (std::optional<RedisNode> replica =
              NodeOf(range.elements[i], asked_host)) {
        out.replicas.push_back(std::move(*replica));
      }
    }
    ranges.push_back(std::move(out));
  }
  return ranges;
}

SlotMap::SlotMap() { owner_.fill(-1); }

std::optional<RedisNode> SlotMap::Owner(uint16_t slot) const {
  std::shared_lock lock(mu_);
  const int16_t index = owner_[slot % kSlots];
  if (index < 0) return std::nullopt;
  return nodes_[index];
}

int SlotMap::IndexOf(const RedisNode& node) {
  auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it != nodes_.end()) return static_cast<int>(it - nodes_.begin());
  // MOVED hints between two reads of the whole map only grow the list: a
  // cluster that sends thousands of addresses (never in practice) starts
  // the map over instead of overflowing.
  if (nodes_.size() >= 4096) {
    nodes_.clear();
    owner_.fill(-1);
  }
  nodes_.push_back(node);
  return static_cast<int>(nodes_.size() - 1);
}

void SlotMap::Moved(uint16_t slot, const RedisNode& node) {
  std::unique_lock lock(mu_);
  owner_[slot % kSlots] = static_cast<int16_t>(IndexOf(node));
}

void SlotMap::Replace(const std::vector<SlotRange>& ranges) {
  std::unique_lock lock(mu_);
  owner_.fill(-1);
  nodes_.clear();  // (nothing refers to the old indices any more)
  for (const SlotRange& range : ranges) {
    const auto index = static_cast<int16_t>(IndexOf(range.master));
    for (int slot = range.first; slot <= range.last; ++slot)
      owner_[slot] = index;
  }
  read_ = true;
}

std::vector<RedisNode> SlotMap::Masters() const {
  std::shared_lock lock(mu_);
  std::vector<RedisNode> out;
  std::vector<bool> seen(nodes_.size(), false);
  for (int16_t index : owner_) {
    if (index < 0 || seen[index]) continue;
    seen[index] = true;
    out.push_back(nodes_[index]);
  }
  return out;
}

bool SlotMap::empty() const {
  std::shared_lock lock(mu_);
  return !read_;
}

}  // namespace lockfleet::internal
