// What a librdkafka consumer reveals only in its statistics JSON, read as
// plain text: pure functions, no Kafka calls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::notifier {

// Records of `topic` beyond the consumer's position, summed over
// `partitions`, from one librdkafka statistics JSON (statistics.interval.ms).
// Per partition: high watermark - position, where the position is where the
// application is (app_offset), the group's committed offset when that is
// further or the application has received nothing yet, else the low
// watermark (where auto.offset.reset=earliest starts). -1 when a partition's
// watermark or position is not known yet, or the JSON is not statistics.
int64_t LagFromStatistics(std::string_view json, const std::string& topic,
                          const std::vector<int32_t>& partitions);

}  // namespace lockfleet::notifier
