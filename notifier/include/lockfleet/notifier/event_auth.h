// EventAuthenticator: signs and checks unlock events with HMAC-SHA256.
//
// Anyone who can write to the unlock topic can publish an unlock event. With
// an event key shared by every process of a deployment, each event carries
// "sig" = "hmac-sha256-v1:" + lowercase hex of
//   HMAC-SHA256(key, CanonicalUnlockEvent(event))
// and a receiver drops (and counts) every event that is unsigned or whose
// signature matches none of its keys. docs/unlock-events.md has the format
// and the threat model: what a key does and does not protect against (it
// does not stop replays of genuine events, and gives no confidentiality).
//
//   EventAuthenticator auth({key});            // or {} for no key
//   std::string value = auth.Encode(event);     // publisher
//   DecodeResult r = auth.Decode(value);        // receiver: kUnsigned, ...
//
// Keys: the first key signs, every key verifies, so a key is rotated
// without dropping events: give every process {old, new}, then {new, old},
// then {new}. With no key, nothing is signed and signatures are ignored:
// every well-formed event is accepted, as before event keys existed.
//
// Keys are secrets: no message, log line or metric of this class contains
// one, and they are wiped from memory on destruction.
//
// Thread-safety: const methods may be called from any thread concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/event_keys.h"
#include "lockfleet/lockcore/unlock_event.h"
#include "lockfleet/notifier/unlock_codec.h"

namespace lockfleet::notifier {

// Shorter keys are refused (the config module's minimum, so a key the config
// accepts is one the notifier accepts). 16 bytes of random text is plenty (an
// HMAC key longer than SHA-256's 64-byte block is hashed first; nothing is
// gained past 32 random bytes). `openssl rand -base64 32` makes a good one.
inline constexpr size_t kMinEventKeyBytes = config::kMinEventKeyBytes;

// The "sig" value's prefix: the MAC and the canonical layout, versioned
// together.
inline constexpr std::string_view kSignaturePrefix = "hmac-sha256-v1:";

class EventAuthenticator {
 public:
  // `keys`: the first signs, all verify; empty: no authentication. Throws
  // Error(kInvalidArgument) for a key shorter than kMinEventKeyBytes (the
  // message names its position and length, never its bytes).
  explicit EventAuthenticator(std::vector<std::string> keys = {});
  // Wipes the keys.
  ~EventAuthenticator();
  EventAuthenticator(const EventAuthenticator&) = delete;
  EventAuthenticator& operator=(const EventAuthenticator&) = delete;

  // Whether there is a key: events are then signed and checked.
  bool enabled() const { return !keys_.empty(); }
  size_t key_count() const { return keys_.size(); }

  // The "sig" value for `event` as EncodeUnlockEvent carries it, signed with
  // the first key; "" without a key.
  std::string Sign(const UnlockEvent& event) const;

  // kNone if there is no key, or `signature` is a valid signature of `event`
  // under one of the keys (compared in constant time); else kUnsigned
  // (`signature` is empty) or kBadSignature. `detail`, if given, receives
  // the reason (no secret in it).
  DecodeError Verify(const UnlockEvent& event, std::string_view signature,
                     std::string* detail = nullptr) const noexcept;

  // EncodeUnlockEvent(event, Sign(event)).
  std::string Encode(const UnlockEvent& event) const;

  // DecodeUnlockEvent(value), then Verify: a record that is well-formed but
  // not authentic comes back without an event, as kUnsigned or
  // kBadSignature. Never throws.
  DecodeResult Decode(std::string_view value) const noexcept;

 private:
  std::vector<std::string> keys_;
};

}  // namespace lockfleet::notifier
