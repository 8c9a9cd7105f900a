// LoopbackBus: an in-memory UnlockPublisher that delivers every event to all
// subscribed LockClients, standing in for a transport in lockcore's own tests
// (the Kafka transport is tested with a real broker in notifier's tests).
#pragma once

#include <mutex>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/unlock_event.h"

namespace lockfleet::testing {

class LoopbackBus final : public UnlockPublisher {
 public:
  void Subscribe(LockClient* client) {
    std::lock_guard lock(mu_);
    clients_.push_back(client);
  }
  void Unsubscribe(LockClient* client) {
    std::lock_guard lock(mu_);
    std::erase(clients_, client);
  }
  // When false, events are dropped (a lost event / dead broker).
  void SetDelivering(bool on) {
    std::lock_guard lock(mu_);
    delivering_ = on;
  }
  void Publish(const UnlockEvent& event) noexcept override {
    std::lock_guard lock(mu_);
    ++published_;
    if (!delivering_) return;
    for (LockClient* c : clients_) c->DeliverUnlockEvent(event);
  }
  int published() const {
    std::lock_guard lock(mu_);
    return published_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<LockClient*> clients_;
  bool delivering_ = true;
  int published_ = 0;
};

}  // namespace lockfleet::testing

namespace lockfleet::testing {

// RecordingPublisher: keeps every published event, for tests that check what
// a client announced.
class RecordingPublisher final : public UnlockPublisher {
 public:
  void Publish(const UnlockEvent& event) noexcept override {
    std::lock_guard lock(mu);
    events.push_back(event);
  }

  std::mutex mu;
  std::vector<UnlockEvent> events;  // mu
};

}  // namespace lockfleet::testing
