// FencedResource: the resource-side half of fencing.
//
// A lock alone cannot stop a holder that was paused (GC, SIGSTOP, a slow
// network) past its lease from writing after a newer holder got the lock.
// The resource must check the fencing token itself (Kleppmann, "How to do
// distributed locking"). FencedResource does that for data kept in Redis:
// each write carries the writer's fencing token and is applied, atomically in
// one script, only if the token is >= the highest token the resource has
// accepted so far; a stale writer is rejected and nothing is written.
//
// A resource must be guarded by exactly one lock name: tokens of different
// locks are not comparable. Keys written through the resource should be made
// with Key() so they share the resource's hash tag (one cluster slot).
//
// Thread-safety: all methods may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet {

struct FenceResult {
  bool accepted = false;
  int64_t highest_fence = 0;  // the resource's highest token after the call
  Reply reply;                // Write: array of command replies; Eval: body's
};

class FencedResource {
 public:
  // `name` identifies the resource (usually the lock's name).
  FencedResource(std::shared_ptr<RedisClient> redis, std::string name,
                 std::string key_prefix = "lockfleet");

  // "<prefix>:res:{<name>}:<suffix>": a data key in the resource's slot
  // (the slot of the lock of the same name). No lock key has this form.
  std::string Key(std::string_view suffix) const;
  // The same key without a FencedResource (audits, seeding, tools).
  static std::string KeyOf(std::string_view key_prefix, std::string_view name,
                           std::string_view suffix);

  // Applies `commands` in order, in one script, if `fence` is current: no
  // other client's command runs in between. Redis does not roll scripts
  // back: if a command fails (wrong type, say), the ones before it stay
  // applied, the fence is not advanced, and Error(kRedisScript) is thrown.
  // Commands must only touch keys made with Key().
  FenceResult Write(int64_t fence, const std::vector<Command>& commands);

  // Runs the Lua chunk `body` if `fence` is current. Inside `body`, KEYS and
  // ARGV are exactly `keys` and `args`; its return value lands in
  // FenceResult::reply. The fence check and the body run in one script, so
  // the check cannot go stale before the write. An error raised by the body
  // throws Error(kRedisScript), and the fence is not advanced.
  FenceResult Eval(int64_t fence, std::string_view body,
                   const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

  // The highest token accepted so far (0 if none).
  int64_t HighestFence();

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
