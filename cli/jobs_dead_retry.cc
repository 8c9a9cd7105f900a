#include "jobs_dead_retry.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "jobs_dead_letters.h"
#include "jobs_dead_options.h"
#include "jobs_support.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/job_topic.h"
#include "option_range.h"

namespace lockfleet::cli {
namespace {

// Jobs produced before each wait for the broker's acknowledgement; their
// dead letters are removed batch by batch.
constexpr size_t kProduceBatch = 500;
constexpr int kMaxTimeoutSeconds = 3600;

constexpr char kRetryFooter[] =
    R"(Each selected job's record is produced unchanged (same id) to the jobs
topic, keyed by its lock, oldest first. Once the broker has acknowledged it,
exactly its dead letter is removed (LREM of the entry's bytes); a crash in
between leaves the entry, and retrying again is harmless: workers skip a job
whose done marker exists. Several dead letters of one job produce it once.

A job whose done marker already exists (it has run since it was
dead-lettered, or an earlier retry got as far as the broker) is not
produced: the workers would skip it as a duplicate. Its dead letter is
removed. There is no --force: running a done job again could apply its
effect twice (a second sale); to do that on purpose, produce it under a new
id ('lockfleet jobs dead show ID --json', edit, 'lockfleet jobs produce').

Entries whose record is not a job, or was cut at 64 KiB, cannot be retried;
they are named on stderr and left (see 'lockfleet jobs dead purge').

Kafka comes from --config (kafka.bootstrap, kafka.jobs_topic, its
properties) or --bootstrap/--topic.

Exit status:
  0   every selected job was produced, or found done
  1   nothing matched, or a job named by ID has no dead letter or cannot be
      retried
  2   bad arguments or --config file, or no jobs topic configured
  69  Redis unreachable, or Kafka did not acknowledge within --timeout (the
      dead letters of jobs not acknowledged are left)

Examples:
  lockfleet jobs dead retry order-7 order-9
  lockfleet jobs dead retry --all --reason 'lock * not acquired*' --dry-run)";

struct RetryArgs {
  JobsArgs jobs;
  FilterArgs filter;
  std::vector<std::string> ids;
  bool all = false;
  bool dry_run = false;
  int timeout_s = 30;
};

// One job to retry: every selected dead letter with its record.
struct Retry {
  const DeadLetter* first = nullptr;  // the oldest
  std::vector<const DeadLetter*> letters;
  std::optional<std::string> done;  // its done marker
};

// The last warning the Kafka client logged, for the error message (the
// client logs from its own threads).
class LastLine {
 public:
  void Set(std::string_view line) {
    std::lock_guard lock(mu_);
    line_ = line;
  }
  std::string Get() {
    std::lock_guard lock(mu_);
    return line_;
  }

 private:
  std::mutex mu_;
  std::string line_;
};

std::string Letters(size_t n) {
  return n == 1 ? "its dead letter"
                : "its " + std::to_string(n) + " dead letters";
}

// Removes the dead letters of `retry`; how many were still there.
size_t Remove(RedisClient& redis, const std::string& key, const Retry& retry) {
  std::vector<Command> lrems;
  for (const DeadLetter* d : retry.letters) {
    lrems.push_back({"LREM", key, "-1", d->entry});
  }
  size_t removed = 0;
  for (const Reply& reply : redis.Pipeline(lrems)) {
    removed += Checked(reply, "LREM " + key).integer > 0 ? 1 : 0;
  }
  return removed;
}

std::string Removed(size_t wanted, size_t removed) {
  if (removed == wanted) return "removed " + Letters(wanted);
  if (removed == 0) return "its dead letter was gone already";
  return "removed " + std::to_string(removed) + " of " + Letters(wanted);
}

int RunRetry(const RetryArgs& args) {
  if (args.all == !args.ids.empty()) {
    throw UsageError(
        "give the job IDs to retry, or --all (with --reason/--lock to "
        "narrow it)");
  }
  CheckRange("--timeout", args.timeout_s, 1, kMaxTimeoutSeconds);
  const DeadLetterFilter filter = MakeFilter(args.filter, args.ids);
  return WithDeadLetters(args.jobs, [&](const JobsConnection& c,
                                        RedisClient& redis,
                                        const std::string& key) {
    const JobsKafka& kafka = c.kafka;
    if (kafka.bootstrap.empty() && !args.dry_run) {
      throw UsageError(
          "no jobs topic to retry to: give --config FILE (with a kafka "
          "section) or --bootstrap HOST:PORT");
    }
    const std::string& prefix = c.connection.locks.key_prefix;
    std::vector<DeadLetter> selected = SelectDeadLetters(redis, key, filter);
    bool shortfall = ReportMissingIds(filter, selected, key);
    if (selected.empty()) {
      if (args.all) std::cout << "no dead letters matched in " << key << "\n";
      return kExitNothing;
    }
    std::reverse(selected.begin(), selected.end());  // oldest first

    size_t left = 0;
    std::vector<Retry> retries;
    std::map<std::string, size_t> by_record;
    for (const DeadLetter& d : selected) {
      if (!d.job) {
        PrintError("left " + Name(d) + ": cannot be retried: " + d.problem);
        ++left;
        shortfall |= !args.all;
        continue;
      }
      const auto [it, added] = by_record.emplace(d.record, retries.size());
      if (added) retries.push_back({.first = &d});
      retries[it->second].letters.push_back(&d);
    }
    std::vector<Command> gets;
    for (const Retry& r : retries) {
      gets.push_back(
          {"GET", worker::JobRunner::DoneKey(prefix, r.first->job->lock,
                                             r.first->job->id)});
    }
    const std::vector<Reply> markers = redis.Pipeline(gets);
    for (size_t i = 0; i < retries.size(); ++i) {
      const Reply marker = Checked(markers[i], "GET done marker");
      if (!marker.is_nil()) retries[i].done = marker.str;
    }

    // Done already: nothing to produce, the dead letter is stale.
    size_t done = 0;
    std::vector<const Retry*> to_produce;
    for (const Retry& r : retries) {
      if (!r.done) {
        to_produce.push_back(&r);
        continue;
      }
      ++done;
      std::cout << Name(*r.first) << ": already done (done marker "
                << Quoted(*r.done)
                << "), not produced: the workers would skip it as a "
                   "duplicate; "
                << (args.dry_run
                        ? "would remove " + Letters(r.letters.size())
                        : Removed(r.letters.size(), Remove(redis, key, r)))
                << "\n";
    }

    size_t produced = 0;
    int result = kExitOk;
    if (args.dry_run) {
      for (const Retry* r : to_produce) {
        std::cout << "would retry " << Name(*r->first) << ": produce it to "
                  << kafka.topic << ", then remove "
                  << Letters(r->letters.size()) << "\n";
      }
      produced = to_produce.size();
    } else if (!to_produce.empty()) {
      auto last = std::make_shared<LastLine>();
      const std::chrono::seconds timeout(args.timeout_s);
      try {
        notifier::JobProducer producer(
            {.bootstrap = kafka.bootstrap,
             .topic = kafka.topic,
             .client_id = kafka.client_id,
             .message_timeout = timeout,
             .properties = kafka.properties,
             .log = [last](notifier::LogLevel level, std::string_view line) {
               if (level >= notifier::LogLevel::kWarning) last->Set(line);
             }});
        for (size_t begin = 0; begin < to_produce.size();
             begin += kProduceBatch) {
          const size_t end = std::min(to_produce.size(), begin + kProduceBatch);
          for (size_t i = begin; i < end; ++i) {
            const worker::Job& job = *to_produce[i]->first->job;
            producer.Produce(job.lock, to_produce[i]->first->record);
          }
          if (const uint64_t missing = producer.Flush(timeout); missing > 0) {
            const std::string why = last->Get();
            PrintError(std::to_string(missing) + " of " +
                       std::to_string(end - begin) +
                       " jobs not acknowledged by Kafka at " + kafka.bootstrap +
                       " (from " + kafka.source + ") within " +
                       std::to_string(args.timeout_s) + "s" +
                       (why.empty() ? "" : " (" + why + ")") +
                       "; their dead letters were left: retry again once "
                       "Kafka is back (harmless for any that got through)");
            result = kExitUnavailable;
            break;
          }
          for (size_t i = begin; i < end; ++i) {
            const Retry& r = *to_produce[i];
            std::cout << "retried " << Name(*r.first) << ": produced to "
                      << kafka.topic << "; "
                      << Removed(r.letters.size(), Remove(redis, key, r))
                      << "\n";
            ++produced;
          }
        }
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kKafka &&
            e.code() != ErrorCode::kInvalidArgument) {
          throw;  // Redis: Guarded reports it
        }
        PrintError("Kafka at " + kafka.bootstrap + " (from " + kafka.source +
                   "): " + e.what() +
                   "; the dead letters of jobs not produced were left");
        return e.code() == ErrorCode::kInvalidArgument ? kExitUsage
                                                       : kExitUnavailable;
      }
    }
    std::cout << (args.dry_run ? "would retry " : "retried ") << produced
              << (produced == 1 ? " job" : " jobs")
              << (kafka.bootstrap.empty()
                      ? std::string()
                      : " to " + kafka.topic + " at " + kafka.bootstrap)
              << "; " << done << " already done; " << left
              << " left (cannot be retried)\n";
    if (result != kExitOk) return result;
    return produced + done == 0 || shortfall ? kExitNothing : kExitOk;
  });
}

}  // namespace

Subcommand AddRetryCommand(CLI::App& dead, HelpFormatter& formatter) {
  CLI::App* app = dead.add_subcommand(
      "retry",
      "Run dead-lettered jobs again: produce each record, with its id, to "
      "the jobs topic, then remove its dead letter.");
  formatter.SetSynopsis(app,
                        "(ID... | --all) [--reason GLOB] [--lock NAME] "
                        "[--dry-run] [--timeout S]");
  app->footer(kRetryFooter);
  auto args = std::make_shared<RetryArgs>();
  AddJobsOptions(*app, args->jobs, /*kafka=*/true, /*group=*/false);
  AddFilterOptions(*app, args->filter);
  app->add_flag("--all", args->all,
                "Every retryable entry (that --reason and --lock select)");
  app->add_flag("--dry-run", args->dry_run,
                "Print what would be done; produce and remove nothing");
  app->add_option("--timeout", args->timeout_s,
                  "Seconds to wait for the broker's acknowledgement "
                  "(1..3600). Default: 30")
      ->type_name("S");
  app->add_option("ID", args->ids, "Job ids")->type_name("");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) { return RunRetry(*args); };
  return subcommand;
}

}  // namespace lockfleet::cli
