// Fuzzes FencedResource's key layout (KeyOf / ParseKey), which turns
// caller-supplied lock names and job ids into Redis keys.
//
// Properties: a key determines its prefix, name and parts — two different
// inputs never make one key, and ParseKey gives back exactly what KeyOf was
// given; every key has exactly one '{' and one '}' around the encoded name
// (one hash slot per resource); whatever ParseKey accepts is a key KeyOf
// makes; bad prefixes and empty names are refused with kInvalidArgument,
// anything else thrown is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"

namespace {

using lockfleet::Error;
using lockfleet::ErrorCode;
using lockfleet::FencedResource;
using lockfleet::ResourceKey;

void Check(bool ok) {
  if (!ok) std::abort();
}

ResourceKey ConsumeKey(FuzzedDataProvider& in) {
  ResourceKey k;
  k.prefix = in.ConsumeBool() ? "lockfleet" : in.ConsumeRandomLengthString(16);
  k.name = in.ConsumeRandomLengthString(64);
  const size_t parts = in.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < parts; ++i) {
    k.parts.push_back(in.ConsumeRandomLengthString(64));
  }
  return k;
}

bool Valid(const ResourceKey& k) {
  return !k.prefix.empty() &&
         k.prefix.find_first_of("{}") == std::string::npos && !k.name.empty();
}

// KeyOf, or std::nullopt when it refused the input (which must be invalid).
std::optional<std::string> Make(const ResourceKey& k) {
  try {
    std::string key = FencedResource::KeyOf(k.prefix, k.name, k.parts);
    Check(Valid(k));
    return key;
  } catch (const Error& e) {
    Check(e.code() == ErrorCode::kInvalidArgument && !Valid(k));
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const ResourceKey a = ConsumeKey(in);
  const ResourceKey b = ConsumeKey(in);
  const std::optional<std::string> key_a = Make(a);
  const std::optional<std::string> key_b = Make(b);
  for (const auto& [k, key] : {std::pair{&a, &key_a}, std::pair{&b, &key_b}}) {
    if (!*key) continue;
    const std::string& s = **key;
    Check(FencedResource::ParseKey(s) == *k);  // round trip
    Check(std::count(s.begin(), s.end(), '{') == 1);
    Check(std::count(s.begin(), s.end(), '}') == 1);
    Check(s.rfind(k->prefix + ":res:{", 0) == 0);
  }
  if (key_a && key_b) Check((*key_a == *key_b) == (a == b));  // injective

  // The rest of the input as a key: accepted only if canonical.
  const std::string raw = in.ConsumeRemainingBytesAsString();
  if (const std::optional<ResourceKey> parsed = FencedResource::ParseKey(raw)) {
    Check(Valid(*parsed));
    Check(FencedResource::KeyOf(parsed->prefix, parsed->name, parsed->parts) ==
          raw);
  }
  return 0;
}
