// notifier_bench: what Kafka-woken waiting costs, measured across processes.
//
//   lockfleet_notifier_bench [--processes P] [--seconds S] [--hold-ms H]
//                            [--think-ms T] [--fetch-wait-ms F] [--events N]
//
// Starts a private redis-server and the embedded broker, then P contender
// processes (this binary again, with --child). Each contender loops: wait for
// the lock (park cap 10 s, so a hand-off needs a wake-up, not a poll), hold it
// H ms, release, think T ms. Every critical section's acquire and release
// time (CLOCK_REALTIME, ns) is written to a file; the parent merges them and
// reports the hand-off gap (next acquire - previous release) for hand-offs
// between processes. Then it measures the broker's one-way event latency:
// one notifier publishes N events, another (own Kafka clients) receives them.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "support/redis_server.h"

extern char** environ;

namespace {

using namespace lockfleet;
using std::chrono::milliseconds;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Args {
  int processes = 2;
  int seconds = 5;
  int hold_ms = 1;
  int think_ms = 5;
  int fetch_wait_ms = 1;
  int events = 2000;
  bool fair = true;
  bool child = false;
  std::string redis, kafka, out;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--processes")
      a.processes = std::stoi(next());
    else if (k == "--seconds")
      a.seconds = std::stoi(next());
    else if (k == "--hold-ms")
      a.hold_ms = std::stoi(next());
    else if (k == "--think-ms")
      a.think_ms = std::stoi(next());
    else if (k == "--fetch-wait-ms")
      a.fetch_wait_ms = std::stoi(next());
    else if (k == "--events")
      a.events = std::stoi(next());
    else if (k == "--child")
      a.child = true;
    else if (k == "--fair")
      a.fair = true;
    else if (k == "--no-fair")
      a.fair = false;
    else if (k == "--redis")
      a.redis = next();
    else if (k == "--kafka")
      a.kafka = next();
    else if (k == "--out")
      a.out = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

notifier::KafkaOptions Kafka(const Args& a) {
  notifier::KafkaOptions k;
  k.bootstrap = a.kafka;
  k.fetch_wait = milliseconds(a.fetch_wait_ms);
  return k;
}

int Child(const Args& a) {
  auto kafka = std::make_shared<notifier::KafkaNotifier>(Kafka(a));
  RedisOptions ro;
  ro.url = a.redis;
  LockClient locks(
      std::make_shared<RedisClient>(ro),
      {.park_cap = milliseconds(10000), .fair = a.fair, .publisher = kafka});
  kafka->Subscribe(&locks);
  if (!kafka->WaitUntilReady(milliseconds(30000))) return 3;
  std::ofstream out(a.out);
  // Start together: the parent gives everyone the same start time.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(a.seconds);
  while (std::chrono::steady_clock::now() < end) {
    AcquireResult r = locks.AcquireFor("bench:hot", milliseconds(15000));
    if (!r) continue;
    int64_t acq = NowNs();
    std::this_thread::sleep_for(milliseconds(a.hold_ms));
    int64_t rel = NowNs();
    (void)r.lease.Release();
    out << acq << ' ' << rel << ' ' << (r.attempts > 1 ? 1 : 0) << '\n';
    std::this_thread::sleep_for(milliseconds(a.think_ms));
  }
  LockStats s = locks.stats();
  out << "# wakeups_event " << s.wakeups_event << " wakeups_bound "
      << s.wakeups_bound << " attempts " << s.attempts << " round_trips "
      << locks.redis().round_trips() << '\n';
  kafka->Unsubscribe(&locks);
  return 0;
}

// Commands the server executed so far, scripts' inner calls included.
uint64_t CommandsExecuted(RedisClient& redis) {
  std::string info = redis.Execute({"INFO", "commandstats"}).str;
  uint64_t total = 0;
  for (size_t pos = info.find("calls="); pos != std::string::npos;
       pos = info.find("calls=", pos + 6)) {
    total += std::stoull(info.substr(pos + 6));
  }
  return total;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i =
      static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int Parent(const Args& a, const char* self) {
  testing::RedisServer redis;
  notifier::EmbeddedBroker broker;
  std::printf(
      "%s mode, %d processes x 1 thread, hold %d ms, think %d ms, fetch wait "
      "%d ms, %d s\n",
      a.fair ? "fair" : "barging", a.processes, a.hold_ms, a.think_ms,
      a.fetch_wait_ms, a.seconds);
  RedisOptions ro;
  ro.url = redis.url();
  RedisClient stats_redis(ro);
  const uint64_t calls_before = CommandsExecuted(stats_redis);
  std::vector<pid_t> pids;
  std::vector<std::string> files;
  for (int p = 0; p < a.processes; ++p) {
    files.push_back("/tmp/lockfleet-bench-" + std::to_string(::getpid()) + "-" +
                    std::to_string(p));
    std::vector<std::string> args{self,
                                  a.fair ? "--fair" : "--no-fair",
                                  "--child",
                                  "--redis",
                                  redis.url(),
                                  "--kafka",
                                  broker.bootstrap(),
                                  "--out",
                                  files.back(),
                                  "--seconds",
                                  std::to_string(a.seconds),
                                  "--hold-ms",
                                  std::to_string(a.hold_ms),
                                  "--think-ms",
                                  std::to_string(a.think_ms),
                                  "--fetch-wait-ms",
                                  std::to_string(a.fetch_wait_ms)};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid;
    if (posix_spawn(&pid, self, nullptr, nullptr, argv.data(), environ) != 0)
      return 1;
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "contender %d failed\n", pid);
      return 1;
    }
  }
  struct Section {
    int64_t acq, rel;
    int waited;  // the acquirer had failed once and parked
    int proc;
  };
  std::vector<Section> all;
  uint64_t ev = 0, bound = 0, attempts = 0, trips = 0;
  for (int p = 0; p < a.processes; ++p) {
    std::ifstream in(files[p]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("#", 0) == 0) {
        uint64_t e, b, at, rt;
        std::sscanf(line.c_str(),
                    "# wakeups_event %lu wakeups_bound %lu attempts %lu "
                    "round_trips %lu",
                    &e, &b, &at, &rt);
        ev += e, bound += b, attempts += at, trips += rt;
        continue;
      }
      Section s{};
      std::sscanf(line.c_str(), "%ld %ld %d", &s.acq, &s.rel, &s.waited);
      s.proc = p;
      all.push_back(s);
    }
    std::remove(files[p].c_str());
  }
  const uint64_t commands = CommandsExecuted(stats_redis) - calls_before;
  std::sort(all.begin(), all.end(),
            [](auto& x, auto& y) { return x.acq < y.acq; });
  std::vector<double> per_process(a.processes, 0);
  for (const Section& s : all) per_process[s.proc] += 1;
  double sum = 0, squares = 0;
  for (double n : per_process) {
    sum += n;
    squares += n * n;
  }
  int back_to_releaser = 0;
  for (size_t i = 1; i < all.size(); ++i)
    back_to_releaser += all[i].proc == all[i - 1].proc;
  std::vector<double> cross_us;
  int violations = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i].acq < all[i - 1].rel) ++violations;
    // Only a hand-off to a parked waiter measures the wake-up path.
    if (all[i].proc != all[i - 1].proc && all[i].waited) {
      cross_us.push_back((all[i].acq - all[i - 1].rel) / 1000.0);
    }
  }
  std::printf(
      "acquisitions %zu, violations %d, cross-process hand-offs to a parked "
      "waiter %zu\n",
      all.size(), violations, cross_us.size());
  std::printf(
      "cross-process hand-off gap (us): p50 %.0f  p90 %.0f  p99 %.0f  max "
      "%.0f\n",
      Percentile(cross_us, 50), Percentile(cross_us, 90),
      Percentile(cross_us, 99), Percentile(cross_us, 100));
  std::printf(
      "wake-ups: event %lu, bound %lu; acquire attempts per acquisition %.2f; "
      "Redis "
      "round trips per acquisition %.2f; Redis commands executed per "
      "acquisition %.2f\n",
      ev, bound, all.empty() ? 0.0 : double(attempts) / all.size(),
      all.empty() ? 0.0 : double(trips) / all.size(),
      all.empty() ? 0.0 : double(commands) / all.size());
  std::printf(
      "fairness: Jain %.3f over %d processes; hand-offs back to the releaser "
      "%.1f%% "
      "(2/P = %.1f%%)\n",
      squares > 0 ? sum * sum / (a.processes * squares) : 0.0, a.processes,
      all.size() > 1 ? 100.0 * back_to_releaser / (all.size() - 1) : 0.0,
      200.0 / a.processes);

  // One-way event latency: publisher and receiver with their own clients.
  notifier::KafkaOptions k = Kafka(a);
  k.bootstrap = broker.bootstrap();
  notifier::KafkaNotifier pub(k), sub(k);
  if (!pub.WaitUntilReady(milliseconds(30000)) ||
      !sub.WaitUntilReady(milliseconds(30000))) {
    return 1;
  }
  std::mutex mu;
  std::vector<double> one_way_us;
  sub.SetOnEventForTesting([&](const UnlockEvent& e) {
    if (e.lock != "bench:oneway") return;
    std::lock_guard lock(mu);
    one_way_us.push_back((NowNs() - e.released_at_ns) / 1000.0);
  });
  for (int i = 0; i < a.events; ++i) {
    UnlockEvent e;
    e.lock = "bench:oneway";
    e.client_id = "bench";
    e.released_at_ns = NowNs();
    pub.Publish(e);
    std::this_thread::sleep_for(milliseconds(2));
  }
  std::this_thread::sleep_for(milliseconds(500));
  std::lock_guard lock(mu);
  std::printf(
      "one-way event latency (us), %zu of %d events: p50 %.0f  p90 %.0f  p99 "
      "%.0f  max "
      "%.0f\n",
      one_way_us.size(), a.events, Percentile(one_way_us, 50),
      Percentile(one_way_us, 90), Percentile(one_way_us, 99),
      Percentile(one_way_us, 100));
  return violations == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  return a.child ? Child(a) : Parent(a, argv[0]);
}
