#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "bounded_series.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics {
namespace internal {
namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

bool IsControl(std::string_view sequence) {
  const auto b0 = static_cast<unsigned char>(sequence[0]);
  if (sequence.size() == 1) return b0 < 0x20 || b0 == 0x7F;
  // C1 controls, U+0080..U+009F.
  return b0 == 0xC2 && static_cast<unsigned char>(sequence[1]) <= 0x9F;
}

}  // namespace

std::string LabelValue(std::string_view value) {
  std::string out;
  out.reserve(std::min(value.size(), kMaxLabelValueBytes));
  while (!value.empty()) {
    size_t n = Utf8SequenceLength(value);
    std::string_view piece = "_";
    if (n != 0 && !IsControl(value.substr(0, n))) piece = value.substr(0, n);
    if (n == 0) n = 1;  // an invalid byte: replace it alone, resync after it
    if (out.size() + piece.size() > kMaxLabelValueBytes) break;
    out.append(piece);
    value.remove_prefix(n);
  }
  if (out.empty()) out = "none";
  return out;
}

}  // namespace internal

std::string LockClass(std::string_view name) {
  return internal::LabelValue(name.substr(0, name.find(':')));
}

}  // namespace lockfleet::metrics
