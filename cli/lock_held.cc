#include "lock_held.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "command.h"
#include "lockfleet/config/duration.h"

namespace lockfleet::cli {

std::vector<LeaseRelease> ReleaseOrWarn(MultiLease& held) {
  std::vector<LeaseRelease> each;
  try {
    held.Release(&each);
  } catch (const std::exception&) {  // `each` says which failed, and why
  }
  std::vector<LeaseRelease> not_ours;
  for (LeaseRelease& released : each) {
    if (!released.status) {
      PrintError("warning: could not release lock " + Quoted(released.name) +
                 " (" + released.error + "); it frees when its lease runs out");
    } else if (*released.status == ReleaseStatus::kNotHeld ||
               *released.status == ReleaseStatus::kNotOwner) {
      not_ours.push_back(std::move(released));
    }
  }
  return not_ours;
}

MultiLease OneLease(Lease lease) {
  std::vector<Lease> leases;
  leases.push_back(std::move(lease));
  return MultiLease(std::move(leases));
}

std::vector<std::string> LockVariables(const std::vector<std::string>& names,
                                       const MultiLease& held) {
  std::vector<std::string> vars;
  if (names.size() == 1) {
    vars.push_back("LOCKFLEET_NAME=" + names[0]);
    vars.push_back("LOCKFLEET_FENCE=" +
                   std::to_string(held.lease(names[0]).fence()));
  }
  vars.push_back("LOCKFLEET_LOCKS=" + std::to_string(names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    vars.push_back("LOCKFLEET_NAME_" + n + "=" + names[i]);
    vars.push_back("LOCKFLEET_FENCE_" + n + "=" +
                   std::to_string(held.lease(names[i]).fence()));
  }
  return vars;
}

bool IsLockVariable(std::string_view key) {
  if (key == "LOCKFLEET_NAME" || key == "LOCKFLEET_FENCE" ||
      key == "LOCKFLEET_LOCKS" || key == "LOCKFLEET_SEMAPHORE" ||
      key == "LOCKFLEET_PERMITS" || key == "LOCKFLEET_PERMIT_ID" ||
      key == "LOCKFLEET_MODE" || key == "LOCKFLEET_TOKEN") {
    return true;
  }
  for (const std::string_view prefix :
       {"LOCKFLEET_NAME_", "LOCKFLEET_FENCE_"}) {
    if (!key.starts_with(prefix)) continue;
    const std::string_view n = key.substr(prefix.size());
    return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
  }
  return false;
}

std::string PermitsNoun(int64_t count, const std::string& name) {
  return std::to_string(count) + (count == 1 ? " permit" : " permits") +
         " of semaphore " + Quoted(name);
}

std::string LocksNoun(const std::vector<std::string>& names) {
  return names.size() == 1 ? "lock " + Quoted(names[0])
                           : "locks " + QuotedList(names);
}

std::string RwNoun(const std::string& name, RwMode mode) {
  return "read-write lock " + Quoted(name) + " (" + RwModeName(mode) + ")";
}

std::string DescribeRwHolders(const RwInfo& info) {
  if (info.holders.empty()) return "";
  std::chrono::milliseconds ttl(0);
  std::vector<std::string> owners;
  for (const RwHolder& holder : info.holders) {
    ttl = std::max(ttl, holder.ttl);
    owners.push_back(holder.owner);
  }
  const std::string who = QuotedList(owners, /*max_shown=*/3);
  const size_t n = info.holders.size();
  if (info.write_locked()) {
    return "writer " + who + " (remaining TTL " + config::FormatDuration(ttl) +
           ")";
  }
  return std::to_string(n) + (n == 1 ? " reader " : " readers ") + who +
         " (remaining TTL " + (n == 1 ? "" : "up to ") +
         config::FormatDuration(ttl) + ")";
}

std::string DescribeGrants(const std::vector<LockGrant>& grants, bool fences) {
  if (grants.size() == 1 && grants[0].permits) {
    return PermitsNoun(grants[0].fence, grants[0].name);
  }
  if (grants.size() == 1 && grants[0].rw) {
    const LockGrant& grant = grants[0];
    if (!fences) return RwNoun(grant.name, *grant.rw);
    return "read-write lock " + Quoted(grant.name) + " (" +
           RwModeName(*grant.rw) +
           (*grant.rw == RwMode::kWrite ? ", fence " : ", token ") +
           std::to_string(grant.fence) + ")";
  }
  std::string out = grants.size() == 1 ? "lock " : "locks ";
  for (size_t i = 0; i < grants.size(); ++i) {
    if (i > 0) out += ", ";
    out += Quoted(grants[i].name);
    if (fences) out += " (fence " + std::to_string(grants[i].fence) + ")";
  }
  return out;
}

std::string DescribeLost(const std::vector<LockGrant>& lost,
                         const std::vector<std::string>& names, bool fences) {
  std::string out = DescribeGrants(lost, fences);
  if (names.size() > 1) out += " of " + QuotedList(names);
  return out;
}

Holding::Holding(MultiLease locks) : locks_(std::move(locks)) {}
Holding::Holding(Permits permits) : permits_(std::move(permits)) {}
Holding::Holding(RwLease rw) : rw_(std::move(rw)) {}

std::vector<LockGrant> Holding::Grants() const {
  std::vector<LockGrant> grants;
  if (permits_.held()) {
    grants.push_back(LockGrant{permits_.name(), permits_.count(),
                               permits_.stop_token().stop_requested(), true});
  }
  if (rw_.held()) {
    grants.push_back(LockGrant{.name = rw_.name(),
                               .fence = rw_.token(),
                               .lost = rw_.stop_token().stop_requested(),
                               .rw = rw_.mode()});
  }
  for (const Lease& lease : locks_.leases()) {
    grants.push_back(LockGrant{lease.name(), lease.fence(),
                               lease.stop_token().stop_requested()});
  }
  return grants;
}

std::vector<std::pair<std::string, int64_t>> Holding::LostNow() const {
  std::vector<std::pair<std::string, int64_t>> gone;
  if (permits_.held() && permits_.lost())
    gone.emplace_back(permits_.name(), permits_.count());
  if (rw_.held() && rw_.lost()) gone.emplace_back(rw_.name(), rw_.token());
  for (const Lease& lease : locks_.leases()) {
    if (lease.lost()) gone.emplace_back(lease.name(), lease.fence());
  }
  return gone;
}

std::vector<std::pair<std::string, int64_t>> Holding::ReleaseOrWarn() {
  std::vector<std::pair<std::string, int64_t>> gone;
  if (permits_.held()) {
    const std::string name = permits_.name();
    const int64_t count = permits_.count();
    try {
      if (permits_.Release() == ReleaseStatus::kNotHeld)
        gone.emplace_back(name, count);
    } catch (const std::exception& e) {
      PrintError("warning: could not give back the permits of semaphore " +
                 Quoted(name) + " (" + e.what() +
                 "); they come back when their lease runs out");
    }
  }
  if (rw_.held()) {
    const std::string name = rw_.name();
    const int64_t token = rw_.token();
    const RwMode mode = rw_.mode();
    try {
      if (rw_.Release() == ReleaseStatus::kNotHeld)
        gone.emplace_back(name, token);
    } catch (const std::exception& e) {
      PrintError("warning: could not release " + RwNoun(name, mode) + " (" +
                 e.what() + "); it frees when its lease runs out");
    }
  }
  for (const LeaseRelease& released : cli::ReleaseOrWarn(locks_)) {
    gone.emplace_back(released.name, released.fence);
  }
  return gone;
}

std::vector<std::string> Holding::Variables(
    const std::vector<std::string>& names) const {
  if (rw_.held()) {
    const std::string token = std::to_string(rw_.token());
    std::vector<std::string> vars = {
        "LOCKFLEET_NAME=" + rw_.name(),
        "LOCKFLEET_MODE=" + std::string(RwModeName(rw_.mode())),
        "LOCKFLEET_TOKEN=" + token, "LOCKFLEET_LOCKS=1",
        "LOCKFLEET_NAME_1=" + rw_.name()};
    // A read hold's token is no fence (every reader has it): none is set.
    if (rw_.mode() == RwMode::kWrite) {
      vars.push_back("LOCKFLEET_FENCE=" + token);
      vars.push_back("LOCKFLEET_FENCE_1=" + token);
    }
    return vars;
  }
  if (!permits_.held()) return LockVariables(names, locks_);
  return {"LOCKFLEET_SEMAPHORE=" + permits_.name(),
          "LOCKFLEET_PERMITS=" + std::to_string(permits_.count()),
          "LOCKFLEET_PERMIT_ID=" + permits_.id()};
}

}  // namespace lockfleet::cli
