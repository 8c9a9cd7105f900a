// A private redis-server for `lockfleet demo` and `lockfleet bench`: started
// in a directory of the caller's, listening only on a unix socket there,
// without persistence; a SupervisedProcess, so it dies with this process.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "lockfleet/lockcore/redis_client.h"
#include "supervised_process.h"

namespace lockfleet::cli {

// The unix socket a private redis-server in `dir` listens on.
std::string PrivateRedisSocket(const std::filesystem::path& dir);

// Starts `redis_server` (a path, e.g. from FindOnPath) with `dir` as its
// working directory: TCP off, PrivateRedisSocket(dir), no RDB or AOF; its
// stderr goes to dir/redis.log. Does not wait for it (see WaitForRedis).
// Throws std::runtime_error if it cannot be started.
std::unique_ptr<SupervisedProcess> StartPrivateRedis(
    const std::string& redis_server, const std::filesystem::path& dir);

// PINGs `redis` until it answers (true), `timeout` has passed or `server`
// (null for a Redis not ours) has exited (false, the last error in *error).
// A zero `timeout` tries once.
bool WaitForRedis(RedisClient& redis, SupervisedProcess* server,
                  std::chrono::milliseconds timeout, std::string* error);

}  // namespace lockfleet::cli
