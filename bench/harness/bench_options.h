// The options of `lockfleet bench`, shared by the parent (which checks them
// and passes them on) and its contender processes (which run with them).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_analysis.h"
#include "event_key_options.h"
#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

enum class BenchMode {
  kKafka,  // the product: LockClient + one KafkaNotifier per process
  kLocal,  // no Kafka: same-process wake-ups and bounded parks only
  kPoll,   // baseline: TryAcquire every --poll-interval-ms, no waiting
  // Physical reference, not a lock: one token per lock name in a Redis list,
  // taken with BLPOP and given back with RPUSH (no lease, no owner, no
  // fencing; a contender that dies holding it loses the token).
  kFloor,
};

const char* BenchModeName(BenchMode mode);
const char* PrimitiveName(Primitive primitive);

struct BenchArgs {
  int processes = 2;
  int threads = 1;
  int locks = 1;
  int seconds = 5;
  int hold_ms = 1;
  int think_ms = 0;
  std::string mode_name = "kafka";
  BenchMode mode =
      BenchMode::kKafka;  // from mode_name, set by CheckBenchArgs()
  // --primitive lock|rwlock|semaphore|multilock: what the contenders take
  // (see Primitive); `primitive` is set by CheckBenchArgs().
  std::string primitive_name = "lock";
  Primitive primitive = Primitive::kLock;
  int read_share = 90;  // rwlock: % of acquisitions that are reads
  int permits = 4;      // semaphore: its permits (each acquisition takes 1)
  int names = 4;        // multilock: names every acquisition takes
  bool read_share_given = false, permits_given = false, names_given = false;
  int poll_interval_ms = 10;
  bool poll_interval_given = false;      // --poll-interval-ms was given
  bool fair_flag = false;                // --fair given
  bool no_fair_flag = false;             // --no-fair given
  bool fair = LockClientOptions{}.fair;  // the result, set by CheckBenchArgs()
  int fetch_wait_ms = 0;                 // 0: the notifier's default
  // --fan-out broadcast|targeted (kafka mode); empty: the config's, else
  // broadcast (CheckBenchArgs fills it in).
  std::string fan_out;
  int targeted_linger_ms = -1;  // --targeted-linger-ms; -1: the default
  // --partitions: the unlock topic's partitions on a broker the run starts
  // (embedded: 4, kafka-local: 3 by default); 0: that default.
  int partitions = 0;
  int park_cap_ms = 0;        // 0: the product's default
  int spin_max_hold_ms = -1;  // the queue head's spinning; -1: the default
  int event_latency = 0;      // events for the one-way latency probe; 0: none
  // --config: the deployment's Redis URL and timeouts, and its Kafka
  // (bootstrap, topic, properties such as SASL/SSL, event key), loaded by
  // CheckBenchArgs(); --redis, --kafka and the key options override it.
  std::string config_path;
  std::optional<config::Config> config;
  std::string redis;  // empty: start a private redis-server
  // Empty: start the embedded broker (kafka mode); kKafkaLocal: start a
  // private real broker with kafka-local (see KafkaLocalScript()).
  std::string kafka;
  int repeat = 1;          // runs; more than 1: medians and spreads too
  EventKeyArgs event_key;  // --event-key-env / --event-key-file
  // The unlock-event keys they name (kafka mode), set by CheckBenchArgs();
  // empty: unsigned events. SECRET: never print them.
  std::vector<std::string> event_keys;
  bool json = false;

  // Hidden: set for a contender process started by the parent.
  int child_index = -1;
  std::string run_dir;

  bool child() const { return child_index >= 0; }
};

// Checks ranges and combinations and fills `mode` and `fair`. Throws
// UsageError naming the option and what it must be.
void CheckBenchArgs(BenchArgs& args);

// The command line that starts contender `index` of a run whose Redis and
// Kafka addresses are `redis` and `kafka`.
std::vector<std::string> ContenderArgv(const BenchArgs& args,
                                       const std::string& self, int index,
                                       const std::string& run_dir,
                                       const std::string& redis,
                                       const std::string& kafka);

// The Kafka client settings of a run at `bootstrap`: the config's (if it
// has a kafka section), --fetch-wait-ms and the event keys.
notifier::KafkaOptions BenchKafkaOptions(const BenchArgs& args,
                                         const std::string& bootstrap);

// The name of lock `index` of a run ("bench:0", ...).
std::string BenchLockName(int index);

// The names one multilock acquisition takes ("bench:multi:0", ...).
std::vector<std::string> MultiLockNames(int names);

// The token list of lock `index` in --mode floor.
std::string FloorKey(int index);

// --kafka kafka-local: a private real Apache Kafka broker, started with the
// kafka-local script ($LOCKFLEET_KAFKA_LOCAL, else ../shared/kafka beside
// the source tree this binary was built from).
inline constexpr char kKafkaLocal[] = "kafka-local";

// The kafka-local script to run, or "" when there is none.
std::string KafkaLocalScript();

// Key prefix of the bench's locks, apart from production's.
inline constexpr char kBenchKeyPrefix[] = "lockfleet-bench";

}  // namespace lockfleet::cli
