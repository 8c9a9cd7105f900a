#include "bench_run.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_records.h"
#include "bench_report.h"
#include "child_process.h"
#include "command.h"
#include "config_options.h"
#include "demo_support.h"
#include "kafka_wakeups.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "private_redis.h"
#include "supervised_process.h"

namespace lockfleet::cli {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// The sum of the numeric `fields` of `INFO section` over every master (one
// outside a cluster). Throws std::exception when a field is absent.
double InfoSum(RedisClient& redis, const std::string& section,
               std::initializer_list<std::string_view> fields) {
  double total = 0;
  for (const RedisNode& master : redis.Masters()) {
    const Reply info = redis.ExecuteOn(master, {"INFO", section});
    for (std::string_view field : fields) {
      const std::string prefix = std::string(field) + ":";
      const size_t at = info.str.find(prefix);
      if (at == std::string::npos) {
        throw std::runtime_error("no " + std::string(field) + " in INFO");
      }
      total += std::stod(info.str.substr(at + prefix.size()));
    }
  }
  return total;
}

// The host's CPU time so far from /proc/stat, in clock ticks: busy (user,
// nice, system, irq, softirq, steal) and in all (busy + idle + iowait).
struct HostCpu {
  unsigned long long busy = 0;
  unsigned long long total = 0;
};
std::optional<HostCpu> ReadHostCpu() {
  const std::optional<std::string> stat = ReadWholeFile("/proc/stat");
  if (!stat || stat->rfind("cpu ", 0) != 0) return std::nullopt;
  unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
  if (std::sscanf(stat->c_str() + 4, "%llu %llu %llu %llu %llu %llu %llu %llu",
                  &user, &nice, &system, &idle, &iowait, &irq, &softirq,
                  &steal) != 8) {
    return std::nullopt;
  }
  HostCpu cpu;
  cpu.busy = user + nice + system + irq + softirq + steal;
  cpu.total = cpu.busy + idle + iowait;
  return cpu;
}

// Each read is best effort: a Redis gone at the end leaves a field null.
std::optional<long long> ConnectedClients(RedisClient& redis) {
  try {
    return static_cast<long long>(
        InfoSum(redis, "clients", {"connected_clients"}));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> CpuSeconds(RedisClient& redis) {
  try {
    return InfoSum(redis, "cpu", {"used_cpu_user", "used_cpu_sys"});
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<long long> Commands(RedisClient& redis) {
  try {
    return TotalCommands(redis);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One notifier publishes `events` events 2 ms apart, another (own Kafka
// clients) receives them: receive time - released_at_ns.
Percentiles MeasureEventLatency(const std::string& bootstrap, int fetch_wait_ms,
                                int events,
                                const std::vector<std::string>& event_keys) {
  notifier::KafkaOptions options{
      .bootstrap = bootstrap,
      .event_keys = event_keys,
      .log = [](notifier::LogLevel, std::string_view) {}};
  if (fetch_wait_ms > 0) options.fetch_wait = milliseconds(fetch_wait_ms);
  notifier::KafkaNotifier publisher(options), subscriber(options);
  if (!publisher.WaitUntilReady(seconds(30)) ||
      !subscriber.WaitUntilReady(seconds(30))) {
    return {};
  }
  std::mutex mu;
  std::vector<double> one_way_us;
  subscriber.SetOnEventForTesting([&](const UnlockEvent& event) {
    if (event.lock != "bench:one-way") return;
    const double us =
        static_cast<double>(WallClockNs() - event.released_at_ns) / 1e3;
    std::lock_guard lock(mu);
    one_way_us.push_back(us);
  });
  for (int i = 0; i < events; ++i) {
    UnlockEvent event;
    event.lock = "bench:one-way";
    event.client_id = "bench-probe";
    event.released_at_ns = WallClockNs();
    publisher.Publish(event);
    std::this_thread::sleep_for(milliseconds(2));
  }
  std::this_thread::sleep_for(milliseconds(500));
  subscriber.SetOnEventForTesting(nullptr);
  std::lock_guard lock(mu);
  return Summarize(one_way_us);
}

// A private real Apache Kafka broker (--kafka kafka-local), started with the
// kafka-local script in a directory of its own and stopped (its JVMs with
// it) by the destructor.
class KafkaLocalBroker {
 public:
  KafkaLocalBroker() = default;
  ~KafkaLocalBroker() { Stop(); }
  KafkaLocalBroker(const KafkaLocalBroker&) = delete;
  KafkaLocalBroker& operator=(const KafkaLocalBroker&) = delete;

  // Starts it; "" on success, else what went wrong.
  // `partitions`: the unlock topic's.
  std::string Start(int partitions) {
    const std::string script = KafkaLocalScript();
    if (script.empty()) {
      return "kafka-local not found (set LOCKFLEET_KAFKA_LOCAL to the "
             "kafka-local script of ../shared/kafka)";
    }
    if (script.find('\'') != std::string::npos) {
      return "kafka-local path " + Quoted(script) + " holds a quote";
    }
    if (std::system("command -v java >/dev/null 2>&1") != 0) {
      return "kafka-local needs java on PATH (Debian: apt install "
             "openjdk-17-jre-headless)";
    }
    char pattern[] = "/tmp/lockfleet-bench-kafka-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      return std::string("mkdtemp: ") + std::strerror(errno);
    }
    dir_ = pattern;
    stop_ = "'" + script + "' stop --data '" + (dir_ / "data").string() + "'";
    const std::string start = "'" + script + "' start --data '" +
                              (dir_ / "data").string() + "' >'" +
                              (dir_ / "start.out").string() + "' 2>&1";
    if (std::system(start.c_str()) != 0) {
      return "kafka-local start failed:\n" + Tail(dir_ / "start.out");
    }
    std::optional<std::string> line =
        ReadWholeFile((dir_ / "data" / "run" / "bootstrap").string());
    if (line && line->rfind("bootstrap: ", 0) == 0) line->erase(0, 11);
    while (line && !line->empty() &&
           std::isspace(static_cast<unsigned char>(line->back()))) {
      line->pop_back();
    }
    if (!line || line->empty()) {
      return "kafka-local started but wrote no bootstrap:\n" +
             Tail(dir_ / "start.out");
    }
    bootstrap_ = *line;
    // The unlock topic, as an operator creates it before the first process
    // starts (deploy/README.md: 3 partitions); lockfleet never has a broker
    // auto-create it.
    std::error_code ec;  // the script may be a symlink to the kit's copy
    const fs::path kit = fs::canonical(script, ec).parent_path();
    const std::string topics = (kit / "bin" / "kafka-topics.sh").string();
    const std::optional<std::string> zookeeper = ReadWholeFile(
        (dir_ / "data" / "conf" / "zookeeper.properties").string());
    std::string zk_port;
    if (zookeeper) {
      const size_t at = zookeeper->find("clientPort=");
      if (at != std::string::npos) {
        zk_port =
            zookeeper->substr(at + 11, zookeeper->find('\n', at) - at - 11);
      }
    }
    if (zk_port.empty() ||
        zk_port.find_first_not_of("0123456789") != std::string::npos) {
      return "kafka-local started but its ZooKeeper port is unknown";
    }
    const std::string create =
        "'" + topics + "' --zookeeper 127.0.0.1:" + zk_port +
        " --create --if-not-exists --topic lockfleet.unlock --partitions " +
        std::to_string(partitions) + " --replication-factor 1 >'" +
        (dir_ / "topics.out").string() + "' 2>&1";
    if (std::system(create.c_str()) != 0) {
      return "cannot create lockfleet.unlock on kafka-local:\n" +
             Tail(dir_ / "topics.out");
    }
    return "";
  }

  const std::string& bootstrap() const { return bootstrap_; }

 private:
  void Stop() {
    if (dir_.empty()) return;
    if (!stop_.empty()) {
      [[maybe_unused]] const int status =
          std::system((stop_ + " >/dev/null 2>&1").c_str());
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    dir_.clear();
  }

  fs::path dir_;
  std::string stop_;
  std::string bootstrap_;
};

class Bench {
 public:
  // `kafka_label`: how the report names a given broker ("" for its
  // bootstrap).
  Bench(const BenchArgs& args, const std::atomic<bool>& interrupted,
        std::string kafka_label = "")
      : args_(args),
        interrupted_(interrupted),
        kafka_label_(std::move(kafka_label)) {}
  ~Bench();

  // Runs it. The exit status of a run that could not be made (see the
  // --help footer), else 0 with the report in report() (its violations and
  // failed contenders are the caller's to turn into a status: ExitStatus).
  int Run();
  const nlohmann::json& report() const { return report_; }

 private:
  int StartRedis();
  int StartKafka();
  int SeedTokens();
  void DropTokens();
  int StartContenders();
  void WaitForContenders(int64_t end_ns);
  void Collect();
  int Fail(int status, const std::string& message);
  // ", signed events" when unlock events carry an HMAC, for the report.
  std::string Signed() const {
    return args_.event_keys.empty() ? "" : ", signed events";
  }

  const BenchArgs& args_;
  const std::atomic<bool>& interrupted_;
  const std::string kafka_label_;
  nlohmann::json report_;
  fs::path dir_;
  std::unique_ptr<SupervisedProcess> redis_server_;
  std::string redis_url_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<notifier::EmbeddedBroker> broker_;
  std::string bootstrap_;
  std::vector<std::unique_ptr<SupervisedProcess>> contenders_;
  RunResult result_;
  std::vector<Section> sections_;
};

Bench::~Bench() {
  contenders_.clear();  // SIGTERM, then SIGKILL, each
  redis_.reset();
  if (redis_server_) redis_server_->Stop(seconds(5));
  broker_.reset();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

int Bench::Fail(int status, const std::string& message) {
  PrintError(message);
  return status;
}

int Bench::StartRedis() {
  if (!args_.redis.empty()) {
    redis_url_ = args_.redis;
    result_.redis = ParseRedisUrl(args_.redis).Redacted();
  } else {
    const std::string server = FindOnPath("redis-server");
    if (server.empty()) {
      return Fail(kExitUnavailable,
                  "redis-server not found on PATH (Debian: apt install "
                  "redis-server; or set LOCKFLEET_REDIS_SERVER, or pass "
                  "--redis URL)");
    }
    redis_server_ = StartPrivateRedis(server, dir_);
    redis_url_ = "unix://" + PrivateRedisSocket(dir_);
    result_.redis = "private redis-server (" + redis_url_ + ")";
  }
  // The config's Redis settings (TLS included) for a given server, as the
  // contenders use them.
  RedisOptions redis_options = args_.config && !redis_server_
                                   ? RedisOptionsFrom(args_.config->redis)
                                   : RedisOptions{};
  redis_options.url = redis_url_;
  redis_options.pool_size = 1;
  redis_ = std::make_shared<RedisClient>(redis_options);
  // A private server gets time to start; a given one must answer now.
  if (std::string error;
      !WaitForRedis(*redis_, redis_server_.get(),
                    redis_server_ ? seconds(20) : seconds(0), &error)) {
    return Fail(kExitUnavailable,
                "redis " + Quoted(ParseRedisUrl(redis_url_).Redacted()) +
                    " unreachable: " + error +
                    (redis_server_ ? "\n" + Tail(dir_ / "redis.log") : ""));
  }
  return kExitOk;
}

int Bench::StartKafka() {
  if (args_.mode != BenchMode::kKafka) return kExitOk;
  if (args_.kafka.empty()) {
    notifier::EmbeddedBrokerOptions broker_options;
    if (args_.partitions > 0) broker_options.partitions = args_.partitions;
    broker_ = std::make_unique<notifier::EmbeddedBroker>(broker_options);
    bootstrap_ = broker_->bootstrap();
    result_.kafka = "embedded broker (" + bootstrap_ + ")" + Signed();
    return kExitOk;
  }
  bootstrap_ = args_.kafka;
  result_.kafka = (kafka_label_.empty() ? bootstrap_ : kafka_label_) + Signed();
  // Fail fast, before P processes each wait for it.
  notifier::KafkaOptions options = BenchKafkaOptions(args_, bootstrap_);
  options.log = [](notifier::LogLevel, std::string_view) {};
  auto probe = std::make_shared<notifier::KafkaNotifier>(std::move(options));
  const bool ready = probe->WaitUntilReady(seconds(15));
  ShutDownKafka(std::move(probe), seconds(5));
  if (!ready) {
    return Fail(kExitUnavailable,
                "kafka " + Quoted(bootstrap_) +
                    " unreachable: no partitions of lockfleet.unlock "
                    "assigned within 15 s");
  }
  return kExitOk;
}

// --mode floor: `make(i)`'s commands for every lock name i, pipelined 1,000
// names a round trip; the first error reply (if any) in *error.
void FloorPipeline(RedisClient& redis, int locks,
                   const std::function<std::vector<Command>(int)>& make,
                   std::string* error) {
  for (int from = 0; from < locks; from += 1000) {
    std::vector<Command> batch;
    for (int i = from; i < std::min(locks, from + 1000); ++i) {
      for (Command& command : make(i)) batch.push_back(std::move(command));
    }
    for (const Reply& reply : redis.Pipeline(batch)) {
      if (reply.type == Reply::Type::kError && error && error->empty()) {
        *error = reply.str;
      }
    }
  }
}

// --mode floor: one token per lock name, in a list of its own.
int Bench::SeedTokens() {
  if (args_.mode != BenchMode::kFloor) return kExitOk;
  std::string refused;
  try {
    FloorPipeline(
        *redis_, args_.locks,
        [](int i) {
          return std::vector<Command>{{"DEL", FloorKey(i)},
                                      {"RPUSH", FloorKey(i), "token"}};
        },
        &refused);
  } catch (const Error& e) {
    return Fail(
        kExitUnavailable,
        std::string("redis: cannot seed the floor's token lists: ") + e.what());
  }
  if (!refused.empty()) {
    return Fail(kExitUnavailable,
                "redis refused the floor's token lists: " + refused);
  }
  return kExitOk;
}

// Best effort: a shared Redis keeps no token lists after the run.
void Bench::DropTokens() {
  if (args_.mode != BenchMode::kFloor) return;
  try {
    FloorPipeline(
        *redis_, args_.locks,
        [](int i) {
          return std::vector<Command>{{"DEL", FloorKey(i)}};
        },
        nullptr);
  } catch (const Error&) {
  }
}

int Bench::StartContenders() {
  const std::string self = SelfExe();
  for (int i = 0; i < args_.processes; ++i) {
    contenders_.push_back(std::make_unique<SupervisedProcess>(
        ContenderArgv(args_, self, i, dir_.string(), redis_url_, bootstrap_),
        (dir_ / ("p" + std::to_string(i) + ".log")).string(), true));
  }
  // Setup (connections, Kafka partitions) is excluded from the timed run:
  // every contender says "ready" first.
  const auto deadline = steady_clock::now() + seconds(120);
  for (int i = 0; i < args_.processes; ++i) {
    std::optional<std::string> line;
    while (!line && !interrupted_ && steady_clock::now() < deadline) {
      line = contenders_[i]->ReadLine(milliseconds(200));
      if (!line && contenders_[i]->WaitFor(milliseconds(0))) break;
    }
    if (interrupted_) return kExitSignalBase + SIGINT;
    if (line != "ready") {
      const std::optional<int> status =
          contenders_[i]->WaitFor(milliseconds(0));
      const std::string log = dir_ / ("p" + std::to_string(i) + ".log");
      return Fail(kExitUnavailable,
                  "contender " + std::to_string(i) + " did not start (" +
                      (status ? DescribeWaitStatus(*status)
                              : std::string("no 'ready' within 120 s")) +
                      "):\n" + Tail(log));
    }
  }
  return kExitOk;
}

void Bench::WaitForContenders(int64_t end_ns) {
  // Generous: a contender finishes its last section and shuts its Kafka
  // clients down (bounded at 5 s) after the end.
  const auto deadline =
      steady_clock::now() +
      std::chrono::nanoseconds(std::max<int64_t>(0, end_ns - WallClockNs())) +
      seconds(60);
  for (auto& contender : contenders_) {
    while (!interrupted_ && steady_clock::now() < deadline &&
           !contender->WaitFor(milliseconds(50))) {
    }
  }
}

void Bench::Collect() {
  for (int i = 0; i < args_.processes; ++i) {
    ProcessResult process{.index = i, .pid = contenders_[i]->pid()};
    process.wait_status = contenders_[i]->WaitFor(milliseconds(0));
    if (!process.wait_status) contenders_[i]->Stop(seconds(2));
    if (const std::optional<std::string> text =
            ReadWholeFile(ReportPath(dir_.string(), i))) {
      try {
        process.report = ContenderReportFromJson(nlohmann::json::parse(*text));
      } catch (const std::exception&) {
        // Left empty: reported as a failed contender.
      }
    }
    if (!process.ok()) {
      PrintError("contender " + std::to_string(i) + " failed (" +
                 (process.wait_status ? DescribeWaitStatus(*process.wait_status)
                                      : std::string("killed")) +
                 "):\n" + Tail(dir_ / ("p" + std::to_string(i) + ".log")));
    }
    for (int t = 0; t < args_.threads; ++t) {
      std::vector<Section> records =
          ReadRecords(RecordPath(dir_.string(), i, t), i, t);
      sections_.insert(sections_.end(), records.begin(), records.end());
    }
    result_.processes.push_back(std::move(process));
  }
}

int Bench::Run() {
  char pattern[] = "/tmp/lockfleet-bench-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    return Fail(kExitSoftware, std::string("mkdtemp: ") + std::strerror(errno));
  }
  dir_ = pattern;
  result_.args = &args_;
  if (int status = StartRedis(); status != kExitOk) return status;
  if (int status = StartKafka(); status != kExitOk) return status;
  if (int status = SeedTokens(); status != kExitOk) return status;
  result_.clients_before = ConnectedClients(*redis_);
  if (int status = StartContenders(); status != kExitOk) return status;

  result_.clients_during = ConnectedClients(*redis_);
  const std::optional<long long> commands_before = Commands(*redis_);
  const std::optional<double> cpu_before = CpuSeconds(*redis_);
  std::optional<HostCpu> host_before;
  // Long enough for every contender to see the file (they look every 2 ms).
  const int64_t start_ns = WallClockNs() + 300'000'000;
  const int64_t end_ns = start_ns + int64_t{args_.seconds} * 1'000'000'000;
  if (!WriteFileAtomically(
          GoPath(dir_.string()),
          std::to_string(start_ns) + " " + std::to_string(end_ns))) {
    return Fail(kExitSoftware, "cannot write " + GoPath(dir_.string()));
  }
  while (WallClockNs() < start_ns && !interrupted_) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  host_before = ReadHostCpu();
  while (WallClockNs() < end_ns && !interrupted_) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  const std::optional<HostCpu> host_after = ReadHostCpu();
  if (host_before && host_after && host_after->total > host_before->total) {
    result_.host_cpu_percent =
        100.0 * static_cast<double>(host_after->busy - host_before->busy) /
        static_cast<double>(host_after->total - host_before->total);
  }
  // At the window's end, as the contenders count their round trips: the
  // last attempts of waiters the run's end leaves parked are no
  // acquisition's cost.
  const std::optional<double> cpu_after = CpuSeconds(*redis_);
  const std::optional<long long> commands_after = Commands(*redis_);
  WaitForContenders(end_ns);
  if (interrupted_) return kExitSignalBase + SIGINT;
  Collect();
  DropTokens();

  // The server notices closed connections asynchronously.
  for (auto deadline = steady_clock::now() + seconds(5);;) {
    result_.clients_after = ConnectedClients(*redis_);
    if (!result_.clients_before || !result_.clients_after ||
        *result_.clients_after <= *result_.clients_before ||
        steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  result_.seconds = args_.seconds;
  if (commands_before && commands_after) {
    result_.redis_commands = *commands_after - *commands_before;
  }
  if (cpu_before && cpu_after)
    result_.redis_cpu_seconds = *cpu_after - *cpu_before;
  if (args_.primitive == Primitive::kLock) {
    result_.analysis =
        Analyze(std::move(sections_), args_.processes, args_.threads);
  } else {
    result_.shared = AnalyzeShared(sections_, args_.processes, args_.threads,
                                   args_.primitive, args_.permits);
    result_.analysis =
        args_.primitive == Primitive::kMultiLock
            ? Analyze(std::move(sections_), args_.processes, args_.threads)
            : result_.shared->base;
  }
  if (args_.event_latency > 0) {
    result_.event_latency_us = MeasureEventLatency(
        bootstrap_, args_.fetch_wait_ms, args_.event_latency, args_.event_keys);
    result_.event_latency_sent = static_cast<uint64_t>(args_.event_latency);
  }

  report_ = ToJson(result_);
  return kExitOk;  // the caller prints the report, then ExitStatus(report())
}

}  // namespace

int ExitStatus(const nlohmann::json& report) {
  if (const uint64_t violations = report.at("violations").get<uint64_t>();
      violations > 0) {
    PrintError(std::to_string(violations) +
               " violations: overlapping critical sections on one lock");
    return 1;
  }
  return report.at("failed_processes").get<int>() > 0 ? kExitContenderFailed
                                                      : kExitOk;
}

int RunBench(const BenchArgs& given, const std::atomic<bool>& interrupted) {
  BenchArgs args = given;
  std::string kafka_label;
  std::unique_ptr<KafkaLocalBroker> kafka_local;
  if (args.mode == BenchMode::kKafka && args.kafka == kKafkaLocal) {
    kafka_local = std::make_unique<KafkaLocalBroker>();
    if (const std::string error =
            kafka_local->Start(args.partitions > 0 ? args.partitions : 3);
        !error.empty()) {
      PrintError("--kafka kafka-local: " + error);
      return kExitUnavailable;
    }
    args.kafka = kafka_local->bootstrap();
    kafka_label = "real broker, kafka-local (" + args.kafka + ")";
  }
  if (args.repeat == 1) {
    Bench bench(args, interrupted, kafka_label);
    const int status = bench.Run();
    if (bench.report().is_null()) return status;
    if (args.json) {
      std::cout << bench.report().dump() << std::endl;
    } else {
      PrintTable(bench.report(), std::cout);
    }
    return ExitStatus(bench.report());
  }
  std::vector<nlohmann::json> runs;
  for (int i = 0; i < args.repeat; ++i) {
    Bench bench(args, interrupted, kafka_label);
    const int status = bench.Run();
    if (bench.report().is_null()) return status;  // did not get to run
    runs.push_back(bench.report());
    if (!args.json) {
      const nlohmann::json& r = runs.back();
      std::cerr << "lockfleet bench: run " << (i + 1) << " of " << args.repeat
                << ": " << r.at("acquisitions").get<uint64_t>()
                << " acquisitions, " << r.at("violations").get<uint64_t>()
                << " violations" << std::endl;
    }
  }
  const nlohmann::json summary = SummarizeRuns(runs);
  if (args.json) {
    std::cout << summary.dump() << std::endl;
  } else {
    PrintSummary(summary, std::cout);
  }
  return ExitStatus(summary);
}

}  // namespace lockfleet::cli
