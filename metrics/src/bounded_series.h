// Internal: label values made from unbounded input, and the bounded set of
// per-label series they select.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>

#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::internal {

// `value` as a label value: valid UTF-8 without control characters (each
// offending byte becomes '_'), at most kMaxLabelValueBytes bytes cut on a
// character boundary, "none" when empty.
std::string LabelValue(std::string_view value);

// The series of one family set, per label value, for at most `max` values;
// later values share the series of kOtherLabelValue. `make` creates the
// series of a label value (zero-valued) on its first use; it runs under this
// object's lock. Series are never removed, so references stay valid.
//
// Thread-safety: Get may be called from any thread concurrently.
template <typename Series>
class BoundedSeries {
 public:
  using Make = std::function<Series(const std::string& label_value)>;

  BoundedSeries(size_t max, Make make) : max_(max), make_(std::move(make)) {}

  const Series& Get(std::string_view label_value) {
    {
      std::shared_lock lock(mu_);
      auto it = series_.find(label_value);
      if (it != series_.end()) return it->second;
      if (labelled_ >= max_ && other_ != nullptr) return *other_;
    }
    std::unique_lock lock(mu_);
    auto it = series_.find(label_value);
    if (it != series_.end()) return it->second;
    if (labelled_ < max_) {
      ++labelled_;
      std::string key(label_value);
      Series series = make_(key);
      return series_.emplace(std::move(key), std::move(series)).first->second;
    }
    if (other_ == nullptr) {
      std::string key(kOtherLabelValue);
      auto found = series_.find(key);
      if (found == series_.end()) {
        Series series = make_(key);
        found = series_.emplace(std::move(key), std::move(series)).first;
      }
      other_ = &found->second;
    }
    return *other_;
  }

 private:
  const size_t max_;
  const Make make_;
  std::shared_mutex mu_;
  std::map<std::string, Series, std::less<>> series_;
  size_t labelled_ = 0;            // values given their own series
  const Series* other_ = nullptr;  // the overflow series, once used
};

}  // namespace lockfleet::metrics::internal
