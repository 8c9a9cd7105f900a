#include "private_redis.h"

#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::cli {

std::string PrivateRedisSocket(const std::filesystem::path& dir) {
  return (dir / "redis.sock").string();
}

std::unique_ptr<SupervisedProcess> StartPrivateRedis(
    const std::string& redis_server, const std::filesystem::path& dir) {
  return std::make_unique<SupervisedProcess>(
      std::vector<std::string>{redis_server, "--port", "0", "--unixsocket",
                               PrivateRedisSocket(dir), "--save", "",
                               "--appendonly", "no", "--dir", dir.string()},
      (dir / "redis.log").string(), false);
}

bool WaitForRedis(RedisClient& redis, SupervisedProcess* server,
                  std::chrono::milliseconds timeout, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    try {
      redis.Execute({"PING"});
      return true;
    } catch (const Error& e) {
      if (std::chrono::steady_clock::now() >= deadline ||
          (server && server->WaitFor(std::chrono::milliseconds(0)))) {
        *error = e.what();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace lockfleet::cli
