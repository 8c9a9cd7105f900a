#include "scripts.h"

#include <string>

namespace lockfleet::internal {
namespace {

// The lock hash holds: owner (token), fence (token of this grant), count
// (holds), one field "h:<hold id>" per hold, pending (fair hand-off: the
// waiter id the lock was granted to) and claim (a hand-off in full: the
// claim window it was granted with, see hand_off). A hand-off is unclaimed
// while count is 0 (no hold yet); its claim sets count 1 and leaves the
// pending field as it is, which then means only "handed off" (see
// pending_of), as it does for a hand-off in full. Hold
// ids are globally unique ("<client id>:<n>"), so adding or deleting a hold's
// own field makes a retried acquire or release idempotent by construction, even
// for holds that share an owner token.

// Shared by every script that grants: the server's clock, fencing tokens,
// pruning of stale queue heads, the hand-off of a freed lock to the first
// live waiter, and reply latches.
constexpr const char* kPrelude = R"lua(
-- The keys the helpers below act on (K[1] lock hash ... K[5] reply latch, as
-- scripts.h lists them): the script's own KEYS, except in the multi-lock's
-- script, which points them at each of its locks in turn (use_lock).
local K = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
-- fence_after(last, now_u): the token after `last` (a stored token, or nil):
-- max(last + 1, server us). `now_u` (optional): the server's clock in us if
-- the caller read it already (one TIME per script). Also a read-write lock's
-- (rw_next_fence).
local function fence_after(last, now_u)
  local fence = tonumber(last or '0') + 1
  local now = now_u or now_us()
  if fence < now then fence = now end
  return fence
end
-- The next fencing token of the slot's counter (K[2]), fence_after the last
-- one issued: above it, and never below the server's clock in microseconds,
-- so a counter rolled back by a failover or an empty restart does not issue
-- a token again. One command as a rule: the counter is set to the clock and
-- its old value read back in the same SET; only when the token is not the
-- clock (a second token in the same microsecond, or a counter ahead of this
-- server's clock) is it set again.
local function next_fence(now_u)
  local now = now_u or now_us()
  local fence = fence_after(redis.call('SET', K[2], string.format('%d', now), 'GET'), now)
  if fence ~= now then redis.call('SET', K[2], string.format('%d', fence)) end
  return fence
end
-- The waiter a hand-off is pending to, from the lock hash's count and
-- pending fields (as HMGET returns them): a hand-off is unclaimed while the
-- grant has no hold (count 0). nil: none pending.
local function pending_of(count, pending)
  if count == '0' then return pending end
  return nil
end
-- A new grant of the lock (K[1], absent or just deleted) to `owner` with
-- the one hold `hold`, a new fencing token and `ttl_ms` to live (`now_u` as
-- in fence_after). Returns the token. Every grant's `exp` field is when its
-- key expires as granted (server ms): a refused waiter's hint without a
-- PTTL (ttl_hint); renewals and re-entries, which only extend the key,
-- leave it behind, and a claim, which may shorten it, sets it to 0.
local function new_grant(owner, hold, ttl_ms, now_u)
  local now = now_u or now_us()
  local fence = next_fence(now)
  redis.call('HSET', K[1], 'owner', owner, 'count', 1, 'fence', string.format('%d', fence), hold, 1,
             'exp', string.format('%d', math.floor(now / 1000) + ttl_ms))
  redis.call('PEXPIRE', K[1], ttl_ms)
  return fence
end
-- The lock's time to live in ms for a refused waiter, `exp` its grant's
-- field (see new_grant) and `now` the server's ms: from the field while it
-- lies ahead (at most the key's real time to live: a hint, the waiter's
-- park is bounded anyway), else PTTL.
local function ttl_hint(exp, now)
  local ttl = tonumber(exp or '')
  if ttl and ttl > now then return ttl - now end
  return redis.call('PTTL', K[1])
end
-- The lock is held under `owner`, the caller's token. With `fresh` ('1':
-- the caller holds nothing of the lock, and the token is its alone) and the
-- call's `hold` not in it, the grant is one the caller does not have — a
-- rollback revived it, or it was given up on: a new grant with a new token
-- replaces it. Re-entering it would keep its old token and, each re-entry
-- refreshing the lease while the re-entry's release leaves the revived hold
-- behind, keep the lock held for ever. The key keeps at least its time to
-- live: were this a try of ours that ran late, after a later call of ours
-- got the lock, that call only loses its lease (told at its next renewal or
-- release), and no one else gets the lock before that lease would have
-- ended. Returns the new token, or nil (not such a grant: re-enter it).
local function replace_revived(fresh, owner, hold, lease)
  if fresh ~= '1' or redis.call('HEXISTS', K[1], hold) == 1 then
    return nil
  end
  local ttl = math.max(redis.call('PTTL', K[1]), lease)
  redis.call('DEL', K[1])
  return new_grant(owner, hold, ttl)
end
-- Whether a waiter entry ("<presence deadline>|...", or nil) is still
-- present at `now`.
local function alive(info, now)
  return (info and tonumber(string.match(info, '^(%d+)|')) or 0) >= now
end
-- Drops waiters at the head whose presence deadline passed (they died, or
-- stopped waiting without saying so). Returns the first live waiter id.
local function live_head(now)
  while true do
    local head = redis.call('LINDEX', K[3], 0)
    if not head then return nil end
    if alive(redis.call('HGET', K[4], head), now) then return head end
    redis.call('LPOP', K[3])
    redis.call('HDEL', K[4], head)
  end
end
-- Takes the first live waiter off the queue (and the dead ones before it,
-- as live_head drops them): its id and its entry, or nil. Popping first
-- and reading after costs one command less per hand-off than live_head
-- and a pop.
local function pop_live_head(now)
  while true do
    local head = redis.call('LPOP', K[3])
    if not head then return nil end
    local info = redis.call('HGET', K[4], head)
    redis.call('HDEL', K[4], head)
    if alive(info, now) then return head, info end
  end
end
-- The releasing client's own fair waiters on this lock, from ARGV[first]
-- on in threes (waiter id, hold id, lease ms): waiter id -> {hold, lease}.
local function local_waiters(first)
  local t = {}
  for i = first, #ARGV - 2, 3 do
    t[ARGV[i]] = {ARGV[i + 1], tonumber(ARGV[i + 2])}
  end
  return t
end
-- The lock is free (hash deleted): grant it to the first live waiter, with a
-- new fencing token and the claim window as its lease: {3, ...}. A waiter
-- id "g:<hold id>" (a call whose watchdog renews its lease) is granted in
-- full: that hold, count 1, and `claim` = the claim window, for the
-- grantee's validity (it confirms with a plain read, and its watchdog then
-- extends the lease). Any other waiter ("w:...": an explicit lease, or
-- replica acknowledgement, or an older client) gets a hand-off to claim:
-- count 0, no hold. Either way `pending` names the grantee (with count 1
-- it means only "handed off", see pending_of). If the first live waiter is
-- one of `locals` (the releaser's own, optional), the grant is direct
-- instead: in full, with the waiter's hold and lease, {4, ..., hold id};
-- the releasing client hands it to its waiter in memory. Returns the reply.
local function hand_off(claim_ms, locals)
  local now_u = now_us()
  local head, info = pop_live_head(math.floor(now_u / 1000))
  if not head then return {1} end
  local next_owner = string.match(info, '^%d+|(.*)$')
  local direct = locals and locals[head]
  if direct then
    local fence = new_grant(next_owner, 'h:' .. direct[1], direct[2], now_u)
    return {4, head, next_owner, fence, direct[1]}
  end
  local fence = string.format('%d', next_fence(now_u))
  local exp = string.format('%d', math.floor(now_u / 1000) + claim_ms)
  if string.sub(head, 1, 2) == 'g:' then
    redis.call('HSET', K[1], 'owner', next_owner, 'count', 1, 'fence', fence, 'pending', head,
               'h:' .. string.sub(head, 3), 1, 'claim', claim_ms, 'exp', exp)
  else
    redis.call('HSET', K[1], 'owner', next_owner, 'count', 0, 'fence', fence, 'pending', head,
               'exp', exp)
  end
  redis.call('PEXPIRE', K[1], claim_ms)
  return {3, head, next_owner, tonumber(fence)}
end
-- Remembers `reply` under this request's latch key (K[5]) for latch_ms,
-- so that a retry of the same request returns it instead of acting again.
local function latch(reply, latch_ms)
  redis.call('SET', K[5], cmsgpack.pack(reply), 'PX', latch_ms)
  return reply
end
local function latched()
  local packed = redis.call('GET', K[5])
  if packed then return cmsgpack.unpack(packed) end
  return nil
end
-- `key` lives at least `ms` from now: a longer time to live is kept. One
-- command unless the key has none (just made) or a longer one.
local function expire_at_least(key, ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 and redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, ms)
  end
end
)lua";

// Shared by the semaphore's scripts (after kPrelude, whose live_head they
// use: a waiter's entry is "<presence deadline>|<k>").
constexpr const char* kSemPrelude = R"lua(
-- A read-write lock's sets (rwlock.h) have an owner ("o:<id>") and a token
-- ("t:<id>"); the hash counts each owner's sets ("n:<owner>") and write sets
-- ("x:<owner>"); a write set has k > 1 (all the lock's permits), a read set
-- k = 1. A semaphore's sets have none of these.
-- The set `id` leaves (given back, or its lease ended): its permits are
-- free. Returns its k, or nil if it is not out.
local function sem_free(id)
  local f = redis.call('HMGET', KEYS[1], 'p:' .. id, 'o:' .. id)
  if not f[1] then return nil end
  local k = tonumber(f[1])
  redis.call('HDEL', KEYS[1], 'p:' .. id, 'o:' .. id, 't:' .. id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HINCRBY', KEYS[1], 'used', -k)
  if f[2] then
    if redis.call('HINCRBY', KEYS[1], 'n:' .. f[2], -1) <= 0 then
      redis.call('HDEL', KEYS[1], 'n:' .. f[2])
    end
    if k > 1 and redis.call('HINCRBY', KEYS[1], 'x:' .. f[2], -1) <= 0 then
      redis.call('HDEL', KEYS[1], 'x:' .. f[2])
    end
  end
  return k
end
-- Takes back the permit sets whose lease ended (at most 256 per call; the
-- rest at the next).
local function sem_expire(now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 256)
  for _, id in ipairs(gone) do
    if not sem_free(id) then redis.call('ZREM', KEYS[2], id) end
  end
end
-- Gives the set `id` back: its permits are free. False if it is not out.
local function sem_give_back(id)
  return sem_free(id) ~= nil
end
-- The set `id`'s permit count if it is out and its lease has not ended;
-- nil if not (an ended one is taken back here, whatever sem_expire left).
local function sem_live(id, now)
  local k = redis.call('HGET', KEYS[1], 'p:' .. id)
  if not k then return nil end
  if tonumber(redis.call('ZSCORE', KEYS[2], id) or '0') > now then
    return tonumber(k)
  end
  sem_give_back(id)
  return nil
end
-- A read-write lock's next writer token (its hash's "fence"): above the
-- last one, and never below the server's clock in us (as next_fence).
local function rw_next_fence()
  local fence = string.format('%d', fence_after(redis.call('HGET', KEYS[1], 'fence')))
  redis.call('HSET', KEYS[1], 'fence', fence)
  return fence
end
-- Makes the set `id` of k permits, its lease ending at `ends` (unless a try
-- of it made it already: then only the lease). A read-write lock's (an
-- `owner`): its owner's counts, and its token: a new writer token for the
-- owner's first write set, else the current one (a reader's: the last
-- writer's; a reentrant writer's or a downgraded reader's: its own write
-- grant's). Returns the set's token (a semaphore's: '0') and whether this
-- call made it.
local function sem_create(id, k, ends, owner)
  local made = redis.call('HSETNX', KEYS[1], 'p:' .. id, k) == 1
  redis.call('ZADD', KEYS[2], ends, id)
  if made then
    redis.call('HINCRBY', KEYS[1], 'used', k)
    if owner then
      redis.call('HSET', KEYS[1], 'o:' .. id, owner)
      redis.call('HINCRBY', KEYS[1], 'n:' .. owner, 1)
      local token = redis.call('HGET', KEYS[1], 'fence') or '0'
      if k > 1 and redis.call('HINCRBY', KEYS[1], 'x:' .. owner, 1) == 1 then
        token = rw_next_fence()
      end
      redis.call('HSET', KEYS[1], 't:' .. id, token)
      return token, true
    end
  end
  if not owner then return '0', made end
  return redis.call('HGET', KEYS[1], 't:' .. id) or '0', made
end
-- Hands free permits to the queue's first live waiters while the head
-- fits: each gets its set under its id, the claim window as its lease, and
-- leaves the queue. A head that needs more than the semaphore has (its
-- permits were lowered) is dropped, and woken too: its next try is
-- refused. A waiter's entry is "<presence deadline>|<k>", a read-write
-- lock's "<presence deadline>|<k>|<owner>". Returns the ids to wake.
local function sem_hand_off(now, claim_ms)
  local handed = {}
  local cur = redis.call('HMGET', KEYS[1], 'permits', 'used')
  if not cur[1] then return handed end
  local permits = tonumber(cur[1])
  local free = permits - tonumber(cur[2] or '0')
  while true do
    local head = live_head(now)
    if not head then break end
    local k, owner = string.match(redis.call('HGET', KEYS[4], head), '^%d+|(%d+)|?(.*)$')
    k = tonumber(k)
    if k <= permits and k > free then break end
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], head)
    if k <= permits then
      local _, made = sem_create(head, k, now + claim_ms, owner ~= '' and owner or nil)
      if made then free = free - k end
    end
    table.insert(handed, head)
  end
  return handed
end
-- An acquire refused: queues `id` (once) with its waiter entry `entry`
-- (nil: not queued) and refreshes its presence; returns the refusal {0,
-- free, ms until the earliest set's lease ends (-1: none), handed}.
local function sem_refused(id, entry, presence, now, free, handed)
  if entry then
    if redis.call('HSET', KEYS[4], id, entry) == 1 then
      redis.call('RPUSH', KEYS[3], id)
    end
    local keep = presence * 2
    if redis.call('PTTL', KEYS[3]) < keep then redis.call('PEXPIRE', KEYS[3], keep) end
    if redis.call('PTTL', KEYS[4]) < keep then redis.call('PEXPIRE', KEYS[4], keep) end
  end
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local wait = first[2] and math.max(0, tonumber(first[2]) - now) or -1
  return {0, math.max(0, free), wait, handed}
end
-- The call `id` has ended (released or given up) and a try of it may still
-- run late: leave a tombstone (KEYS[6]) that the acquire script refuses.
local function sem_bury(ms)
  if tonumber(ms) > 0 then redis.call('SET', KEYS[6], 1, 'PX', ms) end
end
)lua";

// `flags`: the script's shebang line (see scripts.h, "Script flags").
std::string Source(const char* flags, const char* body) {
  return std::string(flags) + "\n" + kPrelude + body;
}

std::string SemSource(const char* flags, const char* body) {
  return std::string(flags) + "\n" + kPrelude + kSemPrelude + body;
}

constexpr const char* kMayGrow = "#!lua";
constexpr const char* kShrinks = "#!lua flags=allow-oom";
constexpr const char* kReadOnly = "#!lua flags=no-writes";

}  // namespace

const Script& AcquireScript() {
  static const Script script(Source(kMayGrow, R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'pending')
local lease, hold = tonumber(ARGV[2]), 'h:' .. ARGV[3]
if not cur[1] then
  return {1, new_grant(ARGV[1], hold, lease), 1}
end
if cur[1] == ARGV[1] and not pending_of(cur[2], cur[4]) then
  local replaced = replace_revived(ARGV[4], ARGV[1], hold, lease)
  if replaced then return {1, replaced, 1} end
  local count = tonumber(cur[2])
  if redis.call('HSETNX', KEYS[1], hold, 1) == 1 then  -- else: a retry
    count = redis.call('HINCRBY', KEYS[1], 'count', 1)
  end
  -- Always a write (replication), see "Replica acknowledgement" in scripts.h.
  redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), lease))
  return {1, tonumber(cur[3]), count}
end
return {0, redis.call('PTTL', KEYS[1]), cur[1]}
)lua"));
  return script;
}

const Script& AcquireFairScript() {
  static const Script script(Source(kMayGrow, R"lua(
local owner, lease, hold, wid = ARGV[1], tonumber(ARGV[2]), 'h:' .. ARGV[3], ARGV[4]
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'pending', 'exp')
local pending = pending_of(cur[2], cur[4])
if cur[1] == owner and (not pending or pending == wid) then
  -- Ours: a reentrant hold, a retry, or the claim of our hand-off.
  local count
  if pending then
    -- The claim (a hand-off has no holds yet, count 0): our hold, and our
    -- lease. Count 1 ends the hand-off (pending_of). A retry of it finds
    -- nothing pending and re-enters below.
    count = 1
    redis.call('HSET', KEYS[1], hold, 1, 'count', 1, 'exp', 0)
    redis.call('PEXPIRE', KEYS[1], lease)
    -- The hand-off took us off the queue already.
    return {1, tonumber(cur[3]), count}
  end
  local replaced = replace_revived(ARGV[7], owner, hold, lease)
  if replaced then
    cur[3], count = replaced, 1
  else
    count = tonumber(cur[2])
    if redis.call('HSETNX', KEYS[1], hold, 1) == 1 then
      count = redis.call('HINCRBY', KEYS[1], 'count', 1)
    end
    -- Always a write, see "Replica acknowledgement" in scripts.h.
    redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), lease))
  end
  -- Granted through the owner token while queued under this waiter id (a
  -- hold shared by owner token came first): leave the queue, or a later
  -- hand-off would go to a waiter that is no longer waiting.
  if redis.call('HDEL', KEYS[4], wid) == 1 then
    redis.call('LREM', KEYS[3], 1, wid)
  end
  return {1, tonumber(cur[3]), count}
end
local now_u = now_us()
local now = math.floor(now_u / 1000)
if not cur[1] then
  local head = live_head(now)
  if (not head) or head == wid then
    if head then
      redis.call('LPOP', KEYS[3])
      redis.call('HDEL', KEYS[4], wid)
    end
    return {1, new_grant(owner, hold, lease, now_u), 1}
  end
end
if ARGV[6] == '1' then
  -- Queue up (once), and refresh our presence deadline.
  local presence = tonumber(ARGV[5])
  local len = 0  -- the queue's length if we joined it now
  if redis.call('HSET', KEYS[4], wid, (now + presence) .. '|' .. owner) == 1 then
    len = redis.call('RPUSH', KEYS[3], wid)
  end
  -- Both keys outlive our presence deadline. They are only ever given a
  -- time to live together, here, to the same value, so the queue's tells
  -- the hash's too. A queue we just made has none yet, and the entries the
  -- hash may still hold are of no live waiter (none is queued but us): set
  -- both plainly, for two presence windows. Else, only when they would end
  -- less than half a window after our deadline (a margin for the clocks
  -- of TIME and of the TTLs), both live at least two windows from now
  -- (never shortened: another waiter's presence may be longer); most calls
  -- find the last refresh long enough and write neither.
  local keep = presence * 2
  if len == 1 then
    redis.call('PEXPIRE', KEYS[3], keep)
    redis.call('PEXPIRE', KEYS[4], keep)
  elseif redis.call('PTTL', KEYS[3]) < presence * 1.5 then
    expire_at_least(KEYS[3], keep)
    expire_at_least(KEYS[4], keep)
  end
  -- Our place in the queue (1: the head, which the next release grants
  -- to), looked for among the first 64 only; 0: further back. How long the
  -- current grant has run, in us (for spinning, spin_advisor.h): since its
  -- fence (the server's clock when it was issued, next_fence; a hand-off's
  -- claim came later, by the claim's delay, which the spinning head learns
  -- as its lag); -2 while a hand-off waits for its claim; -1 when that
  -- cannot be so. And the current grant's fence: the place reflects every
  -- hand-off up to it.
  local pos = len > 0 and len - 1 or redis.call('LPOS', KEYS[3], wid, 'MAXLEN', 64)
  if pos and pos >= 64 then pos = nil end
  -- A claimed hand-off (1) left its pending field behind: its hold began
  -- after its fence, when the grantee claimed it.
  local age, handed = -2, 0
  if not pending then
    local began = tonumber(cur[3] or '')
    age = began and (now_u - began) or -1
    if age < 0 or age > 3600000000 then age = -1 end
    if cur[4] then handed = 1 end
  end
  return {0, ttl_hint(cur[5], now), cur[1] or '', pos and pos + 1 or 0,
          age, tonumber(cur[3] or '0'), handed}
end
return {0, redis.call('PTTL', KEYS[1]), cur[1] or ''}
)lua"));
  return script;
}

const Script& MultiAcquireScript() {
  static const Script script(Source(kMayGrow, R"lua(
local owner, lease, fair = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local n = #KEYS / 4
-- Points the prelude's helpers at the i-th lock's keys. No reply latch
-- (K[5]): this script needs none (retry-safe by its hold ids).
local function use_lock(i)
  K[1], K[2], K[3], K[4] = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  K[5] = nil
end
local now_u = now_us()
local now = math.floor(now_u / 1000)
-- First every lock is checked, nothing granted: one refusal refuses all.
-- A lock is grantable as AcquireScript (barging) or AcquireFairScript
-- (fair, not queued) would grant it: free — fair: with no live waiter
-- queued — or held under our owner token with no hand-off pending.
local cur = {}
for i = 1, n do
  use_lock(i)
  local c = redis.call('HMGET', K[1], 'owner', 'count', 'fence', 'pending')
  if c[1] then
    if c[1] ~= owner or pending_of(c[2], c[4]) then
      return {0, i, redis.call('PTTL', K[1]), c[1]}
    end
  elseif fair and live_head(now) then
    return {0, i, -2, ''}
  end
  cur[i] = c
end
-- Then every lock is granted, each with its own hold and token.
local reply = {1}
for i = 1, n do
  use_lock(i)
  local hold, fresh = 'h:' .. ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local fence, count
  if not cur[i][1] then
    fence, count = new_grant(owner, hold, lease, now_u), 1
  else
    fence = replace_revived(fresh, owner, hold, lease)
    if fence then
      count = 1
    else
      fence, count = tonumber(cur[i][3]), tonumber(cur[i][2])
      if redis.call('HSETNX', K[1], hold, 1) == 1 then  -- else: a retry
        count = redis.call('HINCRBY', K[1], 'count', 1)
      end
      -- Always a write, see "Replica acknowledgement" in scripts.h.
      redis.call('PEXPIRE', K[1], math.max(redis.call('PTTL', K[1]), lease))
    end
  end
  reply[2 * i], reply[2 * i + 1] = fence, count
end
return reply
)lua"));
  return script;
}

const Script& SpinClaimScript() {
  static const Script script(R"lua(#!lua
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence', 'count', 'pending')
if cur[3] == '0' and cur[4] == ARGV[4] and cur[1] == ARGV[1] then
  -- Handed to us and not claimed yet (count 0, the prelude's pending_of):
  -- claim it, as the fair acquire does.
  redis.call('HSET', KEYS[1], 'h:' .. ARGV[3], 1, 'count', 1, 'exp', 0)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return {1, tonumber(cur[2]), 1}
end
if not cur[1] then return {0, 0, ''} end
return {0, -1, cur[1]}  -- still held (its time to live: not needed, not read)
)lua");
  return script;
}

Command HandOffConfirmCommand(const std::string& lock_key,
                              const std::string& hold_id) {
  return {"HMGET", lock_key, "owner", "fence", "h:" + hold_id, "claim"};
}

const Script& PresenceScript() {
  static const Script script(Source(kMayGrow, R"lua(
local wid, presence = ARGV[1], tonumber(ARGV[3])
local now = now_ms()
-- {0}: off the queue. Only a live entry is kept. None: the waiter was
-- taken off the queue (handed the lock, or dropped as lapsed) and is never
-- put back without its place. A lapsed one (the waiter came back late): left as it is, for the
-- waiter's own attempt to decide (refreshed here, it could be dropped from
-- the list by live_head below and then put back in the hash alone: a
-- phantom the waiter's attempts would never queue again).
if not alive(redis.call('HGET', KEYS[4], wid), now) then return {0} end
-- {2}: the waiter's own attempt would be granted now — the lock free and
-- nobody to hand it to before us (its holder's lease ran out; live_head
-- drops only lapsed entries, never ours, alive at `now`), or held under
-- our owner token with nothing pending (a call sharing the token got it
-- first: the attempt re-enters it and leaves the queue, as
-- AcquireFairScript's first branch does). Not refreshed here: a waiter
-- whose thread is stuck must still lapse.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'pending')
if not cur[1] then
  if live_head(now) == wid then return {2} end
elseif cur[1] == ARGV[2] and not pending_of(cur[2], cur[3]) then
  return {2}
end
redis.call('HSET', KEYS[4], wid, (now + presence) .. '|' .. ARGV[2])
-- As AcquireFairScript's refresh: both keys outlive our deadline.
if redis.call('PTTL', KEYS[3]) < presence * 1.5 then
  expire_at_least(KEYS[3], presence * 2)
  expire_at_least(KEYS[4], presence * 2)
end
return {1}
)lua"));
  return script;
}

const Script& ReleaseScript() {
  static const Script script(Source(kShrinks, R"lua(
local hold = 'h:' .. ARGV[3]
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'pending', hold)
local grant = cur[1] == ARGV[1] and (ARGV[2] == '' or cur[3] == ARGV[2]) and not pending_of(cur[2], cur[4])
if not (grant and cur[5]) then
  -- Not a hold of the grant: a retry of a release that ran (its hold is
  -- gone, the lock perhaps handed on) answers as that release did. Only
  -- here: a hold in the grant is released, whether no try of this release
  -- has run or a late try of its acquire put the hold back after one did
  -- (an orphan nobody holds: releasing it frees the lock sooner).
  local first = latched()
  if first then return first end
  if cur[1] and not grant then return {-1, cur[1]} end
  return {0}  -- free, or this hold is not part of the grant (gone with an older one)
end
local latch_ms = tonumber(ARGV[5])
if tonumber(cur[2] or '0') <= 1 then  -- the last hold
  redis.call('DEL', KEYS[1])
  return latch(hand_off(tonumber(ARGV[4]), local_waiters(6)), latch_ms)
end
redis.call('HDEL', KEYS[1], hold)
return latch({2, redis.call('HINCRBY', KEYS[1], 'count', -1)}, latch_ms)
)lua"));
  return script;
}

const Script& AbandonScript() {
  static const Script script(Source(kShrinks, R"lua(
local first = latched()
if first then return first end
local wid = ARGV[1]
redis.call('LREM', KEYS[3], 1, wid)
redis.call('HDEL', KEYS[4], wid)
local cur = redis.call('HMGET', KEYS[1], 'count', 'pending')
if pending_of(cur[1], cur[2]) == wid then
  -- The lock was handed to us but we are leaving: pass it on.
  redis.call('DEL', KEYS[1])
  return latch(hand_off(tonumber(ARGV[2])), tonumber(ARGV[3]))
end
-- A release in our own process granted it to us directly (our hold is in
-- the grant), or a try of ours did with its reply lost: give the hold back.
if ARGV[4] and ARGV[4] ~= '' and redis.call('HDEL', KEYS[1], 'h:' .. ARGV[4]) == 1 then
  local count = redis.call('HINCRBY', KEYS[1], 'count', -1)
  if count > 0 then return latch({2, count}, tonumber(ARGV[3])) end
  redis.call('DEL', KEYS[1])
  return latch(hand_off(tonumber(ARGV[2])), tonumber(ARGV[3]))
end
return {0}
)lua"));
  return script;
}

const Script& RenewScript() {
  static const Script script(R"lua(#!lua flags=allow-oom
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  return 0
end
local lease = tonumber(ARGV[3])
if lease > 0 then  -- always a write, see "Replica acknowledgement" in scripts.h
  redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), lease))
end
return 1
)lua");
  return script;
}

const Script& InspectScript() {
  static const Script script(Source(kReadOnly, R"lua(
local cur = redis.call('HMGET', KEYS[1], 'owner', 'count', 'fence', 'pending')
local last = redis.call('GET', KEYS[2]) or '0'
local out = {cur[1] or '', tonumber(cur[2] or '0'), tonumber(cur[3] or '0'),
             redis.call('PTTL', KEYS[1]), tonumber(last), pending_of(cur[2], cur[4]) or ''}
local now = now_ms()
for _, wid in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local info = redis.call('HGET', KEYS[4], wid) or '0|'
  local deadline, owner = string.match(info, '^(%d+)|(.*)$')
  table.insert(out, {wid, owner or '', tonumber(deadline or '0') - now})
end
return out
)lua"));
  return script;
}

const Script& ForceUnlockScript() {
  static const Script script(Source(kShrinks, R"lua(
local first = latched()
if first then return first end
-- Every reply is latched, "free" and "another grant" too: else a retry of
-- a first try that found the lock free (or not the expected grant) would
-- remove whichever grant came in between.
local latch_ms = tonumber(ARGV[4])
local cur = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if not cur[1] then
  return latch({0, '', 0}, latch_ms)
end
if (ARGV[2] ~= '' and cur[1] ~= ARGV[2]) or (ARGV[3] ~= '0' and cur[2] ~= ARGV[3]) then
  return latch({-1, cur[1], tonumber(cur[2])}, latch_ms)
end
redis.call('DEL', KEYS[1])
local r = hand_off(tonumber(ARGV[1]))
local reply = {1, cur[1], tonumber(cur[2])}
if r[1] == 3 then
  reply = {3, cur[1], tonumber(cur[2]), r[2], r[3], r[4]}
end
return latch(reply, latch_ms)
)lua"));
  return script;
}

const Script& LatchSetScript() {
  static const Script script(R"lua(#!lua
local cur = redis.call('HMGET', KEYS[1], 'count', 'setter')
if cur[1] then
  if cur[2] == ARGV[3] then return {1, tonumber(ARGV[1])} end
  return {0, tonumber(cur[1])}
end
redis.call('HSET', KEYS[1], 'count', ARGV[1], 'ttl', ARGV[2], 'setter', ARGV[3])
return {1, tonumber(ARGV[1])}
)lua");
  return script;
}

const Script& LatchCountDownScript() {
  static const Script script(R"lua(#!lua
local cur = redis.call('HMGET', KEYS[1], 'count', 'ttl', 'opener')
if not cur[1] then return {-1, 0} end
local count = tonumber(cur[1])
if count == 0 then
  if cur[3] == ARGV[1] then return {1, 0} end
  if redis.call('HEXISTS', KEYS[1], 'd:' .. ARGV[1]) == 1 then return {2, 0} end
  return {3, 0}
end
if redis.call('HSETNX', KEYS[1], 'd:' .. ARGV[1], 1) == 0 then
  return {2, count}
end
count = count - 1
if count > 0 then
  redis.call('HSET', KEYS[1], 'count', count)
  return {2, count}
end
redis.call('HSET', KEYS[1], 'count', 0, 'opener', ARGV[1])
redis.call('PEXPIRE', KEYS[1], cur[2])
return {1, 0}
)lua");
  return script;
}

const Script& SemAcquireScript() {
  static const Script script(SemSource(kMayGrow, R"lua(
local id, k, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[5]) == 1 then return {-3, 0, 0, {}} end
local permits = redis.call('HGET', KEYS[1], 'permits')
if not permits then return {-1, 0, 0, {}} end
permits = tonumber(permits)
local now = now_ms()
sem_expire(now)
local handed = sem_hand_off(now, tonumber(ARGV[6]))
local mine = sem_live(id, now)
if mine then
  -- Ours: the hand-off to us (just now, or earlier) claimed, or a retry of
  -- a try whose reply was lost. Our lease from now; always a write, also
  -- for a retry in the same millisecond (see "Replica acknowledgement").
  local ends = tonumber(redis.call('ZSCORE', KEYS[2], id))
  redis.call('ZADD', KEYS[2], math.max(ends + 1, now + lease), id)
  if redis.call('HDEL', KEYS[4], id) == 1 then redis.call('LREM', KEYS[3], 1, id) end
  return {1, mine, handed}
end
if k > permits then
  if redis.call('HDEL', KEYS[4], id) == 1 then redis.call('LREM', KEYS[3], 1, id) end
  return {-2, permits, 0, handed}
end
local free = permits - tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local head = live_head(now)
if k <= free and (not head or head == id) then
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('HDEL', KEYS[4], id)
  end
  sem_create(id, k, now + lease)
  return {1, k, handed}
end
return sem_refused(id, ARGV[5] == '1' and (now + tonumber(ARGV[4])) .. '|' .. k,
                   tonumber(ARGV[4]), now, free, handed)
)lua"));
  return script;
}

const Script& SemReleaseScript() {
  static const Script script(SemSource(kShrinks, R"lua(
local first = latched()
if first then return first end
-- Out of the queue: a waiter leaving, or a held-up try of the releasing
-- call that queued its id again after its grant (a hand-off would create a
-- set for it).
if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then redis.call('LREM', KEYS[3], 1, ARGV[1]) end
local now = now_ms()
sem_expire(now)
local status = 0
if sem_live(ARGV[1], now) then
  sem_give_back(ARGV[1])
  status = 1
end
sem_bury(ARGV[4])
local handed = sem_hand_off(now, tonumber(ARGV[2]))
return latch({status, handed, tonumber(redis.call('HGET', KEYS[1], 'used') or '0')},
             tonumber(ARGV[3]))
)lua"));
  return script;
}

const Script& SemRenewScript() {
  static const Script script(SemSource(kShrinks, R"lua(
local now = now_ms()
local ends = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
if ends <= now or redis.call('HEXISTS', KEYS[1], 'p:' .. ARGV[1]) == 0 then
  return 0
end
local lease = tonumber(ARGV[2])
if lease > 0 then  -- always a write, see "Replica acknowledgement"
  redis.call('ZADD', KEYS[2], math.max(ends + 1, now + lease), ARGV[1])
end
return 1
)lua"));
  return script;
}

const Script& SemSetScript() {
  static const Script script(R"lua(#!lua
local cur = redis.call('HMGET', KEYS[1], 'permits', 'setter')
if cur[1] then
  return {cur[2] == ARGV[2] and 1 or 0, tonumber(cur[1])}
end
redis.call('HSET', KEYS[1], 'permits', ARGV[1], 'used', 0, 'setter', ARGV[2])
return {1, tonumber(ARGV[1])}
)lua");
  return script;
}

const Script& SemAddScript() {
  static const Script script(SemSource(kMayGrow, R"lua(
local first = latched()
if first then return first end
local permits = tonumber(redis.call('HGET', KEYS[1], 'permits') or '0')
local after = tonumber(ARGV[1])
if ARGV[5] == 'add' then after = permits + after end
if after < 0 or after > tonumber(ARGV[4]) then
  return latch({0, permits}, tonumber(ARGV[3]))
end
redis.call('HSET', KEYS[1], 'permits', after)
redis.call('HSETNX', KEYS[1], 'used', 0)
local now = now_ms()
sem_expire(now)
return latch({1, after, sem_hand_off(now, tonumber(ARGV[2]))}, tonumber(ARGV[3]))
)lua"));
  return script;
}

const Script& SemInspectScript() {
  static const Script script(SemSource(kReadOnly, R"lua(
local cur = redis.call('HMGET', KEYS[1], 'permits', 'used')
if not cur[1] then return {-1, 0, 0, 0} end
local now = now_ms()
-- Sets whose lease ended count as free (the next change takes them back).
local ended = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local gone = 0
for _, id in ipairs(ended) do
  gone = gone + tonumber(redis.call('HGET', KEYS[1], 'p:' .. id) or '0')
end
return {tonumber(cur[1]), tonumber(cur[2] or '0') - gone,
        redis.call('ZCARD', KEYS[2]) - #ended, redis.call('LLEN', KEYS[3])}
)lua"));
  return script;
}

const Script& RwAcquireScript() {
  static const Script script(SemSource(kMayGrow, R"lua(
local id, k, lease, owner = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[7]
if redis.call('EXISTS', KEYS[5]) == 1 then return {-3, 0, 0, {}} end
if redis.call('HSETNX', KEYS[1], 'permits', ARGV[10]) == 1 then
  redis.call('HSETNX', KEYS[1], 'used', 0)
end
local now = now_ms()
sem_expire(now)
local handed = sem_hand_off(now, tonumber(ARGV[6]))
local function leave_queue()
  if redis.call('HDEL', KEYS[4], id) == 1 then redis.call('LREM', KEYS[3], 1, id) end
end
if sem_live(id, now) then
  -- Ours: the hand-off to us claimed, or a retry of a try whose reply was
  -- lost. Our lease from now; always a write (see "Replica
  -- acknowledgement").
  local ends = tonumber(redis.call('ZSCORE', KEYS[2], id))
  redis.call('ZADD', KEYS[2], math.max(ends + 1, now + lease), id)
  leave_queue()
  return {1, k, handed, redis.call('HGET', KEYS[1], 't:' .. id) or '0'}
end
-- The owner's sets out, unless the caller holds none under its private
-- token (`fresh`): then those are revived by a rollback or given up on, and
-- they count as anyone's.
local mine, writes = 0, 0
if ARGV[8] ~= '1' then
  local c = redis.call('HMGET', KEYS[1], 'n:' .. owner, 'x:' .. owner)
  mine, writes = tonumber(c[1] or '0'), tonumber(c[2] or '0')
end
if k > 1 and mine > 0 and writes == 0 then
  -- A reader asking to write: it would wait for itself. Refused. Queued (its
  -- owner token is shared, and another thread of it got a read meanwhile),
  -- it blocked those behind it: they may fit now (found by model/rwlock.pml).
  leave_queue()
  for _, h in ipairs(sem_hand_off(now, tonumber(ARGV[6]))) do table.insert(handed, h) end
  return {-4, 0, 0, handed}
end
local permits = tonumber(redis.call('HGET', KEYS[1], 'permits'))
local free = permits - tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
local head = live_head(now)
-- Reentrant (the owner holds a set: a read beside its read, anything beside
-- its write) at once, past the queue; else when it fits and, fair, nobody
-- live is queued ahead.
if mine > 0 or (k <= free and (ARGV[9] ~= '1' or not head or head == id)) then
  leave_queue()
  return {1, k, handed, (sem_create(id, k, now + lease, owner))}
end
local queue = ARGV[5] == '1' and ARGV[9] == '1'
return sem_refused(id, queue and (now + tonumber(ARGV[4])) .. '|' .. k .. '|' .. owner,
                   tonumber(ARGV[4]), now, free, handed)
)lua"));
  return script;
}

const Script& RwInspectScript() {
  static const Script script(SemSource(kReadOnly, R"lua(
local now = now_ms()
local out = {tonumber(redis.call('HGET', KEYS[1], 'fence') or '0'),
             redis.call('LLEN', KEYS[3])}
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf',
                        'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #live, 2 do
  local f = redis.call('HMGET', KEYS[1], 'p:' .. live[i], 'o:' .. live[i], 't:' .. live[i])
  if f[1] then
    table.insert(out, {live[i], tonumber(f[1]) > 1 and 1 or 0, f[2] or '',
                       tonumber(f[3] or '0'), tonumber(live[i + 1]) - now})
  end
end
return out
)lua"));
  return script;
}

}  // namespace lockfleet::internal
