#include "top_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "redis_glob.h"

namespace lockfleet::cli::top {
namespace {

using metrics::Sample;

constexpr char kAcquisitions[] = "lockfleet_lock_acquisitions_total";
constexpr char kJobs[] = "lockfleet_jobs_total";

// A series' identity: its name and labels.
std::string SeriesKey(const Sample& sample) {
  std::string key = sample.name;
  for (const auto& [label, value] : sample.labels) {
    key += '\0';
    key += label;
    key += '=';
    key += value;
  }
  return key;
}

// A grant's identity: the lock, its owner and its fencing token.
std::string GrantKey(const HeldLock& lock) {
  return lock.name + '\n' + lock.info.owner + '\n' +
         std::to_string(lock.info.fence);
}

// Jobs per second that failed or timed out, from per-second increases.
double FailedPerS(const std::vector<Sample>& rates) {
  return metrics::SumSamples(rates, kJobs, {{"result", "failed"}}) +
         metrics::SumSamples(rates, kJobs, {{"result", "timeout"}});
}

// The kinds that are holds (not latch awaits, not multi-locks, whose locks
// count as locks already): what "acquisitions" means in the totals.
constexpr const char* kHoldKinds[] = {"lock", "rwlock_read", "rwlock_write",
                                      "semaphore"};

// Gives the samples of the families labelled by kind from a worker that
// predates the label the kind its acquisitions were: lock.
void DefaultKindToLock(std::vector<Sample>& samples) {
  for (Sample& s : samples) {
    if (s.name == kAcquisitions ||
        s.name.starts_with("lockfleet_lock_wait_seconds") ||
        s.name.starts_with("lockfleet_lock_hold_seconds") ||
        s.name == "lockfleet_lock_releases_total" ||
        s.name == "lockfleet_lock_leases_lost_total") {
      s.labels.emplace("kind", "lock");  // no-op when it has one
    }
  }
}

// Holds granted per second, from per-second increases.
double HoldsPerS(const std::vector<Sample>& rates) {
  double sum = 0;
  for (const char* kind : kHoldKinds) {
    sum += metrics::SumSamples(rates, kAcquisitions,
                               {{"kind", kind}, {"result", "acquired"}});
  }
  return sum;
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double Quantile(double q, const std::vector<Sample>& rates,
                const char* histogram, const metrics::LabelMatch& match = {}) {
  return metrics::HistogramQuantile(
      q, metrics::HistogramBuckets(rates, histogram, match));
}

// The value of `label` of every sample called `name`, each once.
std::set<std::string> LabelValues(const std::vector<Sample>& samples,
                                  const std::string& name,
                                  const std::string& label) {
  std::set<std::string> out;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    if (auto it = s.labels.find(label); it != s.labels.end()) {
      out.insert(it->second);
    }
  }
  return out;
}

// Shown as it is only if printable ASCII: a lock name or an error text must
// not send escape sequences to the operator's terminal.
std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) > 0x7e) {
      c = '?';
    }
  }
  return out;
}

// `text` in exactly `width` columns: padded, or cut with a '~' at the end.
std::string Fit(const std::string& text, size_t width, bool right = false) {
  if (width == 0) return "";
  std::string out = Printable(text);
  if (out.size() > width) return out.substr(0, width - 1) + "~";
  const std::string pad(width - out.size(), ' ');
  return right ? pad + out : out + pad;
}

std::string Duration(milliseconds d) {
  char text[32];
  const long long ms = d.count();
  if (ms < 1000) {
    std::snprintf(text, sizeof(text), "%lldms", ms);
  } else if (ms < 60'000) {
    std::snprintf(text, sizeof(text), "%.1fs", ms / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", ms / 60'000,
                  ms / 1000 % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", ms / 3'600'000,
                  ms / 60'000 % 60);
  }
  return text;
}

std::string SecondsText(double s) {
  if (std::isnan(s)) return "-";
  char text[32];
  if (s < 1) {
    std::snprintf(text, sizeof(text), "%.1fms", s * 1000);
  } else {
    std::snprintf(text, sizeof(text), "%.2fs", s);
  }
  return text;
}

std::string Rate(double per_s) {
  char text[32];
  if (std::isnan(per_s)) return "-";
  if (per_s >= 100'000) {
    std::snprintf(text, sizeof(text), "%.0fk", per_s / 1000);
  } else if (per_s >= 10'000) {
    std::snprintf(text, sizeof(text), "%.1fk", per_s / 1000);
  } else if (per_s >= 10 || per_s == 0) {
    std::snprintf(text, sizeof(text), "%.0f", per_s);
  } else {
    std::snprintf(text, sizeof(text), "%.1f", per_s);
  }
  return text;
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f", value);
  return text;
}

}  // namespace

const char* SortKeyName(SortKey key) {
  switch (key) {
    case SortKey::kWaiters:
      return "waiters";
    case SortKey::kWait:
      return "wait";
    case SortKey::kHeld:
      return "held";
    case SortKey::kName:
      return "name";
  }
  return "waiters";
}

SortKey NextSortKey(SortKey key) {
  switch (key) {
    case SortKey::kWaiters:
      return SortKey::kWait;
    case SortKey::kWait:
      return SortKey::kHeld;
    case SortKey::kHeld:
      return SortKey::kName;
    case SortKey::kName:
      return SortKey::kWaiters;
  }
  return SortKey::kWaiters;
}

std::optional<SortKey> ParseSortKey(const std::string& name) {
  for (SortKey key :
       {SortKey::kWaiters, SortKey::kWait, SortKey::kHeld, SortKey::kName}) {
    if (name == SortKeyName(key)) return key;
  }
  return std::nullopt;
}

bool MatchesFilter(const std::string& name, const std::string& filter) {
  if (filter.empty()) return true;
  if (filter.find_first_of("*?[") != std::string::npos &&
      CheckGlob(filter).empty()) {
    return GlobMatch(filter, name);
  }
  return name.find(filter) != std::string::npos;
}

std::vector<Sample> Increase(const std::vector<Sample>& before,
                             const std::vector<Sample>& after) {
  std::map<std::string, double> old;
  for (const Sample& s : before) old[SeriesKey(s)] = s.value;
  std::vector<Sample> out;
  out.reserve(after.size());
  for (const Sample& s : after) {
    Sample increase = s;
    increase.timestamp_ms.reset();
    if (auto it = old.find(SeriesKey(s));
        it != old.end() && s.value >= it->second) {
      increase.value = s.value - it->second;
    }
    out.push_back(std::move(increase));
  }
  return out;
}

void Model::SeenSince(const std::map<std::string, Seen>& seen,
                      const std::string& key,
                      std::map<std::string, Seen>& next) const {
  Seen entry{last_.at, first_};
  if (auto it = seen.find(key); it != seen.end()) entry = it->second;
  next.emplace(key, entry);
}

void Model::Observe(Observation observation) {
  if (!first_ && observation.at < last_.at) observation.at = last_.at;
  // Rates run from the last observation's scrape of a target, when both it
  // and this one answered; otherwise they start over.
  for (const WorkerScrape& scrape : observation.workers) {
    const auto answered = std::find_if(
        last_.workers.begin(), last_.workers.end(), [&](const WorkerScrape& w) {
          return w.ok && w.target == scrape.target;
        });
    if (scrape.ok && answered != last_.workers.end()) {
      previous_[scrape.target] = {last_.at, *answered};
    } else {
      previous_.erase(scrape.target);
    }
  }
  if (observation.dead_letters && !first_ && last_.dead_letters) {
    previous_dead_ = {last_.at, *last_.dead_letters};
  } else if (!observation.dead_letters) {
    previous_dead_.reset();
  }
  // Redis did not answer: keep what it said last, so held times go on.
  if (!observation.redis_error.empty() && !first_) {
    observation.locks = last_.locks;
    observation.locks_truncated = last_.locks_truncated;
  }
  last_ = std::move(observation);
  std::map<std::string, Seen> grants, waiters;
  for (const HeldLock& lock : last_.locks) {
    SeenSince(grants_, GrantKey(lock), grants);
    for (const QueuedWaiter& waiter : lock.info.queue) {
      SeenSince(waiters_, waiter.waiter_id, waiters);
    }
  }
  grants_ = std::move(grants);
  waiters_ = std::move(waiters);
  first_ = false;
}

Frame Model::View(const ViewOptions& view) const {
  Frame frame;
  frame.redis_error = last_.redis_error;
  frame.locks_held = last_.locks.size();
  frame.locks_truncated = last_.locks_truncated;
  frame.dead_letters = last_.dead_letters;
  if (previous_dead_ && last_.dead_letters &&
      last_.at > previous_dead_->first) {
    frame.dead_letters_per_s =
        std::max<double>(0, *last_.dead_letters - previous_dead_->second) /
        Seconds(last_.at - previous_dead_->first);
  }

  const auto since = [&](const std::map<std::string, Seen>& seen,
                         const std::string& key) {
    const auto it = seen.find(key);
    return it == seen.end() ? Seen{last_.at, false} : it->second;
  };
  for (const HeldLock& lock : last_.locks) {
    if (!MatchesFilter(lock.name, view.filter)) continue;
    LockRow row;
    row.name = lock.name;
    row.owner = lock.info.owner;
    row.holds = lock.info.hold_count;
    row.ttl = lock.info.ttl;
    row.fence = lock.info.fence;
    row.pending = !lock.info.pending_waiter.empty();
    row.waiters = lock.info.queue.size();
    const Seen grant = since(grants_, GrantKey(lock));
    row.held = std::chrono::duration_cast<milliseconds>(last_.at - grant.since);
    row.held_before = grant.before;
    for (const QueuedWaiter& waiter : lock.info.queue) {
      const Seen queued = since(waiters_, waiter.waiter_id);
      const auto waited =
          std::chrono::duration_cast<milliseconds>(last_.at - queued.since);
      if (waited >= row.waited) {
        row.waited = waited;
        row.waited_before = queued.before;
      }
    }
    frame.locks.push_back(std::move(row));
  }
  std::sort(frame.locks.begin(), frame.locks.end(),
            [&](const LockRow& a, const LockRow& b) {
              switch (view.sort) {
                case SortKey::kWaiters:
                  if (a.waiters != b.waiters) return a.waiters > b.waiters;
                  if (a.waited != b.waited) return a.waited > b.waited;
                  break;
                case SortKey::kWait:
                  if (a.waited != b.waited) return a.waited > b.waited;
                  if (a.waiters != b.waiters) return a.waiters > b.waiters;
                  break;
                case SortKey::kHeld:
                  if (a.held != b.held) return a.held > b.held;
                  break;
                case SortKey::kName:
                  break;
              }
              return a.name < b.name;
            });

  // Per second over each worker's last interval, then summed: fleet rates.
  std::vector<Sample> rates;
  std::vector<Sample> current;
  double interval_s = 0;
  for (const WorkerScrape& scrape : last_.workers) {
    WorkerRow row;
    row.target = scrape.target;
    row.up = scrape.ok;
    row.error = scrape.error;
    if (!scrape.ok) {
      frame.workers.push_back(std::move(row));
      continue;
    }
    const std::vector<Sample>& now = scrape.samples;
    current.insert(current.end(), now.begin(), now.end());
    row.running = metrics::SumSamples(now, "lockfleet_jobs_running");
    row.partitions =
        metrics::SumSamples(now, "lockfleet_jobs_consumer_partitions");
    const bool has_lag = std::any_of(now.begin(), now.end(), [](auto& s) {
      return s.name == "lockfleet_jobs_consumer_lag";
    });
    row.lag =
        has_lag ? metrics::SumSamples(now, "lockfleet_jobs_consumer_lag") : -1;
    if (const auto before = previous_.find(scrape.target);
        before != previous_.end() && last_.at > before->second.first) {
      const double dt = Seconds(last_.at - before->second.first);
      std::vector<Sample> increase =
          Increase(before->second.second.samples, now);
      for (Sample& s : increase) s.value /= dt;
      DefaultKindToLock(increase);
      row.jobs_per_s = metrics::SumSamples(increase, kJobs);
      row.failed_per_s = FailedPerS(increase);
      row.acquisitions_per_s = HoldsPerS(increase);
      rates.insert(rates.end(), increase.begin(), increase.end());
      interval_s = std::max(interval_s, dt);
      frame.have_rates = true;
    }
    frame.workers.push_back(std::move(row));
  }
  frame.interval_s = interval_s;

  Totals& t = frame.totals;
  t.acquisitions_per_s = HoldsPerS(rates);
  const double attempts =
      metrics::SumSamples(rates, "lockfleet_lock_attempts_total");
  t.contended_share =
      attempts > 0
          ? metrics::SumSamples(rates, "lockfleet_lock_contended_total") /
                attempts
          : std::nan("");
  for (const std::string& cause :
       LabelValues(rates, "lockfleet_lock_wakeups_total", "cause")) {
    t.wakeups_per_s[cause] = metrics::SumSamples(
        rates, "lockfleet_lock_wakeups_total", {{"cause", cause}});
  }
  t.event_delay_p50_s =
      Quantile(0.5, rates, "lockfleet_notification_delay_seconds");
  t.event_delay_p99_s =
      Quantile(0.99, rates, "lockfleet_notification_delay_seconds");
  t.jobs_per_s = metrics::SumSamples(rates, kJobs);
  t.failed_per_s = FailedPerS(rates);
  frame.metrics_up = std::any_of(frame.workers.begin(), frame.workers.end(),
                                 [](const WorkerRow& w) { return w.up; });
  t.running = metrics::SumSamples(current, "lockfleet_jobs_running");
  t.waiters = metrics::SumSamples(current, "lockfleet_lock_waiters");
  if (!frame.metrics_up) {
    t.waiters = 0;
    for (const HeldLock& lock : last_.locks) {
      t.waiters += static_cast<double>(lock.info.queue.size());
    }
  }

  // A row per class and kind (lock, rwlock_read, semaphore ...; a worker
  // from before the kind label counts as lock).
  const std::set<std::string> kinds = LabelValues(rates, kAcquisitions, "kind");
  for (const std::string& lock_class :
       LabelValues(rates, kAcquisitions, "lock_class")) {
    for (const std::string& kind : kinds) {
      ClassRow row;
      row.lock_class = lock_class;
      row.kind = kind;
      const metrics::LabelMatch match = {{"lock_class", lock_class},
                                         {"kind", kind}};
      metrics::LabelMatch acquired = match;
      acquired.emplace("result", "acquired");
      row.acquisitions_per_s =
          metrics::SumSamples(rates, kAcquisitions, acquired);
      if (row.acquisitions_per_s <= 0) continue;
      row.wait_p50_s =
          Quantile(0.5, rates, "lockfleet_lock_wait_seconds", match);
      row.wait_p99_s =
          Quantile(0.99, rates, "lockfleet_lock_wait_seconds", match);
      row.hold_p99_s =
          Quantile(0.99, rates, "lockfleet_lock_hold_seconds", match);
      frame.classes.push_back(std::move(row));
    }
  }
  std::sort(frame.classes.begin(), frame.classes.end(),
            [](const ClassRow& a, const ClassRow& b) {
              if (a.acquisitions_per_s != b.acquisitions_per_s)
                return a.acquisitions_per_s > b.acquisitions_per_s;
              if (a.lock_class != b.lock_class)
                return a.lock_class < b.lock_class;
              return a.kind < b.kind;
            });
  return frame;
}

std::vector<Line> Render(const Frame& frame, const ViewOptions& view,
                         const RenderContext& context) {
  const size_t width = static_cast<size_t>(std::max(context.width, 20));
  const auto cut = [&](std::string text) {
    text = Printable(text);
    if (text.size() > width) text.resize(width);
    return text;
  };
  std::vector<Line> head, locks, tail;
  const Totals& t = frame.totals;

  head.push_back({cut("lockfleet top  " + context.clock + "  " +
                      context.source + (view.paused ? "  [paused]" : "")),
                  true});
  std::string wakeups;
  for (const auto& [cause, per_s] : t.wakeups_per_s) {
    wakeups += " " + cause + " " + Rate(per_s);
  }
  std::string contended = "-";
  if (!std::isnan(t.contended_share)) {
    contended = Number(t.contended_share * 100) + "%";
  }
  head.push_back({cut("locks held " + std::to_string(frame.locks_held) +
                      (frame.locks_truncated ? "+" : "") + "  waiters " +
                      Number(t.waiters) + "  acquisitions/s " +
                      (frame.have_rates ? Rate(t.acquisitions_per_s) : "-") +
                      "  contended " + (frame.have_rates ? contended : "-") +
                      "  wake-ups/s" + (wakeups.empty() ? " -" : wakeups))});
  std::string dead = "-";
  if (frame.dead_letters) {
    dead = std::to_string(*frame.dead_letters);
    if (frame.dead_letters_per_s) {
      dead += " (+" + Rate(*frame.dead_letters_per_s) + "/s)";
    }
  }
  head.push_back(
      {cut("unlock-event delay p50 " + SecondsText(t.event_delay_p50_s) +
           " p99 " + SecondsText(t.event_delay_p99_s) + "  jobs/s " +
           (frame.have_rates ? Rate(t.jobs_per_s) : "-") + "  failed/s " +
           (frame.have_rates ? Rate(t.failed_per_s) : "-") + "  running " +
           (frame.metrics_up ? Number(t.running) : "-") + "  dead letters " +
           dead)});
  std::string warning;
  if (!frame.redis_error.empty()) {
    warning = "Redis: " + frame.redis_error + " (showing its last answer)";
  } else if (frame.locks_truncated) {
    warning = "more locks than --limit: the rest are not shown";
  }
  head.push_back({cut(warning)});

  // Locks. On a narrow screen the columns give way in this order: HOLDER
  // shrinks to 12, then FENCE, TTL and HELD are dropped, then LOCK shrinks
  // to 8; WAITERS and WAITED (the default sort) always show in full.
  struct Column {
    std::string title;
    size_t width;
    bool right;
    bool shown = true;
  };
  enum { kLock, kHolder, kHeld, kTtl, kFence, kWaiters, kWaited, kColumns };
  const auto title = [&](const char* text, SortKey key) {
    return std::string(text) + (view.sort == key ? "*" : "");
  };
  Column columns[kColumns] = {
      {title("LOCK", SortKey::kName), 12, false},
      {"HOLDER", 24, false},
      {title("HELD", SortKey::kHeld), 8, true},
      {"TTL", 7, true},
      {"FENCE", 17, true},
      {title("WAITERS", SortKey::kWaiters), 8, true},
      {title("WAITED", SortKey::kWait), 8, true},
  };
  const auto total = [&] {
    size_t sum = 0, shown = 0;
    for (const Column& c : columns) {
      if (!c.shown) continue;
      sum += c.width;
      ++shown;
    }
    return sum + (shown - 1);  // one space between columns
  };
  while (total() > width && columns[kHolder].width > 12) {
    --columns[kHolder].width;
  }
  for (int drop : {kFence, kTtl, kHeld}) {
    if (total() > width) columns[drop].shown = false;
  }
  while (total() > width && columns[kLock].width > 8) --columns[kLock].width;
  if (total() < width) columns[kLock].width += width - total();
  const auto line = [&](const std::string(&cells)[kColumns]) {
    std::string out;
    for (int i = 0; i < kColumns; ++i) {
      if (!columns[i].shown) continue;
      if (!out.empty()) out += ' ';
      out += Fit(cells[i], columns[i].width, columns[i].right);
    }
    return cut(out);
  };
  {
    std::string cells[kColumns];
    for (int i = 0; i < kColumns; ++i) cells[i] = columns[i].title;
    locks.push_back({line(cells), true});
  }
  for (const LockRow& row : frame.locks) {
    const std::string cells[kColumns] = {
        row.name,
        row.pending ? "(handed to) " + row.owner : row.owner,
        Duration(row.held) + (row.held_before ? "+" : ""),
        Duration(row.ttl),
        std::to_string(row.fence),
        std::to_string(row.waiters),
        row.waiters == 0
            ? "-"
            : Duration(row.waited) + (row.waited_before ? "+" : ""),
    };
    locks.push_back({line(cells)});
  }
  if (frame.locks.empty()) {
    locks.push_back(
        {cut(frame.locks_held == 0 ? "  (no lock held)"
                                   : "  (no held lock matches the filter)")});
  }

  constexpr size_t kMaxClasses = 5;
  tail.push_back({""});
  tail.push_back(
      {cut(Fit("LOCK CLASS", 24) + " " + Fit("KIND", 12) + " " +
           Fit("ACQ/S", 8, true) + " " + Fit("WAIT p50", 9, true) + " " +
           Fit("WAIT p99", 9, true) + " " + Fit("HOLD p99", 9, true)),
       true});
  for (size_t i = 0; i < frame.classes.size() && i < kMaxClasses; ++i) {
    const ClassRow& row = frame.classes[i];
    tail.push_back({cut(Fit(row.lock_class, 24) + " " + Fit(row.kind, 12) +
                        " " + Fit(Rate(row.acquisitions_per_s), 8, true) + " " +
                        Fit(SecondsText(row.wait_p50_s), 9, true) + " " +
                        Fit(SecondsText(row.wait_p99_s), 9, true) + " " +
                        Fit(SecondsText(row.hold_p99_s), 9, true))});
  }
  if (frame.classes.empty()) {
    tail.push_back({cut(frame.workers.empty()
                            ? "  (no metrics: give --metrics HOST:PORT or "
                              "metrics.targets)"
                            : "  (no acquisitions in the last interval)")});
  }
  tail.push_back({""});
  tail.push_back(
      {cut(Fit("WORKER", 22) + " " + Fit("STATE", 5) + " " +
           Fit("JOBS/S", 7, true) + " " + Fit("FAILED/S", 8, true) + " " +
           Fit("RUNNING", 7, true) + " " + Fit("LAG", 7, true) + " " +
           Fit("PARTS", 5, true) + " " + Fit("ACQ/S", 7, true)),
       true});
  if (frame.workers.empty()) tail.push_back({"  (none)"});
  for (const WorkerRow& row : frame.workers) {
    if (!row.up) {
      tail.push_back(
          {cut(Fit(row.target, 22) + " " + Fit("down", 5) + " " + row.error)});
      continue;
    }
    tail.push_back({cut(
        Fit(row.target, 22) + " " + Fit("up", 5) + " " +
        Fit(frame.have_rates ? Rate(row.jobs_per_s) : "-", 7, true) + " " +
        Fit(frame.have_rates ? Rate(row.failed_per_s) : "-", 8, true) + " " +
        Fit(Number(row.running), 7, true) + " " +
        Fit(row.lag < 0 ? "-" : Number(row.lag), 7, true) + " " +
        Fit(Number(row.partitions), 5, true) + " " +
        Fit(frame.have_rates ? Rate(row.acquisitions_per_s) : "-", 7, true))});
  }
  if (context.interactive) {
    tail.push_back({""});
    tail.push_back(
        {cut("s sort: " + std::string(SortKeyName(view.sort)) +
             "  / filter: " + (view.filter.empty() ? "none" : view.filter) +
             "  p " + (view.paused ? "resume" : "pause") + "  q quit"),
         true});
  }

  // The key help keeps the last line; the header comes first; locks get
  // what is left after the tail (classes, workers), at least 4 rows (the
  // tail is cut from its bottom for them).
  std::optional<Line> help;
  if (context.interactive) {
    help = tail.back();
    tail.pop_back();
  }
  const size_t height = static_cast<size_t>(std::max(context.height, 1));
  const size_t avail = height - (help ? 1 : 0);
  const size_t head_rows = std::min(head.size(), avail);
  const size_t rest = avail - head_rows;
  const size_t min_locks = std::min<size_t>(locks.size(), 4);
  const size_t tail_rows =
      std::min(tail.size(), rest > min_locks ? rest - min_locks : 0);
  const size_t lock_rows = rest - tail_rows;
  std::vector<Line> out(head.begin(), head.begin() + head_rows);
  const size_t shown = std::min(locks.size(), lock_rows);
  out.insert(out.end(), locks.begin(), locks.begin() + shown);
  if (shown < locks.size() && shown > 1) {
    out.back() = {cut("  ... " + std::to_string(locks.size() - shown + 1) +
                      " more (filter with /)")};
  }
  out.insert(out.end(), tail.begin(), tail.begin() + tail_rows);
  if (help) {
    while (out.size() < avail) out.push_back({""});
    out.push_back(*help);
  }
  if (out.size() > height) out.resize(height);
  return out;
}

}  // namespace lockfleet::cli::top
