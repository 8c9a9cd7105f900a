// Job: one unit of work for the worker fleet, and its wire format.
//
// A job names the lock it runs under, the handler that runs it and a flat
// payload. On the jobs topic a job is one JSON object per Kafka record,
// keyed by its lock (so jobs on one lock share a partition):
//
//   {"id": "order-1234", "lock": "product:7", "type": "inventory.purchase",
//    "payload": {"buyer": "alice"}}
//
//   id       required string, 1..256 bytes: the job's identity. A job whose id
//            already finished (within worker.dedup_ttl) is skipped, so a
//            redelivered record does not run again — unless the worker died
//            between the handler's end and its done marker (docs/worker.md;
//            handlers that write through their FencedResource can close
//            that gap).
//   lock     required string, 1..1024 bytes: the lock held while it runs.
//   type     required string, 1..128 bytes: a registered handler's name.
//   payload  optional object of scalars (string, number, boolean); nested
//            objects and arrays are refused. Default: {}.
//   limit    optional object {"name": "partner-api", "permits": 3, "take": 1}:
//            a concurrency limit held after the lock while it runs (see
//            config::LimitConfig; name 1..1024 bytes, permits 1..1000000,
//            take 1..permits, default 1). Default: none.
//   lock_mode optional string "read" or "write": run under the read-write
//            lock `lock` in that mode instead of the plain lock of that name
//            (config::LockMode): "read" jobs on one lock run side by side,
//            a "write" job runs alone. Anything else (another string, null,
//            a number) refuses the record. Default: the plain lock.
// Unknown top-level fields are ignored (newer producers may add some).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "lockfleet/config/config.h"

namespace lockfleet::worker {

// A job's payload and a handler's settings share one shape: a flat map of
// typed scalars (config::Scalar), so a scheduled job's payload from YAML and
// a Kafka job's payload from JSON read the same way.
using Settings = config::Settings;

struct Job {
  std::string id;
  std::string lock;
  std::string type;
  Settings payload;
  std::optional<config::LimitConfig> limit;
  // std::nullopt: the plain lock `lock`; else its read-write lock.
  std::optional<config::LockMode> lock_mode;

  bool operator==(const Job&) const = default;
};

// A malformed job record or a setting of the wrong type. what() says which
// field and why, e.g. "field 'lock': expected a non-empty string".
class JobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses one record. Throws JobError.
Job ParseJob(std::string_view json);

// The record for `job` (ParseJob's inverse). Throws JobError if a field is
// out of its bounds, so nothing unparseable is ever produced.
std::string EncodeJob(const Job& job);

// Typed reads of a payload or settings entry; std::nullopt when `key` is
// absent. Throw JobError naming the key when it holds another type (an
// integer is accepted where a number is expected).
std::optional<std::string> GetString(const Settings& settings,
                                     std::string_view key);
std::optional<int64_t> GetInt(const Settings& settings, std::string_view key);
std::optional<bool> GetBool(const Settings& settings, std::string_view key);

}  // namespace lockfleet::worker
