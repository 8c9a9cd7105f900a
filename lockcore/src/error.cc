#include "lockfleet/lockcore/error.h"

namespace lockfleet {

std::string_view ErrorCodeName(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kRedisUnavailable:
      return "redis_unavailable";
    case ErrorCode::kRedisTimeout:
      return "redis_timeout";
    case ErrorCode::kRedisAuth:
      return "redis_auth";
    case ErrorCode::kRedisProtocol:
      return "redis_protocol";
    case ErrorCode::kRedisScript:
      return "redis_script";
    case ErrorCode::kRedisBusy:
      return "redis_busy";
    case ErrorCode::kKafka:
      return "kafka";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kRedisReplicas:
      return "redis_replicas";
  }
  return "internal";
}

}  // namespace lockfleet
