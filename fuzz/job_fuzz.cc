// Fuzzes ParseJob, which reads every record of the jobs topic.
//
// Properties: it either returns a job or throws JobError (anything else —
// another exception, a crash, a leak, undefined behaviour — is a finding);
// a parsed job is within the documented bounds (its limit and lock_mode
// too); and EncodeJob turns it into a record that parses back to the same
// job.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lockfleet/worker/job.h"

namespace {

using lockfleet::worker::EncodeJob;
using lockfleet::worker::Job;
using lockfleet::worker::JobError;
using lockfleet::worker::ParseJob;

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Job job;
  try {
    job = ParseJob(text);
  } catch (const JobError& e) {
    Check(e.what()[0] != '\0');  // says why
    return 0;
  }
  Check(!job.id.empty() && job.id.size() <= 256);
  Check(!job.lock.empty() && job.lock.size() <= 1024);
  Check(!job.type.empty() && job.type.size() <= 128);
  if (job.limit) {
    Check(!job.limit->name.empty() && job.limit->name.size() <= 1024 &&
          job.limit->name[0] != '}');
    Check(job.limit->permits >= 1 && job.limit->permits <= 1'000'000);
    Check(job.limit->take >= 1 && job.limit->take <= job.limit->permits);
  }
  if (job.lock_mode) {
    Check(*job.lock_mode == lockfleet::config::LockMode::kRead ||
          *job.lock_mode == lockfleet::config::LockMode::kWrite);
  }
  // Uncaught here: EncodeJob must not refuse what ParseJob accepted.
  const std::string record = EncodeJob(job);
  Check(ParseJob(record) == job);
  return 0;
}
