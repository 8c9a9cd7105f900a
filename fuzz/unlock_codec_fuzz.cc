// Fuzzes DecodeUnlockEvent, which reads every record of the unlock topic —
// a topic anyone with produce rights can write to.
//
// Properties: it never crashes, throws or leaks (noexcept; ASan/UBSan); an
// error result carries no event and a name; a value over the size limit is
// refused unread; and a decoded event survives EncodeUnlockEvent and a
// second decode unchanged (what the encoder can carry: next_owner and
// next_fence only travel with a next_waiter).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lockfleet/notifier/unlock_codec.h"

namespace {

using lockfleet::UnlockEvent;
using lockfleet::notifier::DecodeError;
using lockfleet::notifier::DecodeErrorName;
using lockfleet::notifier::DecodeResult;
using lockfleet::notifier::DecodeUnlockEvent;
using lockfleet::notifier::EncodeUnlockEvent;
using lockfleet::notifier::kMaxUnlockEventBytes;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool Same(const UnlockEvent& a, const UnlockEvent& b) {
  return a.lock == b.lock && a.owner == b.owner && a.client_id == b.client_id &&
         a.fence == b.fence && a.released_at_ns == b.released_at_ns &&
         a.cause == b.cause && a.next_waiter == b.next_waiter &&
         a.next_owner == b.next_owner && a.next_fence == b.next_fence;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  const DecodeResult result = DecodeUnlockEvent(value);
  Check(DecodeErrorName(result.error) != nullptr);
  if (size > kMaxUnlockEventBytes)
    Check(result.error == DecodeError::kTooLarge);
  if (result.error != DecodeError::kNone) {
    Check(!result.event.has_value());
    return 0;
  }
  Check(result.event.has_value() && !result.event->lock.empty());
  UnlockEvent expected = *result.event;
  if (expected.next_waiter.empty()) {
    expected.next_owner.clear();
    expected.next_fence = 0;
  }
  const std::string encoded = EncodeUnlockEvent(*result.event);
  // A value near the limit can grow past it once the encoder adds the
  // fields the input left out; such a record is refused as too large.
  if (encoded.size() > kMaxUnlockEventBytes) return 0;
  const DecodeResult again = DecodeUnlockEvent(encoded);
  Check(again.error == DecodeError::kNone && again.event.has_value());
  Check(Same(*again.event, expected));
  return 0;
}
