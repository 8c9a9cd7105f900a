// Uses the installed lockfleet headers and libraries. Needs no Redis: it
// parses a URL and constructs clients, which do not connect.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/redis_url.h"

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "lockfleet consumer: FAILED: " << what << "\n";
    ++failures;
  }
}

}  // namespace

int main() {
  const lockfleet::RedisEndpoint e =
      lockfleet::ParseRedisUrl("redis://127.0.0.1:6380/2");
  Check(e.host == "127.0.0.1", "host is 127.0.0.1, got '" + e.host + "'");
  Check(e.port == 6380, "port is 6380, got " + std::to_string(e.port));
  Check(e.db == 2, "db is 2, got " + std::to_string(e.db));
  Check(e.unix_path.empty(), "no unix path");
  Check(e.password.empty(), "no password");

  try {
    lockfleet::ParseRedisUrl("http://127.0.0.1");
    Check(false, "ParseRedisUrl(\"http://...\") throws");
  } catch (const lockfleet::Error& error) {
    Check(error.code() == lockfleet::ErrorCode::kInvalidArgument,
          "bad URL is kInvalidArgument, got " +
              std::string(lockfleet::ErrorCodeName(error.code())));
  }

  // Pulls in the hiredis-backed parts of the static library, so the link
  // proves that lockfleetConfig.cmake re-created the private dependencies.
  {
    lockfleet::RedisOptions options;
    options.url = "redis://127.0.0.1:6380/2";
    auto redis = std::make_shared<lockfleet::RedisClient>(options);
    lockfleet::LockClient client(redis);
    Check(!client.client_id().empty(), "LockClient has a client id");
    Check(redis->endpoint().port == 6380, "RedisClient endpoint port");
  }

  if (failures != 0) return EXIT_FAILURE;
  std::cout << "lockfleet consumer: ok\n";
  return EXIT_SUCCESS;
}
