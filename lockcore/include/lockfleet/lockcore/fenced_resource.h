// FencedResource: the resource-side half of fencing.
//
// A lock alone cannot stop a holder that was paused (GC, SIGSTOP, a slow
// network) past its lease from writing after a newer holder got the lock.
// The resource must check the fencing token itself (Kleppmann, "How to do
// distributed locking"). FencedResource does that for data kept in Redis:
// each write carries the writer's grant — its fencing token and owner token,
// see FenceGrant — and is applied, atomically in one script, only if
//
//   token >  the highest token the resource has accepted so far, or
//   token == that highest token *and* the write comes from the same grant
//            (several writes of one critical section).
//
// Otherwise nothing is written and the result says so (a stale writer). An
// accepted write with a higher token makes its grant the resource's current
// one. The equal-token rule matters after a Redis rollback (failover to a
// lagging replica, restart without persistence): two grants can then carry
// the same token, and only the first of them to reach the resource gets
// through (docs/lockcore.md, "Fencing").
//
// Claim. A holder's first write may come late — seconds after it was
// granted the lock — and until it lands, the resource still accepts a
// delayed write of the previous holder (a lower token). Claim(lease) at the
// start of the critical section raises the resource's highest token to the
// lease's own at once, so from that moment every older grant is refused;
// after a failover it also tells the new holder at once whether another
// grant already used its token. Use it when the critical section reads the
// resource (or anything derived from it) before its first fenced write, or
// does slow work first; a critical section that is one fenced script (a
// check-and-set in Eval) does not need it. It writes the fence key, so claim
// only resources you write to (the key never expires: one per resource).
//
// A resource must be guarded by exactly one lock name: tokens of different
// locks are not comparable. Keys written through the resource must be made
// with Key() (below), and commands must touch no other keys.
//
// Keys. Every key of resource R is "<prefix>:res:{<R>}" followed by one
// ":<part>" per part: Key({"job", id}) is "<prefix>:res:{R}:job:<id>".
// Caller-supplied bytes are percent-encoded (%XX, upper-case hex): '%', '{'
// and '}' in the name; '%', ':', '{' and '}' in a part; every other byte
// (binary ones too) is kept. So a key holds exactly one '{' and one '}', its
// hash tag is exactly the encoded name — all keys of R share one Redis
// Cluster slot, the slot of the lock R too unless R contains one of those
// three bytes — and the key determines the prefix, the name and every part
// (ParseKey inverts KeyOf): no name, id or suffix can make another
// resource's key or another part list's. Names and parts without the
// escaped bytes keep the keys they had before encoding existed
// ("lockfleet:res:{product:7}:stock"). The key of the single part "fence"
// holds the resource's highest token and its grant; Key() refuses it.
//
// Errors: Error(kInvalidArgument) for bad arguments (checked before Redis is
// touched), Error(kRedisScript) when a command or body fails in Redis, the
// RedisClient's errors otherwise. A write whose reply is lost may or may not
// have been applied; it is not retried here.
//
// Thread-safety: all methods may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet {

// One grant of a lock, as a FencedResource tells grants apart: its fencing
// token and the owner token it was granted to. All holds of one grant (the
// reentrant ones too) share both. Two grants with the same token — possible
// only after a Redis rollback — differ in owner unless one owner token is
// shared on purpose (AcquireOptions::owner): those are indistinguishable.
struct FenceGrant {
  int64_t fence = 0;  // > 0 and <= kMaxFence
  // Lease::owner(). Empty: an anonymous grant, what the bare-token overloads
  // write. An anonymous equal token is accepted after any anonymous write
  // (tokens alone cannot tell grants apart), never after a named one, and
  // vice versa. A fence key written before grants were stored (a plain
  // integer) counts as anonymous.
  std::string owner;

  // The grant `lease` holds. Throws Error(kInvalidArgument) unless held().
  static FenceGrant Of(const Lease& lease);

  bool operator==(const FenceGrant&) const = default;
};

struct FenceResult {
  // False: refused, nothing written. highest_fence > your token: a newer
  // grant wrote (your lease is stale); highest_fence == your token: another
  // grant already used the same token (a Redis rollback repeated it) —
  // either way, re-acquire the lock before trying again.
  bool accepted = false;
  int64_t highest_fence = 0;  // the resource's highest token after the call
  Reply reply;                // Write: array of command replies; Eval: body's
};

// The parts of a resource key (FencedResource::ParseKey).
struct ResourceKey {
  std::string prefix;
  std::string name;
  std::vector<std::string> parts;

  bool operator==(const ResourceKey&) const = default;
};

class FencedResource {
 public:
  // Largest token accepted: Lua compares tokens as doubles, exact up to
  // 2^53 (server microseconds reach it in the year 2255).
  static constexpr int64_t kMaxFence = int64_t{1} << 53;

  // `name` identifies the resource (usually the lock's name); non-empty.
  // `key_prefix` as LockClientOptions::key_prefix: non-empty, no '{' or '}'.
  // Throws Error(kInvalidArgument).
  FencedResource(std::shared_ptr<RedisClient> redis, std::string name,
                 std::string key_prefix = "lockfleet");

  // The data key of `parts` (see "Keys" above), e.g. Key({"job", job_id}).
  // Pass caller-supplied text (ids, names) as parts of their own; never
  // concatenate it into a part. Throws Error(kInvalidArgument) for the
  // reserved key {"fence"}.
  std::string Key(std::initializer_list<std::string_view> parts) const;
  // The key of a constant `path`: its ':'-separated pieces are the parts
  // (Key("schedule:history") == Key({"schedule", "history"})). For literal
  // suffixes only: data that may hold ':' must go in Key({...}).
  std::string Key(std::string_view path) const;
  // Where the highest token and its grant are kept ("<prefix>:res:{R}:fence").
  const std::string& FenceKey() const { return fence_key_; }

  // The same keys without a FencedResource (audits, seeding, tools), for
  // any parts (the fence key included). Throw Error(kInvalidArgument) for an
  // empty name or a bad prefix.
  static std::string KeyOf(std::string_view key_prefix, std::string_view name,
                           std::initializer_list<std::string_view> parts);
  static std::string KeyOf(std::string_view key_prefix, std::string_view name,
                           std::span<const std::string> parts);
  static std::string KeyOf(std::string_view key_prefix, std::string_view name,
                           std::string_view path);
  // KeyOf's inverse: the prefix, name and parts of a resource key, or
  // std::nullopt when `key` is not a key KeyOf makes (not encoded exactly as
  // KeyOf encodes, say). ParseKey(KeyOf(p, n, parts)) == {p, n, parts}.
  static std::optional<ResourceKey> ParseKey(std::string_view key);

  // Applies `commands` in order, in one script, if `lease`'s grant may
  // write (see the top of this file): no other client's command runs in
  // between. Redis does not roll scripts back: if a command fails (wrong
  // type, say), the ones before it stay applied, the fence is not advanced,
  // and Error(kRedisScript) is thrown. Commands must only touch keys made
  // with Key(). REQUIRES: lease.held().
  FenceResult Write(const Lease& lease, const std::vector<Command>& commands);
  FenceResult Write(const FenceGrant& grant,
                    const std::vector<Command>& commands);
  // Anonymous (Write(FenceGrant{fence})): cannot tell two grants with equal
  // tokens apart. For tokens that travel without their owner
  // ($LOCKFLEET_FENCE); prefer the overloads above.
  FenceResult Write(int64_t fence, const std::vector<Command>& commands);

  // Runs the Lua chunk `body` if the grant may write. Inside `body`, KEYS
  // and ARGV are exactly `keys` and `args`; its return value lands in
  // FenceResult::reply. The fence check and the body run in one script, so
  // the check cannot go stale before the write. An error raised by the body
  // throws Error(kRedisScript), and the fence is not advanced. A full Redis
  // (maxmemory, noeviction) refuses a Write or Eval before it runs (an OOM
  // error, kRedisBusy): none of its commands applied, the fence unchanged.
  FenceResult Eval(const Lease& lease, std::string_view body,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);
  FenceResult Eval(const FenceGrant& grant, std::string_view body,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);
  FenceResult Eval(int64_t fence, std::string_view body,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

  // Makes `lease`'s grant the resource's current one without writing any
  // data: accepted under the same rule as a write (then every older grant,
  // and every other grant with the same token, is refused from now on;
  // claiming again, or after writing, is harmless). Refused: this grant is
  // stale — re-acquire. One round trip. See "Claim" above for when to use
  // it. REQUIRES: lease.held().
  FenceResult Claim(const Lease& lease);
  FenceResult Claim(const FenceGrant& grant);

  // The highest token accepted so far (0 if none).
  int64_t HighestFence();
  // ... and the grant that wrote it (owner empty if anonymous or none).
  FenceGrant HighestGrant();

 private:
  const Script& ScriptFor(std::string_view body);

  std::shared_ptr<RedisClient> redis_;
  std::string name_;
  std::string prefix_;
  std::string fence_key_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Script>, std::less<>> scripts_;
};

}  // namespace lockfleet
