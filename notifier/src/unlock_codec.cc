#include "lockfleet/notifier/unlock_codec.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "hex.h"

namespace lockfleet::notifier {
namespace {

using internal::Hex;
using internal::Unhex;
using nlohmann::json;

// Domain separation: these bytes are MACed for nothing else.
constexpr char kCanonicalTag[] = "lockfleet.unlock-event.hmac-sha256.v1";

// nlohmann::json refuses to serialize invalid UTF-8 (overlongs and
// surrogates included); ask it rather than second-guess it.
bool IsValidUtf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

void PutText(json& j, const char* field, const std::string& value) {
  if (IsValidUtf8(value)) {
    j[field] = value;
  } else {
    j[std::string(field) + "_hex"] = Hex(value);
  }
}

DecodeResult Fail(DecodeError error, std::string detail) {
  DecodeResult r;
  r.error = error;
  r.detail = std::move(detail);
  return r;
}

// Reads text field `name` (or `name`_hex). Returns an error result on failure.
std::optional<DecodeResult> GetText(const json& j, const std::string& name,
                                    bool required, std::string* out) {
  if (auto it = j.find(name); it != j.end()) {
    if (!it->is_string())
      return Fail(DecodeError::kBadField, "'" + name + "' is not a string");
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (auto it = j.find(name + "_hex"); it != j.end()) {
    std::optional<std::string> raw;
    if (it->is_string()) raw = Unhex(it->get<std::string>());
    if (!raw)
      return Fail(DecodeError::kBadField, "'" + name + "_hex' is not hex");
    *out = std::move(*raw);
    return std::nullopt;
  }
  if (required)
    return Fail(DecodeError::kMissingField, "missing '" + name + "'");
  return std::nullopt;
}

}  // namespace

const char* DecodeErrorName(DecodeError error) noexcept {
  switch (error) {
    case DecodeError::kNone:
      return "none";
    case DecodeError::kTooLarge:
      return "too_large";
    case DecodeError::kNotJson:
      return "not_json";
    case DecodeError::kNotObject:
      return "not_object";
    case DecodeError::kWrongVersion:
      return "wrong_version";
    case DecodeError::kMissingField:
      return "missing_field";
    case DecodeError::kBadField:
      return "bad_field";
    case DecodeError::kUnsigned:
      return "unsigned";
    case DecodeError::kBadSignature:
      return "bad_signature";
  }
  return "unknown";
}

std::string EncodeUnlockEvent(const UnlockEvent& event,
                              std::string_view signature) {
  json j;
  j["v"] = kUnlockEventVersion;
  PutText(j, "lock", event.lock);
  PutText(j, "owner", event.owner);
  PutText(j, "client", event.client_id);
  j["fence"] = event.fence;
  j["released_at_ns"] = event.released_at_ns;
  j["cause"] = UnlockCauseName(event.cause);
  if (!event.next_waiter.empty()) {
    PutText(j, "next_waiter", event.next_waiter);
    PutText(j, "next_owner", event.next_owner);
    j["next_fence"] = event.next_fence;
  }
  if (!signature.empty()) j["sig"] = signature;
  return j.dump();
}

std::string CanonicalUnlockEvent(const UnlockEvent& event) {
  // Naming every member makes adding one to UnlockEvent a compile error
  // here: a field the signature does not cover could be forged freely.
  const auto& [lock, owner, client_id, fence, released_at_ns, cause,
               next_waiter, next_owner, next_fence] = event;
  std::string out(kCanonicalTag, sizeof(kCanonicalTag));  // with its NUL
  auto put_int = [&out](int64_t value) {
    const auto bits = static_cast<uint64_t>(value);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out += static_cast<char>((bits >> shift) & 0xFF);
    }
  };
  auto put_text = [&](std::string_view text) {
    put_int(static_cast<int64_t>(text.size()));
    out.append(text);
  };
  put_int(kUnlockEventVersion);
  put_text(lock);
  put_text(owner);
  put_text(client_id);
  put_int(fence);
  put_int(released_at_ns);
  put_text(UnlockCauseName(cause));
  put_text(next_waiter);
  put_text(next_owner);
  put_int(next_fence);
  return out;
}

DecodeResult DecodeUnlockEvent(std::string_view value) noexcept {
  try {
    if (value.size() > kMaxUnlockEventBytes) {
      return Fail(DecodeError::kTooLarge,
                  std::to_string(value.size()) + " bytes");
    }
    json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Fail(DecodeError::kNotJson, "not JSON");
    if (!j.is_object())
      return Fail(DecodeError::kNotObject, "not a JSON object");
    auto v = j.find("v");
    if (v == j.end() || !v->is_number_integer() ||
        v->get<int64_t>() != kUnlockEventVersion) {
      return Fail(DecodeError::kWrongVersion, "unsupported format version");
    }
    UnlockEvent e;
    if (auto err = GetText(j, "lock", true, &e.lock)) return *err;
    if (e.lock.empty()) return Fail(DecodeError::kBadField, "'lock' is empty");
    if (auto err = GetText(j, "owner", false, &e.owner)) return *err;
    if (auto err = GetText(j, "client", false, &e.client_id)) return *err;
    auto int_field = [&](const char* name,
                         int64_t* out) -> std::optional<DecodeResult> {
      auto it = j.find(name);
      if (it == j.end()) return std::nullopt;  // optional: defaults to 0
      if (!it->is_number_integer()) {
        return Fail(DecodeError::kBadField,
                    std::string("'") + name + "' is not an integer");
      }
      *out = it->get<int64_t>();
      return std::nullopt;
    };
    if (auto err = GetText(j, "next_waiter", false, &e.next_waiter))
      return *err;
    if (auto err = GetText(j, "next_owner", false, &e.next_owner)) return *err;
    if (auto err = int_field("next_fence", &e.next_fence)) return *err;
    if (auto err = int_field("fence", &e.fence)) return *err;
    if (auto err = int_field("released_at_ns", &e.released_at_ns)) return *err;
    std::string signature;
    if (auto sig = j.find("sig"); sig != j.end()) {
      if (!sig->is_string())
        return Fail(DecodeError::kBadField, "'sig' is not a string");
      signature = sig->get<std::string>();
    }
    if (auto c = j.find("cause"); c != j.end()) {
      if (!c->is_string())
        return Fail(DecodeError::kBadField, "'cause' is not a string");
      const std::string cause = c->get<std::string>();
      if (cause == "release") {
        e.cause = UnlockCause::kRelease;
      } else if (cause == "force") {
        e.cause = UnlockCause::kForce;
      } else if (cause == "opened") {
        e.cause = UnlockCause::kOpened;
      } else if (cause == "permits") {
        e.cause = UnlockCause::kPermits;
      } else {
        return Fail(DecodeError::kBadField, "unknown cause '" + cause + "'");
      }
    }
    DecodeResult r;
    r.event = std::move(e);
    r.signature = std::move(signature);
    return r;
  } catch (...) {
    return Fail(DecodeError::kBadField, "undecodable");
  }
}

}  // namespace lockfleet::notifier
