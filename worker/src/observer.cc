#include "lockfleet/worker/observer.h"

namespace lockfleet::worker {

const char* JobResultName(JobResult result) noexcept {
  switch (result) {
    case JobResult::kOk:
      return "ok";
    case JobResult::kRejected:
      return "rejected";
    case JobResult::kFailed:
      return "failed";
    case JobResult::kDuplicate:
      return "duplicate";
    case JobResult::kCancelled:
      return "cancelled";
    case JobResult::kTimeout:
      return "timeout";
    case JobResult::kLeaseLost:
      return "lease_lost";
  }
  return "unknown";
}

const char* JobSourceName(JobSource source) noexcept {
  switch (source) {
    case JobSource::kKafka:
      return "kafka";
    case JobSource::kSchedule:
      return "schedule";
  }
  return "unknown";
}

}  // namespace lockfleet::worker
