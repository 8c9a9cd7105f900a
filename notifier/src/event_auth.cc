#include "lockfleet/notifier/event_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <climits>
#include <optional>
#include <utility>

#include "hex.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet::notifier {
namespace {

constexpr size_t kMacBytes = 32;  // SHA-256
using Mac = std::array<unsigned char, kMacBytes>;

// HMAC-SHA256 of `data` under `key`. false only if OpenSSL fails (out of
// memory), which callers treat as "no match".
bool ComputeMac(const std::string& key, const std::string& data, Mac& out) {
  unsigned int length = 0;
  const unsigned char* result =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           out.data(), &length);
  return result != nullptr && length == kMacBytes;
}

std::string_view Bytes(const Mac& mac) {
  return {reinterpret_cast<const char*>(mac.data()), mac.size()};
}

// What EncodeUnlockEvent carries, hence what a receiver decodes and checks.
UnlockEvent AsEncoded(const UnlockEvent& event) {
  UnlockEvent out = event;
  if (out.next_waiter.empty()) {
    out.next_owner.clear();
    out.next_fence = 0;
  }
  return out;
}

}  // namespace

EventAuthenticator::EventAuthenticator(std::vector<std::string> keys)
    : keys_(std::move(keys)) {
  for (size_t i = 0; i < keys_.size(); ++i) {
    const size_t size = keys_[i].size();
    if (size < kMinEventKeyBytes || size > INT_MAX) {
      const std::string which = keys_.size() == 1
                                    ? "the event key"
                                    : "event key " + std::to_string(i + 1);
      for (std::string& key : keys_) OPENSSL_cleanse(key.data(), key.size());
      throw Error(ErrorCode::kInvalidArgument,
                  which + " has " + std::to_string(size) + " bytes; at least " +
                      std::to_string(kMinEventKeyBytes) + " are required");
    }
  }
}

EventAuthenticator::~EventAuthenticator() {
  for (std::string& key : keys_) OPENSSL_cleanse(key.data(), key.size());
}

std::string EventAuthenticator::Sign(const UnlockEvent& event) const {
  if (keys_.empty()) return "";
  Mac mac;
  if (!ComputeMac(keys_.front(), CanonicalUnlockEvent(AsEncoded(event)), mac)) {
    throw Error(ErrorCode::kInternal, "HMAC-SHA256 failed");
  }
  return std::string(kSignaturePrefix) + internal::Hex(Bytes(mac));
}

DecodeError EventAuthenticator::Verify(const UnlockEvent& event,
                                       std::string_view signature,
                                       std::string* detail) const noexcept {
  auto fail = [detail](DecodeError error, const char* why) {
    if (detail != nullptr) {
      try {
        *detail = why;
      } catch (...) {
      }
    }
    return error;
  };
  if (keys_.empty()) return DecodeError::kNone;
  if (signature.empty()) {
    return fail(DecodeError::kUnsigned, "no 'sig' (an event key is set)");
  }
  if (!signature.starts_with(kSignaturePrefix)) {
    return fail(DecodeError::kBadSignature,
                "'sig' is not an hmac-sha256-v1 signature");
  }
  std::optional<std::string> claimed;
  try {
    claimed = internal::Unhex(signature.substr(kSignaturePrefix.size()));
  } catch (...) {  // allocation failure: not verified
  }
  if (!claimed || claimed->size() != kMacBytes) {
    return fail(DecodeError::kBadSignature, "'sig' is not 64 hex digits");
  }
  try {
    const std::string canonical = CanonicalUnlockEvent(event);
    for (const std::string& key : keys_) {
      Mac expected;
      if (ComputeMac(key, canonical, expected) &&
          CRYPTO_memcmp(expected.data(), claimed->data(), kMacBytes) == 0) {
        return DecodeError::kNone;
      }
    }
  } catch (...) {  // allocation failure: not verified
  }
  return fail(DecodeError::kBadSignature,
              keys_.size() == 1 ? "'sig' does not match the event key"
                                : "'sig' matches none of the event keys");
}

std::string EventAuthenticator::Encode(const UnlockEvent& event) const {
  return EncodeUnlockEvent(event, Sign(event));
}

DecodeResult EventAuthenticator::Decode(std::string_view value) const noexcept {
  DecodeResult result = DecodeUnlockEvent(value);
  if (!result.event) return result;
  std::string detail;
  const DecodeError error = Verify(*result.event, result.signature, &detail);
  if (error != DecodeError::kNone) {
    result.event.reset();
    result.error = error;
    result.detail = std::move(detail);
  }
  return result;
}

}  // namespace lockfleet::notifier
