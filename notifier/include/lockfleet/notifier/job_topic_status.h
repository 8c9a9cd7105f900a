// The jobs topic as the workers' consumer group stands on it (`lockfleet
// jobs status` shows it): per partition the group's committed offset, the low
// and high watermarks and the lag; the group's state and members when the
// broker describes groups (a real Kafka does; the embedded broker does not).
//
// Read by a client that carries the group's group.id but never subscribes:
// it only asks (OffsetFetch, ListOffsets, Metadata, DescribeGroups), so it
// never joins the group, triggers no rebalance and commits nothing.
//
// Thread-safety: ReadJobTopicStatus may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockfleet::notifier {

// Which cluster, topic and group; the client never joins the group.
struct JobTopicStatusOptions {
  std::string bootstrap;  // required
  std::string topic = "lockfleet.jobs";
  std::string group = "lockfleet-workers";
  std::string client_id = "lockfleet";
  std::map<std::string, std::string> properties;  // kafka.properties
};

struct PartitionStatus {
  int32_t partition = 0;
  // The group's committed offset: the next record it will consume. nullopt:
  // none (the group starts at the earliest record).
  std::optional<int64_t> committed;
  int64_t low = -1;   // the earliest record still kept; -1 unknown
  int64_t high = -1;  // the end of the partition (next offset); -1 unknown
  // Records the group has not consumed: high - max(committed, low), or
  // high - low without a committed offset; -1 when unknown.
  int64_t lag = -1;
  std::string owner;  // the member_id it is assigned to; "" none or unknown
  std::string error;  // why something above is unknown
};

struct GroupMember {
  std::string member_id;
  std::string client_id;
  std::string client_host;
  std::vector<int32_t> partitions;  // of the jobs topic
};

struct JobTopicStatus {
  bool topic_exists = true;
  std::vector<PartitionStatus> partitions;
  int64_t lag = -1;  // summed; -1 when any partition's is unknown
  // The group, when the broker describes it; otherwise group_error says
  // why not.
  std::optional<std::string> group_state;  // "Stable", "Empty", ...
  std::vector<GroupMember> members;
  std::string group_error;
};

// Throws Error(kKafka) when the cluster does not answer within `timeout`
// (what() says which broker and why, in one line), Error(kInvalidArgument)
// for a property librdkafka refuses.
JobTopicStatus ReadJobTopicStatus(const JobTopicStatusOptions& options,
                                  std::chrono::milliseconds timeout);

}  // namespace lockfleet::notifier
