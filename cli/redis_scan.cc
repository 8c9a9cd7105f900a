#include "redis_scan.h"

#include "lockfleet/lockcore/error.h"

namespace lockfleet::cli {

ScanEnd ForEachScannedKey(RedisClient& redis, const std::string& match,
                          int count,
                          const std::function<bool(const std::string&)>& visit,
                          const std::function<bool(long long)>& stop) {
  ScanEnd end;
  // A cluster's keys are spread over its masters: each is walked in turn.
  for (const RedisNode& master : redis.Masters()) {
    std::string cursor = "0";
    do {
      if (stop && stop(end.calls)) return end;
      const Reply reply = redis.ExecuteOn(
          master,
          {"SCAN", cursor, "MATCH", match, "COUNT", std::to_string(count)});
      ++end.calls;
      if (reply.is_error()) {
        throw Error(ErrorCode::kRedisProtocol, "SCAN: " + reply.str);
      }
      if (reply.type != Reply::Type::kArray || reply.elements.size() != 2) {
        throw Error(ErrorCode::kRedisProtocol, "unexpected reply to SCAN");
      }
      cursor = reply.elements[0].str;
      for (const Reply& key : reply.elements[1].elements) {
        if (!visit(key.str)) return end;
      }
    } while (cursor != "0");
  }
  end.complete = true;
  return end;
}

}  // namespace lockfleet::cli
