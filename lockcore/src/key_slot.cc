#include "key_slot.h"

#include <array>
#include <vector>

namespace lockfleet::internal {
namespace {

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::vector<std::string> MakeSlotTags() {
  std::vector<std::string> tags(kSlots);
  size_t found = 0;
  for (uint64_t n = 0; found < kSlots; ++n) {
    std::string tag = std::to_string(n);
    std::string& slot = tags[Crc16(tag) % kSlots];
    if (slot.empty()) {
      slot = std::move(tag);
      ++found;
    }
  }
  return tags;
}

}  // namespace

uint16_t KeySlot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return Crc16(key) % kSlots;
}

const std::string& SlotTag(uint16_t slot) {
  static const std::vector<std::string> tags = MakeSlotTags();
  return tags[slot % kSlots];
}

std::string FenceCounterKey(std::string_view prefix,
                            std::string_view lock_key) {
  std::string key(prefix);
  key.append(":fence:{").append(SlotTag(KeySlot(lock_key))).append("}");
  return key;
}

}  // namespace lockfleet::internal
