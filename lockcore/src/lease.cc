#include "lockfleet/lockcore/lease.h"

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet {

namespace {
const std::string kEmpty;
}

Lease::Lease() noexcept = default;

Lease::Lease(std::shared_ptr<internal::LockCore> core,
             std::shared_ptr<internal::HeldLock> held_lock, std::string hold_id,
             Clock::TimePoint acquired_at) noexcept
    : core_(std::move(core)),
      held_lock_(std::move(held_lock)),
      hold_id_(std::move(hold_id)),
      acquired_at_(acquired_at) {}

Lease::~Lease() {
  if (!held()) return;
  try {
    Release();
  } catch (...) {  // counted in release_failures; the lease runs out by itself
  }
}

Lease::Lease(Lease&& other) noexcept = default;

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this == &other) return *this;
  if (held()) {
    try {
      Release();
    } catch (...) {
    }
  }
  core_ = std::move(other.core_);
  held_lock_ = std::move(other.held_lock_);
  hold_id_ = std::move(other.hold_id_);
  acquired_at_ = other.acquired_at_;
  return *this;
}

const std::string& Lease::name() const {
  return held() ? held_lock_->name : kEmpty;
}
const std::string& Lease::owner() const {
  return held() ? held_lock_->owner : kEmpty;
}
int64_t Lease::fence() const { return held() ? held_lock_->fence : 0; }

bool Lease::lost() const noexcept {
  return !held() || core_->Lost(*held_lock_);
}

std::stop_token Lease::stop_token() const {
  return internal::StopTokenOf(held_lock_.get());
}

Clock::TimePoint Lease::valid_until() const {
  return internal::ValidUntilOf(held_lock_.get());
}

ReleaseStatus Lease::Release() {
  if (!held())
    throw Error(ErrorCode::kInvalidArgument,
                "Release() on a Lease that holds nothing");
  std::shared_ptr<internal::LockCore> core = std::move(core_);
  std::shared_ptr<internal::HeldLock> held_lock = std::move(held_lock_);
  return core->Release(held_lock, hold_id_, acquired_at_);
}

const char* ReleaseStatusName(ReleaseStatus status) noexcept {
  switch (status) {
    case ReleaseStatus::kReleased:
      return "released";
    case ReleaseStatus::kStillHeld:
      return "still_held";
    case ReleaseStatus::kNotHeld:
      return "not_held";
    case ReleaseStatus::kNotOwner:
      return "not_owner";
  }
  return "unknown";
}

}  // namespace lockfleet
