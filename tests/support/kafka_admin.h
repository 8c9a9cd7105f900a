// Creating a topic on a Kafka broker, as an operator does before the first
// worker starts (deploy/README.md: a production broker should not
// auto-create topics, and lockfleet never asks it to). librdkafka's admin
// API; the caller links rdkafka.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <string>

namespace lockfleet::testing {

namespace internal {

// Runs one admin request on a short-lived client of the broker at
// `bootstrap`: `issue(rk, options, queue)` sends it, `check(event)` reads
// its result event ("" when all went well). Returns "" or the error.
template <typename Issue, typename Check>
std::string RunKafkaAdmin(const std::string& bootstrap, rd_kafka_admin_op_t op,
                          std::chrono::milliseconds timeout, Issue issue,
                          Check check) {
  char errstr[512] = "";
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), errstr,
                        sizeof(errstr)) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    return errstr;
  }
  rd_kafka_t* rk =
      rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);  // still ours when rd_kafka_new fails
    return errstr;
  }
  const int timeout_ms = static_cast<int>(timeout.count());
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk, op);
  rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms, errstr,
                                            sizeof(errstr));
  rd_kafka_AdminOptions_set_operation_timeout(options, timeout_ms, errstr,
                                              sizeof(errstr));
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  std::string error = issue(rk, options, queue);
  if (error.empty()) {
    rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout_ms + 5000);
    if (event == nullptr) {
      error = "admin request: no answer";
    } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = rd_kafka_event_error_string(event);
    } else {
      error = check(event);
    }
    if (event != nullptr) rd_kafka_event_destroy(event);
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_destroy(rk);
  return error;
}

// The first error among an admin result's topics ("" if none; `ignore`:
// an error code that counts as success).
inline std::string TopicResultsError(const rd_kafka_topic_result_t** topics,
                                     size_t n, rd_kafka_resp_err_t ignore) {
  for (size_t i = 0; i < n; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[i]);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != ignore) {
      const char* text = rd_kafka_topic_result_error_string(topics[i]);
      return text != nullptr ? text : rd_kafka_err2str(err);
    }
  }
  return "";
}

}  // namespace internal

// Creates `topic` with `partitions` partitions (replication factor 1) on the
// broker at `bootstrap`. Returns "" on success or when the topic exists,
// else librdkafka's error.
inline std::string CreateKafkaTopic(
    const std::string& bootstrap, const std::string& topic, int partitions,
    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  rd_kafka_NewTopic_t* new_topic = nullptr;
  std::string error = internal::RunKafkaAdmin(
      bootstrap, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout,
      [&](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
          rd_kafka_queue_t* queue) -> std::string {
        char errstr[512] = "";
        new_topic = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, errstr,
                                          sizeof(errstr));
        if (new_topic == nullptr) return errstr;
        rd_kafka_CreateTopics(rk, &new_topic, 1, options, queue);
        return "";
      },
      [](rd_kafka_event_t* event) -> std::string {
        const rd_kafka_CreateTopics_result_t* result =
            rd_kafka_event_CreateTopics_result(event);
        if (result == nullptr) return "CreateTopics: unexpected answer";
        size_t n = 0;
        const rd_kafka_topic_result_t** topics =
            rd_kafka_CreateTopics_result_topics(result, &n);
        return internal::TopicResultsError(
            topics, n, RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS);
      });
  if (new_topic != nullptr) rd_kafka_NewTopic_destroy(new_topic);
  return error;
}

// Grows `topic` to `partitions` partitions in all, as an operator's
// kafka-topics --alter does. Returns "" or librdkafka's error.
inline std::string AddKafkaPartitions(
    const std::string& bootstrap, const std::string& topic, int partitions,
    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  rd_kafka_NewPartitions_t* grow = nullptr;
  std::string error = internal::RunKafkaAdmin(
      bootstrap, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS, timeout,
      [&](rd_kafka_t* rk, rd_kafka_AdminOptions_t* options,
          rd_kafka_queue_t* queue) -> std::string {
        char errstr[512] = "";
        grow = rd_kafka_NewPartitions_new(topic.c_str(),
                                          static_cast<size_t>(partitions),
                                          errstr, sizeof(errstr));
        if (grow == nullptr) return errstr;
        rd_kafka_CreatePartitions(rk, &grow, 1, options, queue);
        return "";
      },
      [](rd_kafka_event_t* event) -> std::string {
        const rd_kafka_CreatePartitions_result_t* result =
            rd_kafka_event_CreatePartitions_result(event);
        if (result == nullptr) return "CreatePartitions: unexpected answer";
        size_t n = 0;
        const rd_kafka_topic_result_t** topics =
            rd_kafka_CreatePartitions_result_topics(result, &n);
        return internal::TopicResultsError(topics, n,
                                           RD_KAFKA_RESP_ERR_NO_ERROR);
      });
  if (grow != nullptr) rd_kafka_NewPartitions_destroy(grow);
  return error;
}

}  // namespace lockfleet::testing
