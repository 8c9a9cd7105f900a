// AnyStop: one stop token that is requested as soon as any of several others
// is — the token a handler receives, requested by shutdown or by the loss of
// the job's lease (lockfleet::Lease::stop_token()).
//
// Each link is a std::stop_callback that holds its own copy of the combined
// std::stop_source (a copy shares the stop state), so a callback running on
// another thread (the lease watchdog's, the shutdown's) never touches the
// AnyStop object itself. Destroying an AnyStop is safe at any time: each
// ~stop_callback deregisters its link, waiting for it if it is running on
// another thread at that moment, and the tokens handed out stay valid (they
// are simply never requested afterwards). A token already requested when
// linked requests the combined one at once, in the constructor.
//
// What a holder of token() is guaranteed to see: request_stop()
// synchronizes with stop_requested() returning true, so whatever the
// requesting thread did before (the watchdog marking the lease lost, see
// Lease::lost()) is visible once stop_requested() is true.
//
// Thread-safety: token() may be called from any thread; construction and
// destruction by one thread.
#pragma once

#include <initializer_list>
#include <memory>
#include <stop_token>
#include <vector>

namespace lockfleet::worker::internal {

class AnyStop {
 public:
  explicit AnyStop(std::initializer_list<std::stop_token> tokens) {
    links_.reserve(tokens.size());
    for (const std::stop_token& token : tokens) {
      links_.push_back(std::make_unique<std::stop_callback<Forward>>(
          token, Forward{source_}));
    }
  }
  AnyStop(const AnyStop&) = delete;
  AnyStop& operator=(const AnyStop&) = delete;

  std::stop_token token() const noexcept { return source_.get_token(); }

 private:
  struct Forward {
    std::stop_source source;
    void operator()() noexcept { source.request_stop(); }
  };

  std::stop_source source_;
  std::vector<std::unique_ptr<std::stop_callback<Forward>>> links_;
};

}  // namespace lockfleet::worker::internal
