#include "bench_analysis.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

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

namespace {

bool ByLockThenTime(const Section& a, const Section& b) {
  return std::tie(a.lock, a.acquire_ns, a.release_ns) <
         std::tie(b.lock, b.acquire_ns, b.release_ns);
}

// Calls visit(section, held) for every section in acquire order per lock,
// `held` being the sections of its lock held at its acquire instant (those
// acquired before it and released after its acquire; a release at the same
// instant as an acquire comes first).
template <typename Visit>
void Sweep(std::vector<Section>& sections, Visit visit) {
  std::sort(sections.begin(), sections.end(), ByLockThenTime);
  // Held sections by release time (min first).
  std::vector<const Section*> held;
  const auto later = [](const Section* a, const Section* b) {
    return a->release_ns > b->release_ns;
  };
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section& s = sections[i];
    if (i == 0 || sections[i - 1].lock != s.lock) held.clear();
    while (!held.empty() && held.front()->release_ns <= s.acquire_ns) {
      std::pop_heap(held.begin(), held.end(), later);
      held.pop_back();
    }
    visit(s, held);
    held.push_back(&s);
    std::push_heap(held.begin(), held.end(), later);
  }
}

}  // namespace

CheckResult CheckRwLock(std::vector<Section> sections) {
  CheckResult out;
  Sweep(sections,
        [&](const Section& s, const std::vector<const Section*>& held) {
          bool conflict = false, lost = s.lost;
          for (const Section* h : held) {
            if (s.write || h->write) {
              conflict = true;
              lost = lost || h->lost;
            }
          }
          if (conflict) ++(lost ? out.lost_overlaps : out.violations);
        });
  return out;
}

CheckResult CheckSemaphore(std::vector<Section> sections, int64_t permits) {
  CheckResult out;
  Sweep(sections,
        [&](const Section& s, const std::vector<const Section*>& held) {
          if (static_cast<int64_t>(held.size()) < permits) return;
          bool lost = s.lost;
          for (const Section* h : held) lost = lost || h->lost;
          ++(lost ? out.lost_overlaps : out.violations);
        });
  return out;
}

TripStats SummarizeTrips(const std::vector<double>& trips) {
  TripStats out;
  out.count = trips.size();
  if (trips.empty()) return out;
  double sum = 0;
  for (double t : trips) sum += t;
  out.mean = sum / static_cast<double>(trips.size());
  const Percentiles p = Summarize(trips);
  out.p50 = p.p50;
  out.p99 = p.p99;
  out.max = p.max;
  return out;
}

SharedAnalysis AnalyzeShared(std::vector<Section> sections, int processes,
                             int threads, Primitive primitive,
                             int64_t permits) {
  SharedAnalysis out;
  Analysis& a = out.base;
  a.acquisitions = sections.size();
  a.per_contender.assign(static_cast<size_t>(processes) * threads, 0);
  for (const Section& s : sections) {
    ++a.per_contender[static_cast<size_t>(s.process) * threads + s.thread];
    if (primitive == Primitive::kRwLock) ++(s.write ? out.writes : out.reads);
  }
  const CheckResult check =
      primitive == Primitive::kRwLock
          ? CheckRwLock(sections)
          : CheckSemaphore(sections,
                           primitive == Primitive::kMultiLock ? 1 : permits);
  a.violations = check.violations;
  a.lost_lease_overlaps = check.lost_overlaps;

  std::vector<double> all_trips, unwaited, waited, joining, write_trips;
  Sweep(
      sections, [&](const Section& s, const std::vector<const Section*>& held) {
        out.max_concurrent =
            std::max<uint64_t>(out.max_concurrent, held.size() + 1);
        const auto t = static_cast<double>(s.acquire_trips);
        all_trips.push_back(t);
        (s.waited ? waited : unwaited).push_back(t);
        if (primitive == Primitive::kRwLock) {
          if (s.write) {
            write_trips.push_back(t);
          } else if (!held.empty() &&
                     std::none_of(held.begin(), held.end(),
                                  [](const Section* h) { return h->write; })) {
            joining.push_back(t);
          }
        }
      });
  out.trips_all = SummarizeTrips(all_trips);
  out.trips_unwaited = SummarizeTrips(unwaited);
  out.trips_waited = SummarizeTrips(waited);
  out.trips_read_joining = SummarizeTrips(joining);
  out.trips_write = SummarizeTrips(write_trips);

  // Waited hand-offs: per lock, the releases sorted; for each waited
  // section the latest release at or before its acquire.
  std::vector<double> gaps, read_gaps, write_gaps, cross;
  std::vector<std::pair<int64_t, const Section*>> releases;
  size_t begin = 0;
  while (begin < sections.size()) {
    size_t end = begin;
    while (end < sections.size() && sections[end].lock == sections[begin].lock)
      ++end;
    releases.clear();
    for (size_t i = begin; i < end; ++i)
      releases.emplace_back(sections[i].release_ns, &sections[i]);
    std::sort(releases.begin(), releases.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t i = begin; i < end; ++i) {
      const Section& s = sections[i];
      if (!s.waited) continue;
      auto it = std::upper_bound(
          releases.begin(), releases.end(), s.acquire_ns,
          [](int64_t v, const auto& r) { return v < r.first; });
      if (it == releases.begin()) continue;  // nothing released before it
      --it;
      const double gap_us =
          static_cast<double>(s.acquire_ns - it->first) / 1000.0;
      gaps.push_back(gap_us);
      if (it->second->process != s.process) cross.push_back(gap_us);
      if (primitive == Primitive::kRwLock) {
        (s.write ? write_gaps : read_gaps).push_back(gap_us);
      }
    }
    begin = end;
  }
  a.handoffs = gaps.size();
  a.handoff_us = Summarize(gaps);
  a.cross_process_us = Summarize(cross);
  a.parked_cross_process_us = a.cross_process_us;
  out.waited_handoff_us = a.handoff_us;
  out.waited_read_handoff_us = Summarize(std::move(read_gaps));
  out.waited_write_handoff_us = Summarize(std::move(write_gaps));
  a.jain_index = JainIndex(
      std::vector<double>(a.per_contender.begin(), a.per_contender.end()));
  return out;
}

}  // namespace lockfleet::cli
