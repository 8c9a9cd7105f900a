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
//
// A deployment with an event key (event_auth.h) adds "sig": an HMAC-SHA256
// over CanonicalUnlockEvent(event). This file only carries the field; making
// and checking signatures is EventAuthenticator's job.
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
  // Reported by EventAuthenticator, never by DecodeUnlockEvent:
  kUnsigned,      // a key is configured and the event has no "sig"
  kBadSignature,  // "sig" does not match the event under any configured key
};

// Stable snake_case name, used as a metric label ("not_json", ...).
const char* DecodeErrorName(DecodeError error) noexcept;

// The record value for `event`. A non-empty `signature` is sent as "sig"
// (EventAuthenticator::Encode passes one). next_owner and next_fence travel
// only with a next_waiter.
std::string EncodeUnlockEvent(const UnlockEvent& event,
                              std::string_view signature = {});

struct DecodeResult {
  std::optional<UnlockEvent> event;  // set iff error == kNone
  DecodeError error = DecodeError::kNone;
  std::string detail;  // human-readable reason when not kNone
  // The "sig" field as sent; empty when absent. Not checked here.
  std::string signature;
};

// Never throws. Does not look at signatures beyond reading "sig" (a "sig"
// that is not a string is kBadField).
DecodeResult DecodeUnlockEvent(std::string_view value) noexcept;

// The bytes an event signature covers: every field of `event`, in a fixed
// order, each either a fixed-width integer or length-prefixed, so that two
// different events never give the same bytes (no separator can be forged
// into a name). Layout (docs/unlock-events.md), integers 8 bytes big-endian:
//   "lockfleet.unlock-event.hmac-sha256.v1" 0x00
//   format version (kUnlockEventVersion)
//   for each of lock, owner, client_id: byte length, bytes
//   fence, released_at_ns
//   cause name ("release" / "force"): byte length, bytes
//   next_waiter, next_owner: byte length, bytes
//   next_fence
// It covers the event as decoded, not the JSON spelling: "lock" and
// "lock_hex" for the same bytes, or a left-out field and its default, are
// the same event.
std::string CanonicalUnlockEvent(const UnlockEvent& event);

}  // namespace lockfleet::notifier
