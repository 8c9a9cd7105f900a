// The wire format of unlock events: one Kafka record per freed lock.
//
// Record key: the lock name (so one lock's events stay in one partition, in
// order). Record value: a JSON object, format version 1, documented in
// docs/unlock-events.md:
//
//   {"v":1,"lock":"orders:42","owner":"3f9c…:7","client":"3f9c…",
//    "fence":17,"released_at_ns":1763712345123456789,"cause":"release"}
//
// A fair hand-off adds "next_waiter", "next_owner" and "next_fence": the
// queued waiter the lock was granted to. Lock names and owner tokens that are
// not valid UTF-8 travel hex-encoded in
// "lock_hex" / "owner_hex" instead. Decoders ignore unknown fields, so fields
// may be added within a version; a change that breaks readers bumps "v".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lockfleet/lockcore/unlock_event.h"

namespace lockfleet::notifier {

inline constexpr int kUnlockEventVersion = 1;

// Larger record values are dropped unread (a 1024-byte name encodes to well
// under this even when hex-encoded).
inline constexpr size_t kMaxUnlockEventBytes = 16 * 1024;

enum class DecodeError {
  kNone,
  kTooLarge,      // value over kMaxUnlockEventBytes
  kNotJson,       // not parseable JSON
  kNotObject,     // JSON, but not an object
  kWrongVersion,  // "v" missing, not an integer, or not a version we read
  kMissingField,  // a required field is absent
  kBadField,      // a field has the wrong type or an invalid value
};

// Stable snake_case name, used as a metric label ("not_json", ...).
const char* DecodeErrorName(DecodeError error) noexcept;

std::string EncodeUnlockEvent(const UnlockEvent& event);

struct DecodeResult {
  std::optional<UnlockEvent> event;  // set iff error == kNone
  DecodeError error = DecodeError::kNone;
  std::string detail;  // human-readable reason when not kNone
};

// Never throws.
DecodeResult DecodeUnlockEvent(std::string_view value) noexcept;

}  // namespace lockfleet::notifier
