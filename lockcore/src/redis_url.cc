#include "lockfleet/lockcore/redis_url.h"

#include <string>

#include "lockfleet/lockcore/error.h"

namespace lockfleet {

RedisEndpoint ParseRedisUrl(std::string_view url) {
  RedisEndpoint endpoint;
  const std::string why = config::ParseRedisUrl(url, &endpoint);
  if (!why.empty()) {
    // The URL is shown redacted: this message reaches terminals and logs
    // (`lockfleet lock --redis ...`), and it used to carry the password.
    throw Error(ErrorCode::kInvalidArgument,
                "invalid Redis URL '" + config::RedactRedisUrl(url) +
                    "': " + why + " (expected " + config::kRedisUrlForms + ")");
  }
  return endpoint;
}

}  // namespace lockfleet
