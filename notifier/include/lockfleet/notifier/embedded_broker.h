// EmbeddedBroker: librdkafka's mock cluster as a local Kafka-protocol broker.
//
// FOR DEVELOPMENT, DEMOS AND TESTS ONLY. It keeps everything in memory, in
// this process, with one broker and no replication; when the process exits,
// every topic and offset is gone. Production points lockfleet at a real Kafka
// cluster; nothing else in lockfleet knows or cares which one it talks to.
//
// The mock listens on a kernel-chosen loopback port (librdkafka 2.0.2 cannot
// choose it). When `port` is set, the broker also listens on 127.0.0.1:port
// and forwards each connection to the mock, so bootstrap.servers can be a
// fixed address. Clients learn the mock's own port from metadata.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace lockfleet::notifier {

struct EmbeddedBrokerOptions {
  int port = 0;        // 0: the mock's own port is the bootstrap address
  int partitions = 4;  // for each topic below
  std::vector<std::string> topics{"lockfleet.unlock"};
};

class EmbeddedBroker {
 public:
  // Throws Error(kKafka) if the mock cannot start, Error(kInvalidArgument)
  // for bad options (port taken, partitions < 1).
  explicit EmbeddedBroker(EmbeddedBrokerOptions options = {});
  ~EmbeddedBroker();
  EmbeddedBroker(const EmbeddedBroker&) = delete;
  EmbeddedBroker& operator=(const EmbeddedBroker&) = delete;

  // "127.0.0.1:PORT": the fixed port if one was given, else the mock's.
  const std::string& bootstrap() const;

  void CreateTopic(const std::string& topic, int partitions);

  // Simulated outage: drop every connection and refuse new ones / accept
  // again. Topics and their data survive.
  void SetDown();
  void SetUp();

  // Fault injection (tests): the next `count` requests of Kafka API
  // `api_key` (2: ListOffsets, 1: Fetch, 0: Produce, ...) are answered with
  // the error `kafka_error` (a Kafka protocol error code; the default, 6, is
  // NOT_LEADER_FOR_PARTITION). Requests already answered are not affected.
  void FailRequests(int api_key, int count, int kafka_error = 6);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockfleet::notifier
