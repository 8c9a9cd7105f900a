#include "bench_analysis.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace lockfleet::cli {

Percentiles Summarize(std::vector<double> values) {
  Percentiles out;
  out.count = values.size();
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const auto rank = [&](double p) {
    // Nearest rank: the smallest value with at least p of the values <= it.
    const auto n = static_cast<double>(values.size());
    const size_t index =
        static_cast<size_t>(std::max(0.0, std::ceil(p * n) - 1));
    return values[std::min(index, values.size() - 1)];
  };
  out.p50 = rank(0.50);
  out.p90 = rank(0.90);
  out.p99 = rank(0.99);
  out.max = values.back();
  return out;
}

double JainIndex(const std::vector<double>& counts) {
  double sum = 0, squares = 0;
  for (double x : counts) {
    sum += x;
    squares += x * x;
  }
  if (counts.empty() || squares == 0) return 0;
  return sum * sum / (static_cast<double>(counts.size()) * squares);
}

Analysis Analyze(std::vector<Section> sections, int processes, int threads) {
  Analysis out;
  out.acquisitions = sections.size();
  out.per_contender.assign(static_cast<size_t>(processes) * threads, 0);
  for (const Section& s : sections) {
    ++out.per_contender[static_cast<size_t>(s.process) * threads + s.thread];
  }
  std::sort(sections.begin(), sections.end(),
            [](const Section& a, const Section& b) {
              return std::tie(a.lock, a.acquire_ns, a.release_ns) <
                     std::tie(b.lock, b.acquire_ns, b.release_ns);
            });
  std::vector<double> all, cross, same, releaser, parked;
  // The section that ends last among those seen on the current lock: an
  // overlap need not be with the immediate predecessor.
  const Section* latest = nullptr;
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section& next = sections[i];
    if (i == 0 || sections[i - 1].lock != next.lock) {
      latest = &next;
      continue;
    }
    const Section& prev = sections[i - 1];
    ++out.handoffs;
    const bool same_process = prev.process == next.process;
    const bool same_contender = same_process && prev.thread == next.thread;
    if (same_contender) ++out.back_to_releaser;
    if (next.acquire_ns < latest->release_ns) {
      if (latest->lost || next.lost) {
        ++out.lost_lease_overlaps;
      } else {
        ++out.violations;
      }
    } else {
      const double gap_us =
          static_cast<double>(next.acquire_ns - prev.release_ns) / 1000.0;
      all.push_back(gap_us);
      if (same_contender) {
        releaser.push_back(gap_us);
      } else if (same_process) {
        same.push_back(gap_us);
      } else {
        cross.push_back(gap_us);
        if (next.waited) parked.push_back(gap_us);
      }
    }
    if (next.release_ns > latest->release_ns) latest = &next;
  }
  out.handoff_us = Summarize(std::move(all));
  out.cross_process_us = Summarize(std::move(cross));
  out.same_process_us = Summarize(std::move(same));
  out.releaser_us = Summarize(std::move(releaser));
  out.parked_cross_process_us = Summarize(std::move(parked));
  out.jain_index = JainIndex(
      std::vector<double>(out.per_contender.begin(), out.per_contender.end()));
  out.releaser_reacquire_share =
      out.handoffs == 0 ? 0
                        : static_cast<double>(out.back_to_releaser) /
                              static_cast<double>(out.handoffs);
  return out;
}

}  // namespace lockfleet::cli
