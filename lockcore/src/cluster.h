// Redis Cluster routing: which node serves a command, and what the nodes
// say when it was the wrong one. Internal to lockcore; RedisClient's
// cluster mode (redis_client.cc) keeps one connection pool per node and
// sends each command to the master of its key's slot.
//
// Following Redis's cluster specification ("Redirection and resharding",
// "Client handling of redirections"):
// - the slot map comes from CLUSTER SLOTS, asked of the known masters and
//   then the seeds until one answers;
// - MOVED <slot> <host:port>: the slot has a new owner for good — the map
//   takes the hint at once and is read again in full soon after;
// - ASK <slot> <host:port>: the slot is being migrated and this key is
//   already (or will be) at the target — ASKING, then the command, there
//   only, this once; the map does not change;
// - TRYAGAIN: a multi-key command whose keys are split by a migration in
//   progress — the same again a little later.
//
// Thread-safety: SlotMap is safe to use from any thread; the functions are
// plain functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "key_slot.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/redis_url.h"

namespace lockfleet::internal {

// Whether the command verb `verb` is `name` (upper case), in any case.
bool VerbIs(std::string_view verb, std::string_view name);
bool VerbIsOneOf(std::string_view verb,
                 std::initializer_list<std::string_view> names);

// A MOVED or ASK error reply, parsed.
struct Redirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  uint16_t slot = 0;
  RedisNode node;
};

// The redirect in `error` (an error reply's text: "MOVED 3999
// 127.0.0.1:6381", "ASK 3999 [::1]:6381"), or nullopt when it is none.
// `asked_host` stands in for an empty host (":6381", a node that does not
// know its own address).
std::optional<Redirect> ParseRedirect(std::string_view error,
                                      std::string_view asked_host);

// The slot a command is routed by: its first key's, or nullopt for a
// command without keys (PING, INFO, SCAN, WAIT, MULTI, ...). The EVAL
// family's first key follows numkeys; OBJECT, MEMORY, XINFO and BITOP's
// follows a subcommand; any other command's is its first argument. A wrong
// guess costs a MOVED, never a wrong answer: the node that gets a key it
// does not serve says where it is.
std::optional<uint16_t> CommandSlot(const Command& command);

// A range of slots and its master, from CLUSTER SLOTS.
struct SlotRange {
  uint16_t first = 0;
  uint16_t last = 0;
  RedisNode master;
  std::vector<RedisNode> replicas;
};

// Parses a CLUSTER SLOTS reply. A node entry with an empty host is at
// `asked_host` (the node that answered); a range whose master's host is
// "?" (unknown endpoint) is left out. Throws Error(kRedisProtocol) for a
// reply of another shape.
std::vector<SlotRange> ParseClusterSlots(const Reply& reply,
                                         std::string_view asked_host);

// Which master serves each of the 16384 slots, as far as this client knows.
class SlotMap {
 public:
  SlotMap();

  // The master of `slot`, or nullopt when no node serves it (or the map
  // was never read).
  std::optional<RedisNode> Owner(uint16_t slot) const;
  // MOVED: `slot` is served by `node` now.
  void Moved(uint16_t slot, const RedisNode& node);
  // A whole CLUSTER SLOTS answer replaces the map.
  void Replace(const std::vector<SlotRange>& ranges);
  // The masters that serve at least one slot, in the order of their first
  // slot.
  std::vector<RedisNode> Masters() const;
  bool empty() const;

 private:
  // Index into nodes_ (which only grows), or -1.
  int IndexOf(const RedisNode& node);  // REQUIRES: mu_ held exclusively

  mutable std::shared_mutex mu_;
  std::vector<RedisNode> nodes_;       // guarded by mu_
  std::array<int16_t, kSlots> owner_;  // guarded by mu_; -1 = nobody
  bool read_ = false;                  // guarded by mu_
};

}  // namespace lockfleet::internal
