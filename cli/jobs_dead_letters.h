// The worker fleet's dead-letter list as the on-call tools read it.
//
// A worker gives up on a job (every attempt failed, its lock wait timed out,
// no handler for its type, or a record that is not a job) by pushing one
// entry onto the Redis list "<prefix>:jobs:dead", newest first, the last
// 10,000 kept (worker::JobRunner, whose DeadLetterKey, DoneKey and
// kDeadLetterClipBytes the tools use). An entry is
//
//   <reason> TAB <worker id> TAB <record>
//
// where a reason or record over 64 KiB was cut there and followed by
// "... (N bytes in all)". The record is the job as the worker encoded it
// (EncodeJob: no raw tab in it), or the bytes that arrived when they were no
// job. Entries have no identity of their own and their indexes shift as new
// ones arrive, so the tools address them by the job id in their record; to
// remove one they LREM its exact bytes, once.
//
// Thread-safety: plain values and functions of their arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/worker/job.h"
#include "lockfleet/worker/runner.h"

namespace lockfleet::cli {

struct DeadLetter {
  int64_t index = 0;  // position in the list when read; 0 is the newest
  std::string entry;  // the list element, exactly (LREM needs it)
  std::string reason;
  std::string worker;
  std::string record;             // as stored (cut when `clipped`)
  size_t record_bytes = 0;        // the record's full size (from the cut note)
  bool clipped = false;           // the record was cut at 64 KiB
  std::optional<std::string> id;  // the record's "id", "lock", "type" as
  std::optional<std::string> lock;  // far as it can be read: a cut or
  std::optional<std::string> type;  // malformed record may still name them
  std::optional<worker::Job> job;   // the record is a whole job: retryable
  // Why it cannot be retried; "" when `job` is set.
  std::string problem;
};

// Splits and reads one list element.
DeadLetter ParseDeadLetter(std::string entry, int64_t index);

// Which entries a command is about. Empty fields do not filter.
struct DeadLetterFilter {
  std::vector<std::string> ids;     // the record's job id is one of these
  std::string reason_glob;          // the reason matches (jobs_support.h globs)
  std::optional<std::string> lock;  // the record's lock is exactly this

  bool Matches(const DeadLetter& letter) const;
};

// Reads the list newest first in batches (a short script: the list's length
// and a few hundred entries, atomically), calling `visit` for each entry
// until it returns false. Entries pushed meanwhile (at the head) are
// accounted for by the change in length, so no entry is seen twice or
// missed — except while the list is at its 10,000 cap (a push then trims the
// tail, the length stays) or entries are removed meanwhile. Throws
// lockfleet::Error when Redis fails or the key is not a list.
void ForEachDeadLetter(RedisClient& redis, const std::string& key,
                       const std::function<bool(DeadLetter)>& visit);

// The entries `filter` selects, newest first.
std::vector<DeadLetter> SelectDeadLetters(RedisClient& redis,
                                          const std::string& key,
                                          const DeadLetterFilter& filter);

// Throws Error(kRedisProtocol) naming `what` when `reply` is an error reply
// (WRONGTYPE, ...); returns it otherwise.
Reply Checked(Reply reply, std::string_view what);

}  // namespace lockfleet::cli
