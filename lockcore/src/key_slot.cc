#include "key_slot.h"

#include <array>
#include <charconv>
#include <vector>

namespace lockfleet::internal {
namespace {

// CRC16-XMODEM (polynomial 0x1021), a byte at a time: building the slot
// tags hashes ~180k short strings at a process's first lock.
constexpr std::array<uint16_t, 256> kCrc16Table = [] {
  std::array<uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}();

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data)
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[(crc >> 8) ^ byte]);
  return crc;
}

std::vector<std::string> MakeSlotTags() {
  std::vector<std::string> tags(kSlots);
  size_t found = 0;
  char text[24];
  for (uint64_t n = 0; found < kSlots; ++n) {
    const std::string_view tag(
        text, std::to_chars(text, text + sizeof(text), n).ptr - text);
    std::string& slot = tags[Crc16(tag) % kSlots];
    if (slot.empty()) {
      slot = tag;
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
