#include "lockfleet/notifier/embedded_broker.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <mutex>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "tcp_forwarder.h"

namespace lockfleet::notifier {

class EmbeddedBroker::Impl {
 public:
  explicit Impl(EmbeddedBrokerOptions options) {
    if (options.partitions < 1 || options.partitions > 10000) {
      throw Error(ErrorCode::kInvalidArgument, "partitions must be 1..10000");
    }
    if (options.port < 0 || options.port > 65535) {
      throw Error(ErrorCode::kInvalidArgument, "port must be 0..65535");
    }
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    // Without it, acks sometimes stall behind delayed ACKs (lessons.md).
    if (rd_kafka_conf_set(conf, "socket.nagle.disable", "true", err,
                          sizeof(err)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err)) !=
            RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw Error(ErrorCode::kKafka, std::string("mock broker config: ") + err);
    }
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (rk_ == nullptr)
      throw Error(ErrorCode::kKafka, std::string("mock broker: ") + err);
    cluster_ = rd_kafka_mock_cluster_new(rk_, 1);
    if (cluster_ == nullptr) {
      rd_kafka_destroy(rk_);
      throw Error(ErrorCode::kKafka, "cannot start librdkafka's mock cluster");
    }
    mock_bootstrap_ = rd_kafka_mock_cluster_bootstraps(cluster_);
    try {
      for (const std::string& topic : options.topics)
        CreateTopic(topic, options.partitions);
      if (options.port != 0) {
        int mock_port =
            std::stoi(mock_bootstrap_.substr(mock_bootstrap_.rfind(':') + 1));
        forwarder_ = std::make_unique<TcpForwarder>(options.port, mock_port);
        bootstrap_ = "127.0.0.1:" + std::to_string(options.port);
      } else {
        bootstrap_ = mock_bootstrap_;
      }
    } catch (...) {
      rd_kafka_mock_cluster_destroy(cluster_);
      rd_kafka_destroy(rk_);
      throw;
    }
  }

  ~Impl() {
    forwarder_.reset();
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(rk_);
  }

  void CreateTopic(const std::string& topic, int partitions) {
    if (topic.empty())
      throw Error(ErrorCode::kInvalidArgument, "topic name must not be empty");
    std::lock_guard lock(mu_);
    rd_kafka_resp_err_t rc =
        rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw Error(ErrorCode::kKafka, "cannot create topic '" + topic +
                                         "': " + rd_kafka_err2str(rc));
    }
  }

  void SetDown() {
    std::lock_guard lock(mu_);
    rd_kafka_mock_broker_set_down(cluster_, -1);
  }

  void SetUp() {
    std::lock_guard lock(mu_);
    rd_kafka_mock_broker_set_up(cluster_, -1);
  }

  void FailRequests(int api_key, int count, int kafka_error) {
    if (count <= 0) return;
    std::vector<rd_kafka_resp_err_t> errors(
        static_cast<size_t>(count),
        static_cast<rd_kafka_resp_err_t>(kafka_error));
    std::lock_guard lock(mu_);
    rd_kafka_mock_push_request_errors_array(
        cluster_, static_cast<int16_t>(api_key), errors.size(), errors.data());
  }

  std::string bootstrap_;

 private:
  std::mutex mu_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string mock_bootstrap_;
  std::unique_ptr<TcpForwarder> forwarder_;
};

EmbeddedBroker::EmbeddedBroker(EmbeddedBrokerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
EmbeddedBroker::~EmbeddedBroker() = default;
const std::string& EmbeddedBroker::bootstrap() const {
  return impl_->bootstrap_;
}
void EmbeddedBroker::CreateTopic(const std::string& topic, int partitions) {
  impl_->CreateTopic(topic, partitions);
}
void EmbeddedBroker::SetDown() { impl_->SetDown(); }
void EmbeddedBroker::SetUp() { impl_->SetUp(); }
void EmbeddedBroker::FailRequests(int api_key, int count, int kafka_error) {
  impl_->FailRequests(api_key, count, kafka_error);
}

}  // namespace lockfleet::notifier
