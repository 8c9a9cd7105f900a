// What `lockfleet lock` holds while COMMAND runs — one lock or several (a
// multi-lock), or with --read/--write a read-write lock in one mode — or
// `lockfleet semaphore` (a permit set), as COMMAND's environment and
// lockfleet's messages show it, and its release. One lock is a MultiLease of
// one (OneLease), so every kind runs, releases and reports the same way
// (Holding).
//
// COMMAND's environment (the help text, LockFooter() in lock_command.cc,
// documents it): LOCKFLEET_LOCKS, the number of NAMEs, and for the i-th NAME
// as given (from 1) LOCKFLEET_NAME_<i> and LOCKFLEET_FENCE_<i>; with one
// NAME also LOCKFLEET_NAME and LOCKFLEET_FENCE. Numbered variables, not a
// list in one variable: a lock name may hold any byte but NUL (spaces,
// newlines, '='), and a shell reads one variable per value safely.
//
// COMMAND's environment under a semaphore: LOCKFLEET_SEMAPHORE (its name),
// LOCKFLEET_PERMITS (how many it holds) and LOCKFLEET_PERMIT_ID (the set's
// id, which `Semaphore::Release` takes).
//
// COMMAND's environment under a read-write lock: as under one plain lock
// (LOCKFLEET_NAME, LOCKFLEET_LOCKS=1, LOCKFLEET_NAME_1), plus LOCKFLEET_MODE
// ("read" or "write") and LOCKFLEET_TOKEN (RwLease::token(): a write hold's
// fencing token, a read hold's the last write grant's, 0 if never written).
// LOCKFLEET_FENCE and LOCKFLEET_FENCE_1 (= the token) only for a write hold:
// a read hold's token is shared by every reader and fences nothing, so a
// script that fences its writes with $LOCKFLEET_FENCE finds none.
//
// Thread-safety: free functions; a MultiLease or Holding is used by one
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"

namespace lockfleet::cli {

// `lease` as a multi-lease of one.
MultiLease OneLease(Lease lease);

// Releases every lease of `held`, newest first, each even when another's
// release failed. A failure (Redis) is reported on stderr as a warning
// naming the lock, which then frees by itself when its lease runs out. Returns
// the releases that found their lock no longer ours (kNotHeld, kNotOwner):
// lost.
std::vector<LeaseRelease> ReleaseOrWarn(MultiLease& held);

// COMMAND's variables ("KEY=value") for `held`, the locks of `names` (as
// given on the command line). REQUIRES: held has a lease of every name.
std::vector<std::string> LockVariables(const std::vector<std::string>& names,
                                       const MultiLease& held);

// Whether `key` is one of those variables, which COMMAND must not inherit
// from an enclosing `lockfleet lock`: its LOCKFLEET_FENCE_3 is no fence of
// ours.
bool IsLockVariable(std::string_view key);

// "1 permit of semaphore 'S'", "2 permits of semaphore 'S'".
std::string PermitsNoun(int64_t count, const std::string& name);

// "lock 'X'" for one name, "locks 'A', 'B'" for several.
std::string LocksNoun(const std::vector<std::string>& names);

// "read-write lock 'X' (read)", "read-write lock 'X' (write)".
std::string RwNoun(const std::string& name, RwMode mode);

// Who holds a read-write lock, from `info` (ReadWriteLock::Inspect): "writer
// 'H' (remaining TTL 9.5s)", "2 readers 'A', 'B' (remaining TTL up to 9.5s)"
// (at most 3 named, then "... (N in all)"); "" when it holds no set.
std::string DescribeRwHolders(const RwInfo& info);

// A lock COMMAND runs under: its name and grant, and whether it was lost.
// Or a semaphore's permit set (`permits`): its name and permit count (in
// `fence`). Or a read-write lock's hold (`rw`: its mode): its name and
// token (in `fence`).
struct LockGrant {
  std::string name;
  int64_t fence = 0;
  bool lost = false;
  bool permits = false;
  std::optional<RwMode> rw;
};

// "lock 'B' (fence 7)" or "locks 'A' (fence 6), 'B' (fence 7)"; without
// `fences`, no fences. A permit set: "2 permits of semaphore 'S'". A
// read-write hold: "read-write lock 'X' (write, fence 7)", "read-write lock
// 'X' (read, token 7)"; without `fences`, RwNoun.
std::string DescribeGrants(const std::vector<LockGrant>& grants, bool fences);

// What COMMAND runs under: locks (a MultiLease), a semaphore's permits or a
// read-write lock's hold.
class Holding {
 public:
  explicit Holding(MultiLease locks);
  explicit Holding(Permits permits);
  explicit Holding(RwLease rw);
  Holding(Holding&&) noexcept = default;

  // Each lock's grant, or the permit set, or the read-write hold; `lost` if
  // its stop token was requested (the watchdog said so).
  std::vector<LockGrant> Grants() const;
  // Those that lost() says are gone now (name, fence).
  std::vector<std::pair<std::string, int64_t>> LostNow() const;
  // Releases all (ReleaseOrWarn for locks; the same warning for permits)
  // and returns those found gone (name, fence).
  std::vector<std::pair<std::string, int64_t>> ReleaseOrWarn();
  // COMMAND's variables; `names` as given on the command line.
  std::vector<std::string> Variables(
      const std::vector<std::string>& names) const;

 private:
  MultiLease locks_;
  Permits permits_;
  RwLease rw_;
};

// DescribeGrants(lost, fences), then, when `names` (all the locks) are
// several, " of 'A', 'B', 'C'".
std::string DescribeLost(const std::vector<LockGrant>& lost,
                         const std::vector<std::string>& names, bool fences);

}  // namespace lockfleet::cli
