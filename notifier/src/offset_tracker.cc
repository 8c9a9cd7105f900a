#include "offset_tracker.h"

#include <algorithm>

namespace lockfleet::notifier {

uint64_t OffsetTracker::Assign(int32_t partition) {
  std::lock_guard lock(mu_);
  Partition& p = assigned_[partition];
  p = Partition{};
  p.epoch = ++last_epoch_;
  return p.epoch;
}

void OffsetTracker::Revoke(int32_t partition) {
  std::lock_guard lock(mu_);
  assigned_.erase(partition);
}

std::optional<uint64_t> OffsetTracker::Take(int32_t partition, int64_t offset) {
  std::lock_guard lock(mu_);
  auto it = assigned_.find(partition);
  if (it == assigned_.end()) return std::nullopt;
  Partition& p = it->second;
  p.unfinished.insert(offset);
  p.first_taken = p.first_taken < 0 ? offset : std::min(p.first_taken, offset);
  p.last_taken = std::max(p.last_taken, offset);
  return p.epoch;
}

bool OffsetTracker::Done(int32_t partition, uint64_t epoch, int64_t offset) {
  std::lock_guard lock(mu_);
  auto it = assigned_.find(partition);
  if (it == assigned_.end() || it->second.epoch != epoch) return false;
  it->second.unfinished.erase(offset);
  return true;
}

int64_t OffsetTracker::Committable(const Partition& p) {
  if (p.last_taken < 0) return -1;  // nothing taken
  if (p.unfinished.empty()) return p.last_taken + 1;
  int64_t lowest = *p.unfinished.begin();
  return lowest > p.first_taken ? lowest : -1;  // no progress yet
}

std::vector<OffsetTracker::Commit> OffsetTracker::Due(
    const std::vector<int32_t>& only, bool resend_in_flight) {
  std::lock_guard lock(mu_);
  std::vector<Commit> due;
  for (auto& [partition, p] : assigned_) {
    if (!only.empty() &&
        std::find(only.begin(), only.end(), partition) == only.end()) {
      continue;
    }
    int64_t offset = Committable(p);
    auto floor = committed_.find(partition);
    if (offset < 0 || (floor != committed_.end() && offset <= floor->second) ||
        (!resend_in_flight && offset <= p.requested)) {
      continue;
    }
    p.requested = std::max(p.requested, offset);
    due.push_back({partition, offset});
  }
  return due;
}

void OffsetTracker::Committed(int32_t partition, int64_t offset, bool ok) {
  std::lock_guard lock(mu_);
  if (ok) {
    int64_t& floor = committed_.try_emplace(partition, -1).first->second;
    floor = std::max(floor, offset);
    return;
  }
  auto it = assigned_.find(partition);
  if (it != assigned_.end() && it->second.requested == offset) {
    it->second.requested = -1;  // due again at the next Due()
  }
}

std::vector<int32_t> OffsetTracker::Partitions() const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> out;
  for (const auto& [partition, p] : assigned_) out.push_back(partition);
  return out;
}

int64_t OffsetTracker::CommittedOffset(int32_t partition) const {
  std::lock_guard lock(mu_);
  auto it = committed_.find(partition);
  return it == committed_.end() ? -1 : it->second;
}

}  // namespace lockfleet::notifier
