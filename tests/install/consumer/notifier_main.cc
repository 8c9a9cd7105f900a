// Uses the installed lockfleet::notifier: encodes and decodes an unlock event
// and starts the in-process embedded broker, which pulls librdkafka into the
// link (so lockfleetConfig.cmake must have re-created PkgConfig::rdkafka).
#include <cstdlib>
#include <iostream>

#include "lockfleet/lockcore/unlock_event.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/unlock_codec.h"

int main() {
  lockfleet::UnlockEvent event;
  event.lock = "orders:42";
  event.fence = 17;
  const lockfleet::notifier::DecodeResult decoded =
      lockfleet::notifier::DecodeUnlockEvent(
          lockfleet::notifier::EncodeUnlockEvent(event));
  if (!decoded.event || decoded.event->lock != event.lock ||
      decoded.event->fence != event.fence) {
    std::cerr << "lockfleet notifier consumer: FAILED: codec round trip: "
              << decoded.detail << "\n";
    return EXIT_FAILURE;
  }

  lockfleet::notifier::EmbeddedBroker broker;
  if (broker.bootstrap().empty()) {
    std::cerr << "lockfleet notifier consumer: FAILED: no bootstrap address\n";
    return EXIT_FAILURE;
  }
  std::cout << "lockfleet notifier consumer: ok\n";
  return EXIT_SUCCESS;
}
