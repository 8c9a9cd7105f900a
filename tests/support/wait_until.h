// WaitUntil: poll a condition with a generous deadline instead of sleeping a
// fixed time, so tests are quick when the machine is fast and still pass
// when it is loaded.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace lockfleet::testing {

inline bool WaitUntil(
    const std::function<bool()>& condition,
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace lockfleet::testing
