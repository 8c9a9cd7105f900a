// Redis Cluster hash slots, and the fence counter keys that share them.
//
// A lock's fencing tokens come from one counter per hash slot (16384 keys at
// most, whatever the number of lock names), kept in the slot of the lock's
// own keys so every lock script stays single-slot on a cluster.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockfleet::internal {

inline constexpr uint16_t kSlots = 16384;

// The slot Redis Cluster assigns to `key`: CRC16 (XMODEM) of the key, or of
// its hash tag — the part between the first '{' and the next '}' when that
// part is non-empty — modulo 16384.
uint16_t KeySlot(std::string_view key);

// A short hash tag whose slot is `slot`: the smallest non-negative decimal
// integer (as text) that hashes there. Part of the key layout: never change.
const std::string& SlotTag(uint16_t slot);

// "<prefix>:fence:{<SlotTag(KeySlot(lock_key))>}": the counter of the slot
// `lock_key` lives in. No lock or resource key has this form (their hash tag
// follows the prefix directly, or "res:").
std::string FenceCounterKey(std::string_view prefix, std::string_view lock_key);

}  // namespace lockfleet::internal
