#include "jobs_dead_command.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "jobs_dead_letters.h"
#include "jobs_dead_options.h"
#include "jobs_dead_retry.h"
#include "jobs_support.h"
#include "option_range.h"

namespace lockfleet::cli {
namespace {

using json = nlohmann::json;

constexpr int kMaxLimit = 10000;  // the list keeps at most that many

std::string Dash(const std::optional<std::string>& text, size_t max) {
  return text ? Printable(*text, max) : "-";
}

json OrNull(const std::optional<std::string>& text) {
  return text ? json(*text) : json(nullptr);
}

json EntryJson(const DeadLetter& d) {
  return {{"index", d.index},
          {"id", OrNull(d.id)},
          {"lock", OrNull(d.lock)},
          {"type", OrNull(d.type)},
          {"reason", d.reason},
          {"worker", d.worker},
          {"record_bytes", d.record_bytes},
          {"clipped", d.clipped},
          {"retryable", d.job.has_value()},
          {"problem", d.problem.empty() ? json(nullptr) : json(d.problem)}};
}

std::string Dump(const json& value, int indent = -1) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

// ---- list -----------------------------------------------------------------

struct ListArgs {
  JobsArgs jobs;
  FilterArgs filter;
  int limit = 100;
  bool json = false;
};

int RunList(const ListArgs& args) {
  CheckRange("--limit", args.limit, 1, kMaxLimit);
  const DeadLetterFilter filter = MakeFilter(args.filter, {});
  return WithDeadLetters(
      args.jobs,
      [&](const JobsConnection&, RedisClient& redis, const std::string& key) {
        const long long total =
            Checked(redis.Execute({"LLEN", key}), "LLEN " + key).integer;
        std::vector<DeadLetter> shown;
        bool truncated = false;
        ForEachDeadLetter(redis, key, [&](DeadLetter d) {
          if (!filter.Matches(d)) return true;
          if (static_cast<int>(shown.size()) == args.limit) {
            truncated = true;
            return false;
          }
          d.record.clear();  // not shown; entries may be large
          d.entry.clear();
          shown.push_back(std::move(d));
          return true;
        });
        if (args.json) {
          json out = {{"key", key},
                      {"total", total},
                      {"dead", json::array()},
                      {"truncated", truncated}};
          for (const DeadLetter& d : shown) out["dead"].push_back(EntryJson(d));
          std::cout << Dump(out) << "\n";
          return shown.empty() ? kExitNothing : kExitOk;
        }
        if (shown.empty()) {
          std::cout << "no dead letters"
                    << (total > 0 ? " matching (" + std::to_string(total) +
                                        " in " + key + ")"
                                  : " in " + key)
                    << "\n";
          return kExitNothing;
        }
        std::ostringstream out;
        out << "INDEX\tJOB ID\tLOCK\tTYPE\tREASON\tWORKER\tBYTES\n";
        for (const DeadLetter& d : shown) {
          out << d.index << "\t" << Dash(d.id, 60) << "\t" << Dash(d.lock, 60)
              << "\t" << Dash(d.type, 40) << "\t" << Printable(d.reason, 70)
              << "\t" << Printable(d.worker, 40) << "\t" << d.record_bytes
              << (d.clipped ? " (cut)" : "") << "\n";
        }
        std::cout << out.str();
        if (truncated) {
          PrintError("more than " + std::to_string(args.limit) +
                     " dead letters match: narrow with --reason or --lock, or "
                     "raise --limit");
        }
        return kExitOk;
      });
}

// ---- show -----------------------------------------------------------------

struct ShowArgs {
  JobsArgs jobs;
  FilterArgs filter;
  std::string id;
  CLI::Option* id_option = nullptr;
  long long index = -1;
  CLI::Option* index_option = nullptr;
  bool json = false;
};

// The record for a person: indented JSON when it is JSON, else its bytes
// with control bytes escaped.
std::string ShowRecord(const DeadLetter& d) {
  if (!d.clipped) {
    const json record = json::parse(d.record, nullptr, false);
    if (!record.is_discarded()) return Dump(record, 2);
  }
  return Printable(d.record, d.record.size());
}

// `text` as one shell word: as it is when that is safe, else in single
// quotes (control bytes shown escaped: the line is for reading).
std::string ShellWord(const std::string& text) {
  const bool plain = !text.empty() &&
                     text.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789._:/@%+=,-") == std::string::npos;
  if (plain) return text;
  std::string out = "'";
  for (char c : Printable(text, text.size())) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string Show(const DeadLetter& d, const std::optional<std::string>& done,
                 const std::string& key) {
  std::ostringstream out;
  out << "dead letter at index " << d.index << " of " << key << "\n"
      << "  job id   " << Dash(d.id, 300) << "\n"
      << "  lock     " << Dash(d.lock, 1100) << "\n"
      << "  type     " << Dash(d.type, 200) << "\n"
      << "  reason   " << Printable(d.reason, 4096) << "\n"
      << "  worker   " << Printable(d.worker, 300) << "\n";
  if (d.job) {
    out << "  done     "
        << (done ? "yes, marker " + Quoted(*done) +
                       ": the job has run since; a retry removes this entry "
                       "without producing it"
                 : std::string("no: a retry runs it again"))
        << "\n  retry    lockfleet jobs dead retry " << ShellWord(*d.id)
        << " --lock " << ShellWord(*d.lock) << "\n";
  } else {
    out << "  retry    not possible: " << d.problem << "\n";
  }
  out << "record (" << d.record_bytes << " bytes"
      << (d.clipped ? ", cut at 64 KiB" : "") << "):\n"
      << ShowRecord(d) << "\n";
  return out.str();
}

int RunShow(const ShowArgs& args) {
  const bool by_id = args.id_option->count() > 0;
  const bool by_index = args.index_option->count() > 0;
  if (by_id == by_index) {
    throw UsageError(
        "give a job ID, or --index N for an entry without one (indexes "
        "shift as dead letters arrive)");
  }
  if (by_index && args.index < 0) {
    throw UsageError("--index " + std::to_string(args.index) +
                     ": must be >= 0");
  }
  const DeadLetterFilter filter = MakeFilter(
      args.filter, by_id ? std::vector{args.id} : std::vector<std::string>{});
  return WithDeadLetters(args.jobs, [&](const JobsConnection& c,
                                        RedisClient& redis,
                                        const std::string& key) {
    const std::string& prefix = c.connection.locks.key_prefix;
    std::vector<DeadLetter> found;
    if (by_id) {
      found = SelectDeadLetters(redis, key, filter);
    } else {
      const Reply entry =
          Checked(redis.Execute({"LINDEX", key, std::to_string(args.index)}),
                  "LINDEX " + key);
      if (!entry.is_nil()) {
        DeadLetter d = ParseDeadLetter(entry.str, args.index);
        if (filter.Matches(d)) found.push_back(std::move(d));
      }
    }
    if (found.empty()) {
      if (by_id) {
        PrintError("no dead letter with job id " + Quoted(args.id) +
                   (filter.lock ? " on lock " + Quoted(*filter.lock) : "") +
                   (filter.reason_glob.empty() ? "" : " matching --reason") +
                   " in " + key);
      } else {
        PrintError(
            "no dead letter at index " + std::to_string(args.index) +
            (filter.lock || !filter.reason_glob.empty() ? " matching" : "") +
            " in " + key);
      }
      return kExitNothing;
    }
    std::vector<Command> gets;
    for (const DeadLetter& d : found) {
      if (d.job)
        gets.push_back(
            {"GET", worker::JobRunner::DoneKey(prefix, *d.lock, *d.id)});
    }
    std::vector<Reply> markers = redis.Pipeline(gets);
    json entries = json::array();
    std::string text;
    size_t next_marker = 0;
    for (const DeadLetter& d : found) {
      std::optional<std::string> done;
      if (d.job) {
        const Reply marker = Checked(markers[next_marker++], "GET marker");
        if (!marker.is_nil()) done = marker.str;
      }
      if (args.json) {
        json one = EntryJson(d);
        one["record_text"] = d.record;
        if (!d.clipped) {
          const json record = json::parse(d.record, nullptr, false);
          one["record"] = record.is_discarded() ? json(nullptr) : record;
        } else {
          one["record"] = nullptr;
        }
        one["done_marker"] = OrNull(done);
        entries.push_back(std::move(one));
      } else {
        text += (text.empty() ? "" : "\n") + Show(d, done, key);
      }
    }
    if (args.json) {
      std::cout << Dump({{"key", key}, {"entries", entries}}) << "\n";
    } else {
      std::cout << text;
    }
    return kExitOk;
  });
}

// ---- purge ----------------------------------------------------------------

struct PurgeArgs {
  JobsArgs jobs;
  FilterArgs filter;
  std::vector<std::string> ids;
  bool all = false;
  bool dry_run = false;
};

int RunPurge(const PurgeArgs& args) {
  if (args.all == !args.ids.empty()) {
    throw UsageError(
        "give the job IDs to purge, or --all (with --reason/--lock to "
        "narrow it)");
  }
  const DeadLetterFilter filter = MakeFilter(args.filter, args.ids);
  return WithDeadLetters(args.jobs, [&](const JobsConnection&,
                                        RedisClient& redis,
                                        const std::string& key) {
    std::vector<DeadLetter> selected = SelectDeadLetters(redis, key, filter);
    const bool missing = ReportMissingIds(filter, selected, key);
    if (selected.empty()) {
      if (args.all) std::cout << "no dead letters matched in " << key << "\n";
      return kExitNothing;
    }
    // Oldest first: LREM -1 then finds each near the tail, where it is.
    size_t purged = 0, gone = 0;
    for (auto it = selected.rbegin(); it != selected.rend(); ++it) {
      const DeadLetter& d = *it;
      if (args.dry_run) {
        std::cout << "would purge " << Name(d) << ": "
                  << Printable(d.reason, 200) << "\n";
        ++purged;
        continue;
      }
      const long long removed =
          Checked(redis.Execute({"LREM", key, "-1", d.entry}), "LREM " + key)
              .integer;
      if (removed == 0) {
        std::cout << Name(d) << ": already gone (removed by someone else)\n";
        ++gone;
      } else {
        std::cout << "purged " << Name(d) << ": " << Printable(d.reason, 200)
                  << "\n";
        ++purged;
      }
    }
    std::cout << (args.dry_run ? "would purge " : "purged ") << purged
              << (purged == 1 ? " dead letter" : " dead letters")
              << (gone > 0 ? ", " + std::to_string(gone) + " already gone"
                           : std::string())
              << " from " << key << "\n";
    return purged == 0 || missing ? kExitNothing : kExitOk;
  });
}

}  // namespace

std::vector<Subcommand> AddDeadCommands(CLI::App& jobs,
                                        HelpFormatter& formatter) {
  CLI::App* dead = jobs.add_subcommand(
      "dead",
      "The dead-letter list: jobs the workers gave up on (every attempt "
      "failed, lock wait timed out, no handler, not a job).");
  dead->require_subcommand(1);
  std::vector<Subcommand> out;

  {
    CLI::App* app = dead->add_subcommand(
        "list",
        "List dead letters, newest first: index, job id, lock, type, "
        "reason, worker, record size.");
    formatter.SetSynopsis(app,
                          "[--reason GLOB] [--lock NAME] [--limit N] [--json]");
    app->footer(ExitStatusFooter(
        "Reasons: 'failed N times; last: ...', 'lock ... not acquired "
        "within ...',\n'no handler for type ...', 'malformed: ...'. INDEX "
        "is the entry's position\nwhen read; it shifts as new dead letters "
        "arrive, so 'show', 'retry' and\n'purge' take job ids. BYTES is the "
        "record's size; a record over 64 KiB was\ncut when it was "
        "dead-lettered ('(cut)') and cannot be retried.",
        "listed", "no dead letters (matching)"));
    auto args = std::make_shared<ListArgs>();
    AddJobsOptions(*app, args->jobs, /*kafka=*/false, /*group=*/false);
    AddFilterOptions(*app, args->filter);
    app->add_option("--limit", args->limit,
                    "List at most N (1..10000). Default: 100")
        ->type_name("N");
    app->add_flag("--json", args->json,
                  "One JSON object: {\"key\", \"total\", \"dead\": [...], "
                  "\"truncated\"}");
    out.push_back(
        {app, false, [args](const Context&) { return RunList(*args); }});
  }
  {
    CLI::App* app = dead->add_subcommand(
        "show",
        "Show dead letters in full: reason, worker, whether the job has "
        "run since (its done marker), and the whole record.");
    formatter.SetSynopsis(app, "(ID | --index N) [--lock NAME] [--json]");
    app->footer(ExitStatusFooter(
        "Every entry of job ID is shown (a job dead-lettered twice, or ids "
        "shared by\njobs on different locks: narrow with --lock). --index "
        "shows the entry at that\nposition now, for records with no job "
        "id.",
        "shown", "no such dead letter"));
    auto args = std::make_shared<ShowArgs>();
    AddJobsOptions(*app, args->jobs, /*kafka=*/false, /*group=*/false);
    AddFilterOptions(*app, args->filter);
    args->index_option =
        app->add_option("--index", args->index,
                        "The entry at this position (0: the newest)")
            ->type_name("N");
    app->add_flag("--json", args->json,
                  "One JSON object: {\"key\", \"entries\": [...]}, each "
                  "with record (parsed) and record_text");
    args->id_option =
        app->add_option("ID", args->id, "The job id")->type_name("");
    out.push_back(
        {app, false, [args](const Context&) { return RunShow(*args); }});
  }
  out.push_back(AddRetryCommand(*dead, formatter));
  {
    CLI::App* app = dead->add_subcommand(
        "purge",
        "Remove dead letters for good: those of the given job ids, or --all "
        "(narrowed by --reason/--lock).");
    formatter.SetSynopsis(
        app, "(ID... | --all) [--reason GLOB] [--lock NAME] [--dry-run]");
    app->footer(ExitStatusFooter(
        "Removes exactly the entries read (LREM of each entry's bytes), so "
        "dead letters\nthat arrive meanwhile are kept. Nothing is produced: "
        "to run a job again use\n'lockfleet jobs dead retry'.",
        "purged", "nothing matched, or a job ID has no dead letter"));
    auto args = std::make_shared<PurgeArgs>();
    AddJobsOptions(*app, args->jobs, /*kafka=*/false, /*group=*/false);
    AddFilterOptions(*app, args->filter);
    app->add_flag("--all", args->all,
                  "Every entry (that --reason and --lock select)");
    app->add_flag("--dry-run", args->dry_run,
                  "Print what would be removed; remove nothing");
    app->add_option("ID", args->ids, "Job ids")->type_name("");
    out.push_back(
        {app, false, [args](const Context&) { return RunPurge(*args); }});
  }
  return out;
}

}  // namespace lockfleet::cli
