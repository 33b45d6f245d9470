// librdkafka handles for the Kafka test supports (their log silenced).
#pragma once

#include <librdkafka/rdkafka.h>

#include <string>
#include <utility>
#include <vector>

namespace idem::kafka_test {

// A handle of `type` with `settings` (name, value); null when librdkafka refuses.
rd_kafka_t* new_handle(rd_kafka_type_t type, const std::vector<std::pair<std::string, std::string>>& settings);

// How many partitions `topic` has; -1 when unknown.
int partition_count(rd_kafka_t* rk, const std::string& topic);

}  // namespace idem::kafka_test
