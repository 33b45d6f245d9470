#include "support/mock_cluster.hpp"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <vector>

#include "support/client.hpp"

namespace idem::kafka_test {

StatusOr<std::unique_ptr<MockCluster>> MockCluster::start(int brokers) {
  std::unique_ptr<MockCluster> c(new MockCluster());
  c->rk_ = new_handle(RD_KAFKA_PRODUCER, {});
  if (c->rk_ == nullptr) return internal_error("cannot create the mock cluster's handle");
  c->mc_ = rd_kafka_mock_cluster_new(c->rk_, brokers);
  if (c->mc_ == nullptr) return internal_error("cannot create the mock cluster");
  c->brokers_ = brokers;
  c->bootstraps_ = rd_kafka_mock_cluster_bootstraps(c->mc_);
  return c;
}

MockCluster::~MockCluster() {
  if (mc_ != nullptr) rd_kafka_mock_cluster_destroy(mc_);
  if (rk_ != nullptr) rd_kafka_destroy(rk_);
}

Status MockCluster::create_topic(const std::string& topic, int partitions) {
  const rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(mc_, topic.c_str(), partitions, 1);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) return internal_error(rd_kafka_err2str(e));
  return ok_status();
}

void MockCluster::set_down(bool down) {
  for (int b = 1; b <= brokers_; ++b) {
    if (down) {
      rd_kafka_mock_broker_set_down(mc_, b);
    } else {
      rd_kafka_mock_broker_set_up(mc_, b);
    }
  }
}

void MockCluster::fail_requests(int api_key, int count, int error) {
  std::vector<rd_kafka_resp_err_t> errors(static_cast<std::size_t>(count), static_cast<rd_kafka_resp_err_t>(error));
  rd_kafka_mock_push_request_errors_array(mc_, static_cast<int16_t>(api_key), errors.size(), errors.data());
}

}  // namespace idem::kafka_test
