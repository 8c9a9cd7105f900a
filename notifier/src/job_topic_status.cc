// librdkafka's C API: the group inspection calls (committed offsets without
// membership, ListGroups/DescribeGroups) have no C++ wrapper there.
#include "lockfleet/notifier/job_topic_status.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::notifier {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// librdkafka's warnings and errors (log levels <= 4) from its own threads:
// the last one explains a timeout better than "Local: Timed out".
struct ClientLog {
  std::mutex mu;
  std::string last;
};

void OnLog(const rd_kafka_t* rk, int level, const char*, const char* line) {
  if (level > 4) return;
  auto* log = static_cast<ClientLog*>(rd_kafka_opaque(rk));
  std::lock_guard lock(log->mu);
  log->last = line;
}

struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const {
    // Never subscribed: nothing to leave, nothing to commit.
    rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }
};
struct TopicDeleter {
  void operator()(rd_kafka_topic_t* rkt) const { rd_kafka_topic_destroy(rkt); }
};
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* md) const {
    rd_kafka_metadata_destroy(md);
  }
};
struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
struct GroupsDeleter {
  void operator()(const rd_kafka_group_list* groups) const {
    rd_kafka_group_list_destroy(groups);
  }
};

// Reads big-endian integers and strings of the consumer protocol.
class Reader {
 public:
  Reader(const void* data, int size)
      : p_(static_cast<const unsigned char*>(data)),
        end_(p_ + std::max(size, 0)) {}
  bool Int(int bytes, int64_t* out) {
    if (end_ - p_ < bytes) return false;
    int64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | *p_++;
    if (bytes == 2) v = static_cast<int16_t>(v);
    if (bytes == 4) v = static_cast<int32_t>(v);
    *out = v;
    return true;
  }
  bool String(std::string* out) {
    int64_t n = 0;
    if (!Int(2, &n) || n < 0 || end_ - p_ < n) return false;
    out->assign(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }

 private:
  const unsigned char* p_;
  const unsigned char* end_;
};

// The partitions of `topic` in a member's assignment (ConsumerProtocol
// Assignment: version, [topic, [partition]], user data); empty if it does
// not parse.
std::vector<int32_t> AssignedPartitions(const void* data, int size,
                                        const std::string& topic) {
  Reader in(data, size);
  int64_t version = 0, topics = 0;
  std::vector<int32_t> out;
  if (!in.Int(2, &version) || !in.Int(4, &topics)) return {};
  for (int64_t t = 0; t < topics; ++t) {
    std::string name;
    int64_t count = 0;
    if (!in.String(&name) || !in.Int(4, &count) || count < 0) return {};
    for (int64_t i = 0; i < count; ++i) {
      int64_t partition = 0;
      if (!in.Int(4, &partition)) return {};
      if (name == topic) out.push_back(static_cast<int32_t>(partition));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

JobTopicStatus ReadJobTopicStatus(const JobTopicStatusOptions& kafka,
                                  milliseconds timeout) {
  const steady_clock::time_point deadline = steady_clock::now() + timeout;
  const auto remaining_ms = [&] {
    const auto left = std::chrono::duration_cast<milliseconds>(
        deadline - steady_clock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 1));
  };
  auto log = std::make_shared<ClientLog>();
  const auto unavailable = [&](const std::string& what,
                               rd_kafka_resp_err_t err) {
    std::string last;
    {
      std::lock_guard lock(log->mu);
      last = log->last;
    }
    return Error(
        ErrorCode::kKafka,
        "Kafka at " + kafka.bootstrap + ": " + what + ": " +
            rd_kafka_err2str(err) +
            (err == RD_KAFKA_RESP_ERR__TIMED_OUT
                 ? " after " + std::to_string(timeout.count() / 1000) + "s"
                 : "") +
            (last.empty() ? "" : " (" + last + ")"));
  };

  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  const auto set = [&](const std::string& key, const std::string& value,
                       bool user) {
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof(err)) !=
        RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw Error(user ? ErrorCode::kInvalidArgument : ErrorCode::kKafka,
                  "Kafka property '" + key + "': " + err);
    }
  };
  set("bootstrap.servers", kafka.bootstrap, false);
  set("client.id", kafka.client_id, false);
  set("group.id", kafka.group, false);
  set("enable.auto.commit", "false", false);
  set("enable.auto.offset.store", "false", false);
  set("allow.auto.create.topics", "false", false);
  set("reconnect.backoff.max.ms", "1000", false);
  set("log.connection.close", "false", false);
  for (const auto& [key, value] : kafka.properties) set(key, value, true);
  rd_kafka_conf_set_opaque(conf, log.get());
  rd_kafka_conf_set_log_cb(conf, OnLog);
  // rd_kafka_new owns conf once it succeeds.
  std::unique_ptr<rd_kafka_t, HandleDeleter> rk(
      rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err)));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    throw Error(ErrorCode::kKafka,
                std::string("cannot create a Kafka client: ") + err);
  }

  JobTopicStatus status;
  std::unique_ptr<rd_kafka_topic_t, TopicDeleter> rkt(
      rd_kafka_topic_new(rk.get(), kafka.topic.c_str(), nullptr));
  const rd_kafka_metadata_t* raw_md = nullptr;
  if (const rd_kafka_resp_err_t e =
          rd_kafka_metadata(rk.get(), 0, rkt.get(), &raw_md, remaining_ms());
      e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw unavailable("no metadata for topic " + kafka.topic, e);
  }
  std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> md(raw_md);
  const rd_kafka_metadata_topic* topic = nullptr;
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (kafka.topic == md->topics[i].topic) topic = &md->topics[i];
  }
  if (topic == nullptr ||
      topic->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      topic->partition_cnt == 0) {
    status.topic_exists = false;
    return status;
  }
  if (topic->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw unavailable("topic " + kafka.topic, topic->err);
  }

  std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter> list(
      rd_kafka_topic_partition_list_new(topic->partition_cnt));
  for (int i = 0; i < topic->partition_cnt; ++i) {
    rd_kafka_topic_partition_list_add(list.get(), kafka.topic.c_str(),
                                      topic->partitions[i].id);
  }
  rd_kafka_topic_partition_list_sort(list.get(), nullptr, nullptr);
  if (const rd_kafka_resp_err_t e =
          rd_kafka_committed(rk.get(), list.get(), remaining_ms());
      e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    throw unavailable("no committed offsets of group " + kafka.group, e);
  }
  status.lag = 0;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& elem = list->elems[i];
    PartitionStatus p;
    p.partition = elem.partition;
    if (elem.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      p.error = std::string("committed offset: ") + rd_kafka_err2str(elem.err);
    } else if (elem.offset >= 0) {
      p.committed = elem.offset;
    }
    int64_t low = -1, high = -1;
    if (const rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
            rk.get(), kafka.topic.c_str(), elem.partition, &low, &high,
            remaining_ms());
        e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (e == RD_KAFKA_RESP_ERR__TIMED_OUT ||
          e == RD_KAFKA_RESP_ERR__TRANSPORT) {
        throw unavailable(
            "no watermarks of partition " + std::to_string(elem.partition), e);
      }
      p.error = std::string("watermarks: ") + rd_kafka_err2str(e);
    } else {
      p.low = low;
      p.high = high;
      if (p.error.empty()) {
        p.lag = std::max<int64_t>(
            0, high - std::max(p.committed.value_or(low), low));
      }
    }
    if (p.lag < 0) status.lag = -1;
    if (status.lag >= 0) status.lag += p.lag;
    status.partitions.push_back(std::move(p));
  }

  const rd_kafka_group_list* raw_groups = nullptr;
  const rd_kafka_resp_err_t e =
      rd_kafka_list_groups(rk.get(), kafka.group.c_str(), &raw_groups,
                           std::min(remaining_ms(), 5000));
  std::unique_ptr<const rd_kafka_group_list, GroupsDeleter> groups(raw_groups);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR__PARTIAL) {
    status.group_error =
        std::string("the broker did not describe the group: ") +
        rd_kafka_err2str(e);
    return status;
  }
  const rd_kafka_group_info* group = nullptr;
  for (int i = 0; groups && i < groups->group_cnt; ++i) {
    if (kafka.group == groups->groups[i].group) group = &groups->groups[i];
  }
  if (group == nullptr) {
    // ListGroups knows only groups with members or offsets on a real broker.
    status.group_error =
        "the broker knows no such group: no worker has joined it yet";
    return status;
  }
  if (group->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    status.group_error =
        std::string("the broker did not describe the group: ") +
        rd_kafka_err2str(group->err);
    return status;
  }
  status.group_state = group->state != nullptr ? group->state : "";
  std::map<int32_t, std::string> owners;
  for (int i = 0; i < group->member_cnt; ++i) {
    const rd_kafka_group_member_info& m = group->members[i];
    GroupMember member{
        .member_id = m.member_id ? m.member_id : "",
        .client_id = m.client_id ? m.client_id : "",
        .client_host = m.client_host ? m.client_host : "",
        .partitions = AssignedPartitions(
            m.member_assignment, m.member_assignment_size, kafka.topic)};
    for (int32_t p : member.partitions) owners[p] = member.member_id;
    status.members.push_back(std::move(member));
  }
  for (PartitionStatus& p : status.partitions) {
    if (const auto it = owners.find(p.partition); it != owners.end()) {
      p.owner = it->second;
    }
  }
  return status;
}

}  // namespace lockfleet::notifier
