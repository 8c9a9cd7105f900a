#include "bench_options.h"

#include <unistd.h>

#include <cstdlib>

#include "command.h"
#include "config_options.h"
#include "kafka_wakeups.h"
#include "lockfleet/config/redis_url.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"
#include "option_range.h"

namespace lockfleet::cli {

const char* BenchModeName(BenchMode mode) {
  switch (mode) {
    case BenchMode::kKafka:
      return "kafka";
    case BenchMode::kLocal:
      return "local";
    case BenchMode::kPoll:
      return "poll";
    case BenchMode::kFloor:
      return "floor";
  }
  return "?";
}

const char* PrimitiveName(Primitive primitive) {
  switch (primitive) {
    case Primitive::kLock:
      return "lock";
    case Primitive::kRwLock:
      return "rwlock";
    case Primitive::kSemaphore:
      return "semaphore";
    case Primitive::kMultiLock:
      return "multilock";
  }
  return "?";
}

namespace {

void CheckPrimitive(BenchArgs& args) {
  if (args.primitive_name == "lock") {
    args.primitive = Primitive::kLock;
  } else if (args.primitive_name == "rwlock") {
    args.primitive = Primitive::kRwLock;
  } else if (args.primitive_name == "semaphore") {
    args.primitive = Primitive::kSemaphore;
  } else if (args.primitive_name == "multilock") {
    args.primitive = Primitive::kMultiLock;
  } else {
    throw UsageError("--primitive " + Quoted(args.primitive_name) +
                     ": must be lock, rwlock, semaphore or multilock");
  }
  if (args.primitive != Primitive::kLock &&
      (args.mode == BenchMode::kPoll || args.mode == BenchMode::kFloor)) {
    throw UsageError("--primitive " + args.primitive_name +
                     " applies to --mode kafka and local only");
  }
  if (args.read_share_given && args.primitive != Primitive::kRwLock) {
    throw UsageError("--read-share applies to --primitive rwlock only");
  }
  if (args.permits_given && args.primitive != Primitive::kSemaphore) {
    throw UsageError("--permits applies to --primitive semaphore only");
  }
  if (args.names_given && args.primitive != Primitive::kMultiLock) {
    throw UsageError("--names applies to --primitive multilock only");
  }
  CheckRange("--read-share", args.read_share, 0, 100);
  CheckRange("--permits", args.permits, 1, 1'000'000);
  CheckRange("--names", args.names, 1, 256);
  if (args.primitive == Primitive::kMultiLock && args.locks != 1) {
    throw UsageError(
        "--locks does not apply to --primitive multilock (every acquisition "
        "takes all --names names)");
  }
}

}  // namespace

void CheckBenchArgs(BenchArgs& args) {
  if (args.mode_name == "kafka") {
    args.mode = BenchMode::kKafka;
  } else if (args.mode_name == "local") {
    args.mode = BenchMode::kLocal;
  } else if (args.mode_name == "poll") {
    args.mode = BenchMode::kPoll;
  } else if (args.mode_name == "floor") {
    args.mode = BenchMode::kFloor;
  } else {
    throw UsageError("--mode " + Quoted(args.mode_name) +
                     ": must be kafka, local, poll or floor");
  }
  const bool lock_mode =
      args.mode != BenchMode::kPoll && args.mode != BenchMode::kFloor;
  CheckPrimitive(args);
  CheckRange("--processes", args.processes, 1, 256);
  CheckRange("--threads", args.threads, 1, 256);
  CheckRange("--processes x --threads",
             static_cast<long long>(args.processes) * args.threads, 1, 4096);
  CheckRange("--locks", args.locks, 1, 1'000'000);
  CheckRange("--seconds", args.seconds, 1, 3600);
  CheckRange("--hold-ms", args.hold_ms, 0, 60'000);
  CheckRange("--think-ms", args.think_ms, 0, 60'000);
  if (args.poll_interval_given || args.mode == BenchMode::kPoll) {
    if (args.mode != BenchMode::kPoll) {
      throw UsageError("--poll-interval-ms applies to --mode poll only");
    }
    CheckRange("--poll-interval-ms", args.poll_interval_ms, 1, 60'000);
  }
  if (args.fair_flag && args.no_fair_flag) {
    throw UsageError("--fair and --no-fair exclude each other");
  }
  if (args.mode == BenchMode::kPoll && args.fair_flag) {
    throw UsageError(
        "--fair does not apply to --mode poll (polling never queues)");
  }
  if (args.mode == BenchMode::kFloor && (args.fair_flag || args.no_fair_flag)) {
    throw UsageError(
        "--fair and --no-fair do not apply to --mode floor (BLPOP serves "
        "blocked clients in arrival order)");
  }
  if (!lock_mode && args.park_cap_ms != 0) {
    throw UsageError("--park-cap-ms applies to --mode kafka and local only");
  }
  if (!lock_mode && args.spin_max_hold_ms >= 0) {
    throw UsageError(
        "--spin-max-hold-ms applies to --mode kafka and local only");
  }
  args.fair = lock_mode && (args.fair_flag ||
                            (!args.no_fair_flag && LockClientOptions{}.fair));
  CheckRange("--repeat", args.repeat, 1, 100);
  if (!args.config_path.empty()) {
    args.config = config::LoadFile(args.config_path);  // ConfigErrors
    if (args.redis.empty()) args.redis = args.config->redis.url;
    if (args.mode == BenchMode::kKafka && args.kafka.empty() &&
        args.config->kafka) {
      args.kafka = args.config->kafka->bootstrap;
    }
  }
  if (args.mode != BenchMode::kKafka) {
    if (!args.kafka.empty()) {
      throw UsageError("--kafka applies to --mode kafka only");
    }
    if (args.fetch_wait_ms != 0) {
      throw UsageError("--fetch-wait-ms applies to --mode kafka only");
    }
    if (!args.fan_out.empty() || args.partitions != 0 ||
        args.targeted_linger_ms != -1) {
      throw UsageError(
          "--fan-out, --targeted-linger-ms and --partitions apply to --mode "
          "kafka only");
    }
    if (args.event_latency != 0) {
      throw UsageError("--event-latency applies to --mode kafka only");
    }
    if (!EventKeyArgv(args.event_key).empty()) {
      throw UsageError(
          "--event-key-env and --event-key-file apply to --mode kafka only");
    }
  } else if (args.config && args.config->kafka &&
             EventKeyArgv(args.event_key).empty()) {
    args.event_keys = args.config->kafka->event_keys;  // the config's own
  } else {
    args.event_keys = ResolveEventKeys(args.event_key);
  }
  if (args.fetch_wait_ms != 0)
    CheckRange("--fetch-wait-ms", args.fetch_wait_ms, 1, 10'000);
  if (args.mode == BenchMode::kKafka) {
    if (args.fan_out.empty()) {
      args.fan_out =
          args.config && args.config->kafka &&
                  args.config->kafka->fan_out == config::FanOut::kTargeted
              ? "targeted"
              : "broadcast";
    } else if (args.fan_out != "broadcast" && args.fan_out != "targeted") {
      throw UsageError("--fan-out must be broadcast or targeted, not " +
                       Quoted(args.fan_out));
    }
    if (args.targeted_linger_ms != -1) {
      CheckRange("--targeted-linger-ms", args.targeted_linger_ms, 0, 3'600'000);
      if (args.fan_out != "targeted")
        throw UsageError("--targeted-linger-ms applies to --fan-out targeted");
    }
    if (args.partitions != 0) {
      CheckRange("--partitions", args.partitions, 1, 1024);
      if (!args.kafka.empty() && args.kafka != kKafkaLocal) {
        throw UsageError(
            "--partitions applies to a broker the run starts (the embedded "
            "one, or --kafka kafka-local), not to " +
            Quoted(args.kafka));
      }
    }
  }
  if (args.park_cap_ms != 0)
    CheckRange("--park-cap-ms", args.park_cap_ms, 1, 600'000);
  if (args.spin_max_hold_ms != -1)
    CheckRange("--spin-max-hold-ms", args.spin_max_hold_ms, 0, 60'000);
  CheckRange("--event-latency", args.event_latency, 0, 1'000'000);
  if (!args.redis.empty()) {
    try {
      ParseRedisUrl(args.redis);
    } catch (const Error& e) {
      throw UsageError("--redis " + Quoted(config::RedactRedisUrl(args.redis)) +
                       ": " + e.what());
    }
  }
  if (args.kafka == kKafkaLocal) {
    if (args.child()) throw UsageError("a contender needs a bootstrap");
  } else if (!args.kafka.empty()) {
    if (const std::string problem = CheckBootstrap(args.kafka);
        !problem.empty()) {
      throw UsageError("--kafka " + Quoted(args.kafka) + ": " + problem +
                       " (expected HOST:PORT[,HOST:PORT...] or " + kKafkaLocal +
                       ")");
    }
  }
}

std::vector<std::string> ContenderArgv(const BenchArgs& args,
                                       const std::string& self, int index,
                                       const std::string& run_dir,
                                       const std::string& redis,
                                       const std::string& kafka) {
  std::vector<std::string> argv{self,
                                "bench",
                                "--child-index",
                                std::to_string(index),
                                "--run-dir",
                                run_dir,
                                "--mode",
                                args.mode_name,
                                "--processes",
                                std::to_string(args.processes),
                                "--threads",
                                std::to_string(args.threads),
                                "--locks",
                                std::to_string(args.locks),
                                "--seconds",
                                std::to_string(args.seconds),
                                "--hold-ms",
                                std::to_string(args.hold_ms),
                                "--think-ms",
                                std::to_string(args.think_ms),
                                "--redis",
                                redis};
  if (args.mode == BenchMode::kKafka)
    argv.insert(argv.end(), {"--kafka", kafka});
  if (args.primitive != Primitive::kLock) {
    argv.insert(argv.end(), {"--primitive", args.primitive_name});
  }
  if (args.primitive == Primitive::kRwLock) {
    argv.insert(argv.end(), {"--read-share", std::to_string(args.read_share)});
  } else if (args.primitive == Primitive::kSemaphore) {
    argv.insert(argv.end(), {"--permits", std::to_string(args.permits)});
  } else if (args.primitive == Primitive::kMultiLock) {
    argv.insert(argv.end(), {"--names", std::to_string(args.names)});
  }
  if (args.mode == BenchMode::kPoll) {
    argv.insert(argv.end(),
                {"--poll-interval-ms", std::to_string(args.poll_interval_ms)});
  } else if (args.mode != BenchMode::kFloor) {
    argv.push_back(args.fair ? "--fair" : "--no-fair");
  }
  if (args.fetch_wait_ms != 0) {
    argv.insert(argv.end(),
                {"--fetch-wait-ms", std::to_string(args.fetch_wait_ms)});
  }
  if (!args.fan_out.empty())
    argv.insert(argv.end(), {"--fan-out", args.fan_out});
  if (args.targeted_linger_ms != -1) {
    argv.insert(argv.end(), {"--targeted-linger-ms",
                             std::to_string(args.targeted_linger_ms)});
  }
  if (args.park_cap_ms != 0) {
    argv.insert(argv.end(),
                {"--park-cap-ms", std::to_string(args.park_cap_ms)});
  }
  if (args.spin_max_hold_ms >= 0) {
    argv.insert(argv.end(),
                {"--spin-max-hold-ms", std::to_string(args.spin_max_hold_ms)});
  }
  if (args.mode == BenchMode::kKafka) {
    const std::vector<std::string> event_key = EventKeyArgv(args.event_key);
    argv.insert(argv.end(), event_key.begin(), event_key.end());
  }
  if (!args.config_path.empty()) {
    argv.insert(argv.end(), {"--config", args.config_path});
  }
  return argv;
}

notifier::KafkaOptions BenchKafkaOptions(const BenchArgs& args,
                                         const std::string& bootstrap) {
  notifier::KafkaOptions options;
  if (args.config && args.config->kafka) {
    options = KafkaOptionsFrom(*args.config->kafka);
  }
  options.bootstrap = bootstrap;
  options.event_keys = args.event_keys;
  if (args.fetch_wait_ms > 0) {
    options.fetch_wait = std::chrono::milliseconds(args.fetch_wait_ms);
  }
  if (!args.fan_out.empty()) {
    options.fan_out = args.fan_out == "targeted" ? notifier::FanOut::kTargeted
                                                 : notifier::FanOut::kBroadcast;
  }
  if (args.targeted_linger_ms >= 0)
    options.targeted_linger =
        std::chrono::milliseconds(args.targeted_linger_ms);
  return options;
}

std::string BenchLockName(int index) {
  return "bench:" + std::to_string(index);
}

std::vector<std::string> MultiLockNames(int names) {
  std::vector<std::string> out;
  for (int i = 0; i < names; ++i)
    out.push_back("bench:multi:" + std::to_string(i));
  return out;
}

std::string FloorKey(int index) {
  return std::string(kBenchKeyPrefix) + ":floor:" + BenchLockName(index);
}

std::string KafkaLocalScript() {
  std::string path;
  if (const char* env = std::getenv("LOCKFLEET_KAFKA_LOCAL"); env && *env) {
    path = env;
  } else {
#ifdef LOCKFLEET_KAFKA_LOCAL_DEFAULT
    path = LOCKFLEET_KAFKA_LOCAL_DEFAULT;
#endif
  }
  return !path.empty() && ::access(path.c_str(), X_OK) == 0 ? path : "";
}

}  // namespace lockfleet::cli
