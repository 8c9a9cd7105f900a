#include "lock_held.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "command.h"

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
      key == "LOCKFLEET_LOCKS") {
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

std::string LocksNoun(const std::vector<std::string>& names) {
  return names.size() == 1 ? "lock " + Quoted(names[0])
                           : "locks " + QuotedList(names);
}

std::string DescribeGrants(const std::vector<LockGrant>& grants, bool fences) {
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

}  // namespace lockfleet::cli
