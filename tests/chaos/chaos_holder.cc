// lockfleet_chaos_holder: one lock holder in its own process, for the
// holder chaos tests (tests/chaos/holder_chaos_test.cc) to kill or freeze.
//
//   lockfleet_chaos_holder --redis URL --name NAME [--kafka BOOTSTRAP]
//       [--lease MS] [--wait MS] [--park-cap MS] [--resource R]
//       [--go FILE | --hold MS] [--log FILE] [--rw read|write]
//
// It uses the real library the way a service does: one RedisClient, one
// LockClient with the watchdog on (lease --lease), a KafkaNotifier for
// unlock events with --kafka. It acquires NAME (waiting up to --wait), then
// writes through FencedResource R (default NAME) with its fencing token,
// holds (until FILE exists, or MS), writes again, releases and exits 0.
// Each write appends "<fence>:<pid>" to the list R.writes and increments the
// counter R.count, so the test can check the resource afterwards without
// trusting the lock's own bookkeeping. With --log it appends one interval
// "pid fence start_ns end_ns" to FILE just before releasing (still under the
// hold). Times are CLOCK_MONOTONIC (std::chrono::steady_clock) nanoseconds,
// which all processes of one host share. With --rw it takes the read-write
// lock NAME in that mode instead (rwlock.h): a writer writes as above with
// its token; a reader does not write; the interval line gets a fifth field,
// "r" or "w" (and "fence" is the hold's token).
//
// stdout, one line per event, "EVENT key=value ...":
//   held fence=F owner=O t_ns=T wait_ms=W
//   write n=1|2 result=accepted|rejected fence=F highest=H lost=0|1 t_ns=T
//   on_lost fence=F t_ns=T                    (from the watchdog thread)
//   done on_lost_called=0|1 release=released|not_owner|not_held|error
//   timeout holder=O                          (exit 75: not acquired)
// Exit 0 after "done", 75 if not acquired, 2 for bad arguments, 1 on error.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

std::mutex print_mu;

// One whole line at a time: the watchdog thread prints too.
void Print(const std::string& line) {
  std::lock_guard lock(print_mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Steady::now().time_since_epoch())
      .count();
}

struct Args {
  std::string redis;
  std::string name;
  std::string kafka;
  std::string resource;
  std::string go;
  std::string log;
  milliseconds lease{2000};
  milliseconds wait{30000};
  milliseconds park_cap{1000};
  milliseconds hold{0};
  std::string rw;  // "", "read" or "write"
};

// Returns false (after printing why) on a bad command line.
bool ParseArgs(int argc, char** argv, Args* args) {
  std::map<std::string, std::string*> strings{
      {"--redis", &args->redis}, {"--name", &args->name},
      {"--kafka", &args->kafka}, {"--resource", &args->resource},
      {"--go", &args->go},       {"--log", &args->log},
      {"--rw", &args->rw}};
  std::map<std::string, milliseconds*> durations{
      {"--lease", &args->lease},
      {"--wait", &args->wait},
      {"--park-cap", &args->park_cap},
      {"--hold", &args->hold}};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "chaos_holder: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[i + 1];
    if (auto s = strings.find(flag); s != strings.end()) {
      *s->second = value;
    } else if (auto d = durations.find(flag); d != durations.end()) {
      *d->second = milliseconds(std::stoll(value));
    } else {
      std::fprintf(stderr, "chaos_holder: unknown option %s\n", flag.c_str());
      return false;
    }
  }
  if (args->redis.empty() || args->name.empty()) {
    std::fprintf(stderr, "chaos_holder: --redis and --name are required\n");
    return false;
  }
  if (args->resource.empty()) args->resource = args->name;
  if (!args->rw.empty() && args->rw != "read" && args->rw != "write") {
    std::fprintf(stderr, "chaos_holder: --rw must be read or write\n");
    return false;
  }
  return true;
}

// Set by the on_lost callback (watchdog thread), awaited by main.
class LostFlag {
 public:
  void Set() {
    {
      std::lock_guard lock(mu_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool WaitFor(milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return set_; });
  }
  bool is_set() {
    std::lock_guard lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Writes through the fenced resource and reports it; returns accepted.
// `held`: a Lease or an RwLease.
template <typename Held>
bool FencedWrite(lockfleet::FencedResource& resource, const Held& held,
                 int64_t fence, int n) {
  const bool lost = held.lost();  // what the holder knew before writing
  const std::string record =
      std::to_string(fence) + ":" + std::to_string(::getpid());
  const lockfleet::FenceResult result =
      resource.Write(fence, {{"INCR", resource.Key("count")},
                             {"RPUSH", resource.Key("writes"), record},
                             {"SET", resource.Key("last"), record}});
  Print("write n=" + std::to_string(n) +
        " result=" + (result.accepted ? "accepted" : "rejected") +
        " fence=" + std::to_string(fence) +
        " highest=" + std::to_string(result.highest_fence) +
        " lost=" + (lost ? "1" : "0") + " t_ns=" + std::to_string(NowNs()));
  return result.accepted;
}

void Hold(const Args& args) {
  if (!args.go.empty()) {
    while (!std::filesystem::exists(args.go)) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  } else {
    std::this_thread::sleep_for(args.hold);
  }
}

std::string OwnerOf(const lockfleet::Lease& lease) { return lease.owner(); }
std::string OwnerOf(const lockfleet::RwLease& lease) { return lease.id(); }

template <typename Held>
int HoldAndRelease(const Args& args,
                   const std::shared_ptr<lockfleet::RedisClient>& redis,
                   Held held, int64_t fence, Steady::time_point start,
                   LostFlag& lost_flag, const std::string& mode);

int Run(const Args& args) {
  // Outlives the LockClient, whose watchdog thread runs the callback.
  LostFlag lost_flag;
  auto redis = std::make_shared<lockfleet::RedisClient>(
      lockfleet::RedisOptions{.url = args.redis});
  std::shared_ptr<lockfleet::notifier::KafkaNotifier> kafka;
  lockfleet::LockClientOptions options{.default_lease = args.lease,
                                       .park_cap = args.park_cap};
  if (!args.kafka.empty()) {
    kafka = std::make_shared<lockfleet::notifier::KafkaNotifier>(
        lockfleet::notifier::KafkaOptions{.bootstrap = args.kafka});
    options.publisher = kafka;
  }
  lockfleet::LockClient locks(redis, options);
  if (kafka) {
    kafka->Subscribe(&locks);
    // As `lockfleet lock` does before it parks: events published before the
    // consumer has its partitions would pass unseen.
    kafka->WaitUntilReady(milliseconds(10000));
  }
  // REQUIRED before `locks` goes (also on an exception).
  struct Unsubscribe {
    lockfleet::notifier::KafkaNotifier* kafka;
    lockfleet::LockClient* locks;
    ~Unsubscribe() {
      if (kafka != nullptr) kafka->Unsubscribe(locks);
    }
  } unsubscribe{kafka.get(), &locks};

  lockfleet::AcquireOptions acquire;
  acquire.on_lost = [&lost_flag](const std::string&, int64_t fence) {
    Print("on_lost fence=" + std::to_string(fence) +
          " t_ns=" + std::to_string(NowNs()));
    lost_flag.Set();
  };

  const Steady::time_point start = Steady::now();
  if (!args.rw.empty()) {
    lockfleet::RwOptions rw_options;
    rw_options.on_lost = acquire.on_lost;
    const lockfleet::RwMode mode = args.rw == "write"
                                       ? lockfleet::RwMode::kWrite
                                       : lockfleet::RwMode::kRead;
    lockfleet::RwResult result =
        locks.ReadWriteLock(args.name).AcquireFor(mode, args.wait, rw_options);
    if (!result) {
      Print("timeout holder=");
      return 75;
    }
    const int64_t token = result.lease.token();
    return HoldAndRelease(args, redis, std::move(result.lease), token, start,
                          lost_flag,
                          mode == lockfleet::RwMode::kWrite ? "w" : "r");
  }
  lockfleet::AcquireResult result =
      locks.AcquireFor(args.name, args.wait, acquire);
  if (!result) {
    Print("timeout holder=" + result.holder);
    return 75;
  }
  const int64_t fence = result.lease.fence();
  return HoldAndRelease(args, redis, std::move(result.lease), fence, start,
                        lost_flag, "");
}

// Reports the hold of `held` (a Lease, or an RwLease in `mode` "r" or "w"),
// writes (not a reader), holds, logs its interval and releases. Returns the
// exit status.
template <typename Held>
int HoldAndRelease(const Args& args,
                   const std::shared_ptr<lockfleet::RedisClient>& redis,
                   Held held, int64_t fence, Steady::time_point start,
                   LostFlag& lost_flag, const std::string& mode) {
  const int64_t held_ns = NowNs();
  Print("held fence=" + std::to_string(fence) + " owner=" + OwnerOf(held) +
        " t_ns=" + std::to_string(held_ns) + " wait_ms=" +
        std::to_string(
            std::chrono::duration_cast<milliseconds>(Steady::now() - start)
                .count()));

  lockfleet::FencedResource resource(redis, args.resource);
  const bool writes = mode != "r";
  bool accepted = !writes || FencedWrite(resource, held, fence, 1);
  Hold(args);
  accepted = (!writes || FencedWrite(resource, held, fence, 2)) && accepted;
  // A rejected write means a newer holder exists: the watchdog must say so
  // too. Give its thread a moment (the process may have just been resumed).
  if (!accepted || held.lost()) lost_flag.WaitFor(milliseconds(5000));

  if (!args.log.empty()) {
    std::ofstream(args.log, std::ios::app)
        << ::getpid() << " " << fence << " " << held_ns << " " << NowNs()
        << (mode.empty() ? "" : " " + mode) << "\n";
  }
  std::string release;
  try {
    release = lockfleet::ReleaseStatusName(held.Release());
  } catch (const lockfleet::Error& e) {
    release = "error";
    std::fprintf(stderr, "chaos_holder: release: %s\n", e.what());
  }
  Print(std::string("done on_lost_called=") + (lost_flag.is_set() ? "1" : "0") +
        " release=" + release);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    if (!ParseArgs(argc, argv, &args)) return 2;
    return Run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos_holder: %s\n", e.what());
    return 1;
  }
}
