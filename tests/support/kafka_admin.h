// Creating a topic on a Kafka broker, as an operator does before the first
// worker starts (deploy/README.md: a production broker should not
// auto-create topics, and lockfleet never asks it to). librdkafka's admin
// API; the caller links rdkafka.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <string>

namespace lockfleet::testing {

// Creates `topic` with `partitions` partitions (replication factor 1) on the
// broker at `bootstrap`. Returns "" on success or when the topic exists,
// else librdkafka's error.
inline std::string CreateKafkaTopic(
    const std::string& bootstrap, const std::string& topic, int partitions,
    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
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
  std::string error;
  rd_kafka_NewTopic_t* new_topic = rd_kafka_NewTopic_new(
      topic.c_str(), partitions, 1, errstr, sizeof(errstr));
  if (new_topic == nullptr) {
    rd_kafka_destroy(rk);
    return errstr;
  }
  const int timeout_ms = static_cast<int>(timeout.count());
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms, errstr,
                                            sizeof(errstr));
  rd_kafka_AdminOptions_set_operation_timeout(options, timeout_ms, errstr,
                                              sizeof(errstr));
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &new_topic, 1, options, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout_ms + 5000);
  if (event == nullptr) {
    error = "CreateTopics: no answer";
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = rd_kafka_event_error_string(event);
  } else if (const rd_kafka_CreateTopics_result_t* result =
                 rd_kafka_event_CreateTopics_result(event)) {
    size_t n = 0;
    const rd_kafka_topic_result_t** topics =
        rd_kafka_CreateTopics_result_topics(result, &n);
    for (size_t i = 0; i < n; ++i) {
      const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[i]);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR &&
          err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        const char* text = rd_kafka_topic_result_error_string(topics[i]);
        error = text != nullptr ? text : rd_kafka_err2str(err);
      }
    }
  } else {
    error = "CreateTopics: unexpected answer";
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_NewTopic_destroy(new_topic);
  rd_kafka_destroy(rk);
  return error;
}

}  // namespace lockfleet::testing
