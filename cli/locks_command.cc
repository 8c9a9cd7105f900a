#include "locks_command.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "connection_options.h"
#include "kafka_wakeups.h"
#include "lockfleet/config/config.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"
#include "redis_glob.h"
#include "redis_scan.h"

namespace lockfleet::cli {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

// How many keys one SCAN call looks at.
constexpr int kScanBatch = 1000;

std::string Ttl(milliseconds ttl) { return config::FormatDuration(ttl); }

json LockJson(const std::string& name, const LockInfo& info) {
  json queue = json::array();
  for (const QueuedWaiter& w : info.queue) {
    queue.push_back({{"waiter_id", w.waiter_id},
                     {"owner", w.owner},
                     {"presence_left_ms", w.presence_left.count()}});
  }
  return {{"name", name},
          {"locked", info.locked},
          {"owner", info.owner},
          {"hold_count", info.hold_count},
          {"ttl_ms", info.ttl.count()},
          {"fence", info.fence},
          {"last_fence", info.last_fence},
          {"pending_waiter", info.pending_waiter},
          {"queue", queue}};
}

// ---- locks ----------------------------------------------------------------

struct LocksArgs {
  ConnectionArgs connection;
  std::string match;
  CLI::Option* match_option = nullptr;
  std::string prefix;
  int limit = 1000;
  bool json = false;
};

int RunLocks(const LocksArgs& args) {
  const bool match = args.match_option->count() > 0;
  if (match && !args.prefix.empty()) {
    throw UsageError("--match and --prefix exclude each other");
  }
  if (args.limit < 1 || args.limit > 1'000'000) {
    throw UsageError("--limit " + std::to_string(args.limit) +
                     ": must be 1..1000000");
  }
  std::string glob = "*";
  if (match) {
    if (const std::string problem = CheckGlob(args.match); !problem.empty()) {
      throw UsageError("--match " + Quoted(args.match) + ": " + problem);
    }
    glob = args.match;
  } else if (!args.prefix.empty()) {
    glob = EscapeGlob(args.prefix) + "*";
  }
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  return Guarded(*connection, [&] {
    auto redis = NewRedis(*connection);
    LockClient locks(redis, connection->locks);
    HeldLocks held = ScanHeldLocks(*redis, locks, connection->locks.key_prefix,
                                   glob, static_cast<size_t>(args.limit));
    std::vector<std::pair<std::string, LockInfo>>& found = held.locks;
    const bool truncated = held.truncated;
    // Most waiters first, then the longest held (least lease left is not
    // it: a watchdog renews), then by name.
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      if (a.second.queue.size() != b.second.queue.size())
        return a.second.queue.size() > b.second.queue.size();
      return a.first < b.first;
    });
    if (args.json) {
      json out = {{"locks", json::array()}, {"truncated", truncated}};
      for (const auto& [name, info] : found) {
        out["locks"].push_back(LockJson(name, info));
      }
      std::cout << out.dump() << "\n";
      return kExitOk;
    }
    if (found.empty()) {
      std::cout << "no locks held"
                << (glob == "*" ? "" : " matching " + Quoted(glob)) << "\n";
      return kExitNothing;
    }
    std::cout << "LOCK\tHOLDER\tHOLDS\tTTL\tFENCE\tPENDING\tQUEUE\n";
    for (const auto& [name, info] : found) {
      std::cout << name << "\t" << info.owner << "\t" << info.hold_count << "\t"
                << Ttl(info.ttl) << "\t" << info.fence << "\t"
                << (info.pending_waiter.empty() ? "-" : info.pending_waiter)
                << "\t" << info.queue.size() << "\n";
    }
    if (truncated) {
      PrintError("more than " + std::to_string(args.limit) +
                 " locks: narrow with --match or --prefix, or raise --limit");
    }
    return kExitOk;
  });
}

// ---- inspect --------------------------------------------------------------

struct InspectArgs {
  ConnectionArgs connection;
  std::string name;
  bool json = false;
};

int RunInspect(const InspectArgs& args) {
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  return Guarded(*connection, [&] {
    LockClient locks(NewRedis(*connection), connection->locks);
    const LockInfo info = locks.Inspect(args.name);
    const bool unknown =
        !info.locked && info.queue.empty() && info.last_fence == 0;
    if (args.json) {
      std::cout << LockJson(args.name, info).dump() << "\n";
      return unknown ? kExitNothing : kExitOk;
    }
    if (unknown) {
      PrintError(
          "no lock " + Quoted(args.name) + ": never taken under key prefix " +
          Quoted(connection->locks.key_prefix) + " (or its keys were deleted)");
      return kExitNothing;
    }
    std::ostringstream out;
    out << "lock " << Quoted(args.name) << ": ";
    if (info.locked) {
      out << "held by " << info.owner << " (" << info.hold_count
          << (info.hold_count == 1 ? " hold" : " holds") << "), fence "
          << info.fence << ", lease " << Ttl(info.ttl) << " left";
    } else {
      out << "free";
    }
    out << "; highest fence issued " << info.last_fence << "\n";
    if (!info.pending_waiter.empty()) {
      out << "handed to waiter " << info.pending_waiter
          << ", not claimed yet\n";
    }
    out << "queue: " << info.queue.size()
        << (info.queue.size() == 1 ? " waiter" : " waiters") << "\n";
    int position = 0;
    for (const QueuedWaiter& w : info.queue) {
      out << "  " << ++position << ". " << w.waiter_id << "  owner " << w.owner
          << "  presence " << Ttl(w.presence_left) << " left\n";
    }
    std::cout << out.str();
    return kExitOk;
  });
}

// ---- unlock ---------------------------------------------------------------

struct UnlockArgs {
  ConnectionArgs connection;
  std::string name;
  bool force = false;
  std::string expect_owner;
  int64_t expect_fence = 0;
};

int RunUnlock(const UnlockArgs& args) {
  if (!args.force) {
    throw UsageError(
        "unlock removes a grant another process holds: give --force (and "
        "--expect-owner/--expect-fence, from 'lockfleet inspect', to remove "
        "exactly the grant you looked at)");
  }
  if (args.expect_fence < 0) {
    throw UsageError("--expect-fence " + std::to_string(args.expect_fence) +
                     ": must be >= 1 (or 0, the default: any)");
  }
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  bool bad_kafka = false;
  std::shared_ptr<notifier::KafkaNotifier> kafka =
      StartOptionalKafka(connection->kafka, connection->kafka_source,
                         "the holder learns at its next renewal", &bad_kafka);
  if (bad_kafka) return kExitUsage;
  status = Guarded(*connection, [&] {
    LockClientOptions options = connection->locks;
    options.publisher = kafka;
    LockClient locks(NewRedis(*connection), options);
    const ForceUnlockResult r = locks.ForceUnlock(
        args.name,
        {.expect_owner = args.expect_owner, .expect_fence = args.expect_fence});
    if (r.mismatch) {
      PrintError("left lock " + Quoted(args.name) + " alone: it is held by " +
                 r.previous_owner + " under fence " +
                 std::to_string(r.previous_fence) + ", not the grant expected");
      return kExitNothing;
    }
    if (!r.was_locked) {
      std::cout << "lock " << Quoted(args.name)
                << " was not held: nothing removed\n";
      return kExitNothing;
    }
    std::cout << "force-unlocked " << Quoted(args.name)
              << ": removed the grant of " << r.previous_owner << " (fence "
              << r.previous_fence << "); "
              << (kafka ? "published a force event (its holder checks at once)"
                        : "no Kafka: its holder learns at its next renewal")
              << "\n";
    return kExitOk;
  });
  return FinishWithKafka(std::move(kafka), status);
}

}  // namespace

HeldLocks ScanHeldLocks(RedisClient& redis, LockClient& locks,
                        const std::string& key_prefix, const std::string& glob,
                        size_t limit, const std::function<bool()>& stopped) {
  const std::string head = key_prefix + ":{";
  const std::string tail = "}:lock";
  HeldLocks out;
  ForEachScannedKey(
      redis, head + glob + tail, kScanBatch,
      [&](const std::string& key) {
        if (key.size() < head.size() + tail.size()) return true;
        if (out.locks.size() >= limit) {
          out.truncated = true;
          return false;
        }
        if (stopped && stopped()) return false;
        std::string name =
            key.substr(head.size(), key.size() - head.size() - tail.size());
        LockInfo info;
        try {
          info = locks.Inspect(name);
        } catch (const Error& e) {
          // A key no lock of ours could have made (an empty or overlong
          // name): not a lock; skip it rather than fail the whole list.
          if (e.code() != ErrorCode::kInvalidArgument) throw;
          return true;
        }
        if (info.locked) {
          out.locks.emplace_back(std::move(name), std::move(info));
        }
        return true;
      },
      [&](long long) { return stopped && stopped(); });
  return out;
}

Subcommand AddLocksCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand(
      "locks",
      "List the locks held now, most waiters first: holder, holds, lease "
      "left, fencing token, pending hand-off, queue length.");
  formatter.SetSynopsis(app,
                        "[--match GLOB | --prefix P] [--limit N] [--json]");
  app->footer(ExitStatusFooter("Reads Redis with SCAN in batches (never KEYS).",
                               "done", "no lock is held (matching)"));
  auto args = std::make_shared<LocksArgs>();
  args->connection.discover_demo = true;
  AddConnectionOptions(*app, args->connection, /*kafka=*/false);
  args->match_option =
      app->add_option(
             "--match", args->match,
             "Only lock names matching this Redis glob (*, ?, [abc], \\ "
             "escapes)")
          ->type_name("GLOB");
  app->add_option("--prefix", args->prefix,
                  "Only lock names that start with P (taken literally)")
      ->type_name("P");
  app->add_option("--limit", args->limit,
                  "List at most N locks (1..1000000). Default: 1000")
      ->type_name("N");
  app->add_flag("--json", args->json,
                "One JSON object: {\"locks\": [...], \"truncated\": bool}");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) { return RunLocks(*args); };
  return subcommand;
}

Subcommand AddInspectCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand(
      "inspect",
      "Show one lock in full: holder, holds, lease left, fencing tokens, "
      "pending hand-off and the queue with each waiter's presence left.");
  formatter.SetSynopsis(app, "NAME [--json]");
  app->footer(ExitStatusFooter(
      "", "done", "no such lock (never taken under the key prefix)"));
  auto args = std::make_shared<InspectArgs>();
  args->connection.discover_demo = true;
  AddConnectionOptions(*app, args->connection, /*kafka=*/false);
  app->add_flag("--json", args->json, "One JSON object");
  app->add_option("NAME", args->name, "The lock")->required()->type_name("");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) { return RunInspect(*args); };
  return subcommand;
}

Subcommand AddUnlockCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand(
      "unlock",
      "Force a lock free: remove its grant (only the expected one when "
      "--expect-owner/--expect-fence say which), hand it to the first live "
      "waiter and publish a force event.");
  formatter.SetSynopsis(app,
                        "--force NAME [--expect-owner O] [--expect-fence F]");
  app->footer(ExitStatusFooter(
      "The holder is told through Redis, never by the event alone: it stops "
      "at its next renewal, or at once when the force event reaches it. "
      "Retry-safe: a retry after a lost reply never removes the next "
      "holder's grant.",
      "done",
      "nothing removed: the lock was not held, or held by another grant "
      "than the expected one"));
  auto args = std::make_shared<UnlockArgs>();
  AddConnectionOptions(*app, args->connection, /*kafka=*/true);
  app->add_flag("--force", args->force, "Required: yes, remove the grant");
  app->add_option("--expect-owner", args->expect_owner,
                  "Remove the grant only if this owner holds it")
      ->type_name("O");
  app->add_option("--expect-fence", args->expect_fence,
                  "Remove the grant only if it has this fencing token")
      ->type_name("F");
  app->add_option("NAME", args->name, "The lock")->required()->type_name("");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) { return RunUnlock(*args); };
  return subcommand;
}

}  // namespace lockfleet::cli
