#include "scripts.h"

namespace lockfleet::internal {

// The lock hash holds: owner (token), count (reentrant holds), fence (token
// of this grant), req (id of the last acquire, so a retried acquire is not
// counted twice), rel (id of the last partial release, likewise).

const Script& AcquireScript() {
  static const Script script(R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'req')
local lease = tonumber(ARGV[2])
if not cur[1] then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'fence', fence, 'req', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], lease)
  return {1, fence, 1}
end
if cur[1] == ARGV[1] then
  if cur[4] == ARGV[3] then
    return {1, tonumber(cur[3]), tonumber(cur[2])}
  end
  local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  redis.call('HSET', KEYS[1], 'req', ARGV[3])
  if redis.call('PTTL', KEYS[1]) < lease then
    redis.call('PEXPIRE', KEYS[1], lease)
  end
  return {1, tonumber(cur[3]), count}
end
return {0, redis.call('PTTL', KEYS[1]), cur[1]}
)lua");
  return script;
}

const Script& ReleaseScript() {
  static const Script script(R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'rel')
if not cur[1] then
  return {0}
end
if cur[1] ~= ARGV[1] or cur[3] ~= ARGV[2] then
  return {-1, cur[1]}
end
if cur[4] == ARGV[3] then
  return {2, tonumber(cur[2])}
end
local count = redis.call('HINCRBY', KEYS[1], 'count', -1)
if count <= 0 then
  redis.call('DEL', KEYS[1])
  return {1}
end
redis.call('HSET', KEYS[1], 'rel', ARGV[3])
return {2, count}
)lua");
  return script;
}

const Script& RenewScript() {
  static const Script script(R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  return 0
end
local lease = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
)lua");
  return script;
}

const Script& InspectScript() {
  static const Script script(R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence')
local last = redis.call('GET', KEYS[2]) or '0'
return {cur[1] or '', tonumber(cur[2] or '0'), tonumber(cur[3] or '0'),
        redis.call('PTTL', KEYS[1]), tonumber(last)}
)lua");
  return script;
}

const Script& ForceUnlockScript() {
  static const Script script(R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if not cur[1] then
  return {0, '', 0}
end
redis.call('DEL', KEYS[1])
return {1, cur[1], tonumber(cur[2])}
)lua");
  return script;
}

}  // namespace lockfleet::internal
