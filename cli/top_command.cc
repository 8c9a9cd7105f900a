#include "top_command.h"

#include <curses.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "connection_options.h"
#include "jobs_dead_letters.h"
#include "lockfleet/config/redis_url.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"
#include "lockfleet/worker/runner.h"
#include "locks_command.h"
#include "metrics_targets.h"
#include "option_range.h"
#include "signals.h"
#include "top_model.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;

constexpr char kTopDescription[] =
    "A live view of the fleet, refreshed every --interval: the locks held "
    "now with their holders and waiters, acquisitions/s, wake-up causes, "
    "unlock-event delay, per-worker job rates and dead letters.";

constexpr char kTopFooter[] =
    R"(Locks come from Redis (SCAN in batches, never KEYS; at most --limit per
refresh); rates from the workers' /metrics endpoints (--metrics, or the
config's metrics.targets). Without --config or --redis it watches a running
'lockfleet demo' when there is one.

HELD and WAITED are what top has seen: since it first saw that grant (owner
and fencing token) or that waiter; '+' marks those already there when top
started (they began earlier). Rates are over the last interval of each
worker's counters.

Keys: s  sort by the next column (waiters, wait, held, name)
      /  filter lock names (a substring, or a glob with * ? [); Enter
         applies, Esc cancels, an empty filter shows all
      p  pause / resume (space too)
      q  quit (Ctrl-C too)

Exit status:
  0   quit
  2   bad arguments or --config file; no terminal (use --once)
  69  Redis unreachable (--once only: the live view shows the error and
      keeps trying)
  74  the terminal went away (stdin at end of file)
  130 interrupted by SIGINT (143 SIGTERM, 129 SIGHUP)

Examples:
  lockfleet top                          # a running 'lockfleet demo'
  lockfleet top --config /etc/lockfleet/lockfleet.yaml
  lockfleet top --redis redis://10.0.0.5:6379 --metrics 10.0.0.11:9464 \
      --metrics 10.0.0.12:9464 --filter 'product:*'
  lockfleet top --once --config fleet.yaml  # one frame on stdout)";

struct TopArgs {
  ConnectionArgs connection;
  TargetArgs targets;
  std::string interval = "1s";
  int limit = 1000;
  std::string sort = "waiters";
  std::string filter;
  bool once = false;
};

struct Setup {
  Connection connection;
  std::vector<Endpoint> targets;
  milliseconds interval{1000};
  top::ViewOptions view;
  std::string source;
};

// Takes one Observation: Redis first, then every target concurrently.
class Collector {
 public:
  Collector(const Setup& setup, size_t limit)
      : setup_(setup),
        limit_(limit),
        redis_(NewRedis(setup.connection)),
        locks_(redis_, setup.connection.locks) {}

  // With `rethrow`, a Redis failure is thrown instead of observed. Returns
  // early (with what it has) once `stopped` is set.
  top::Observation Collect(bool rethrow = false,
                           const std::atomic<bool>* stopped = nullptr) {
    top::Observation o;
    try {
      HeldLocks held = ScanHeldLocks(
          *redis_, locks_, setup_.connection.locks.key_prefix, "*", limit_,
          [stopped] { return stopped != nullptr && stopped->load(); });
      for (auto& [name, info] : held.locks) {
        o.locks.push_back({std::move(name), std::move(info)});
      }
      o.locks_truncated = held.truncated;
      o.dead_letters =
          Checked(redis_->Execute(
                      {"LLEN", worker::JobRunner::DeadLetterKey(
                                   setup_.connection.locks.key_prefix)}),
                  "reading the dead-letter list's length")
              .integer;
    } catch (const Error& e) {
      if (rethrow) throw;
      o.redis_error = std::string(ErrorCodeName(e.code())) + ": " + e.what();
    } catch (const std::exception& e) {  // never end the view on this
      if (rethrow) throw;
      o.redis_error = std::string("internal: ") + e.what();
    }
    // A worker busy enough to answer slowly is not down: 2 s, whatever the
    // interval (a refused connection fails at once anyway).
    const std::vector<Scrape> scrapes =
        ScrapeEach(setup_.targets, milliseconds(2000));
    for (size_t i = 0; i < scrapes.size(); ++i) {
      top::WorkerScrape w;
      w.target = setup_.targets[i].address;
      w.ok = scrapes[i].ok;
      w.error = scrapes[i].error;
      w.samples = scrapes[i].samples;
      o.workers.push_back(std::move(w));
    }
    o.at = top::Clock::now();
    return o;
  }

 private:
  const Setup& setup_;
  size_t limit_;
  std::shared_ptr<RedisClient> redis_;
  LockClient locks_;
};

std::string WallClock() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof(text), "%H:%M:%S", &tm);
  return text;
}

int RunOnce(const Setup& setup, Collector& collector) {
  top::Model model;
  model.Observe(collector.Collect(/*rethrow=*/true));
  if (!setup.targets.empty()) {  // a second look, for rates
    std::this_thread::sleep_for(setup.interval);
    model.Observe(collector.Collect(/*rethrow=*/true));
  }
  const top::Frame frame = model.View(setup.view);
  for (const top::Line& line : top::Render(frame, setup.view,
                                           {.source = setup.source,
                                           .clock = WallClock(),
                                           .width = 160,
                                           .height = 100'000,
                                           .interactive = false})) {
    std::cout << line.text << "\n";
  }
  std::cout << std::flush;
  return kExitOk;
}

// The terminal, restored however the view ends.
class Screen {
 public:
  Screen() {
    set_escdelay(25);
    screen_ = newterm(nullptr, stdout, stdin);
    if (screen_ == nullptr) {
      throw UsageError(
          "cannot use the terminal (TERM=" +
          std::string(std::getenv("TERM") ? std::getenv("TERM") : "") +
          "); use --once");
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    timeout(100);
  }
  ~Screen() {
    endwin();
    delscreen(screen_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  void Draw(const std::vector<top::Line>& lines, const std::string& prompt) {
    erase();
    for (size_t i = 0; i < lines.size() && static_cast<int>(i) < LINES; ++i) {
      if (lines[i].heading) attron(A_BOLD);
      mvaddnstr(static_cast<int>(i), 0, lines[i].text.c_str(), COLS);
      if (lines[i].heading) attroff(A_BOLD);
    }
    if (!prompt.empty()) {
      move(LINES - 1, 0);
      clrtoeol();
      attron(A_REVERSE);
      mvaddnstr(LINES - 1, 0, prompt.c_str(), COLS);
      attroff(A_REVERSE);
    }
    refresh();
  }

 private:
  SCREEN* screen_ = nullptr;
};

// RunLive's status when stdin stopped answering (EX_IOERR).
constexpr int kExitTerminalGone = 74;

int RunLive(const Setup& setup, Collector& collector, SignalWatcher& signals) {
  std::atomic<int> signal{0};
  ScopedSignalHandler handler(signals, [&](int s) { signal.store(s); });

  // The collector thread takes observations; this thread draws and reads
  // keys, so a slow Redis or worker never freezes the keys.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<top::Observation> fresh;  // guarded by mu
  bool paused = false, stop = false;      // guarded by mu
  std::atomic<bool> stopping{false};      // ends a collection under way
  std::thread thread([&] {
    // ncurses' SIGTSTP and SIGWINCH handlers must run on the drawing
    // thread; the scrape threads started from here inherit this mask.
    sigset_t terminal;
    sigemptyset(&terminal);
    sigaddset(&terminal, SIGTSTP);
    sigaddset(&terminal, SIGWINCH);
    pthread_sigmask(SIG_BLOCK, &terminal, nullptr);
    std::unique_lock lock(mu);
    while (!stop) {
      if (!paused) {
        lock.unlock();
        top::Observation o;
        try {
          o = collector.Collect(/*rethrow=*/false, &stopping);
        } catch (const std::exception& e) {  // e.g. no thread for a scrape
          o.at = top::Clock::now();
          o.redis_error = std::string("internal: ") + e.what();
        }
        lock.lock();
        fresh = std::move(o);
      }
      cv.wait_for(lock, setup.interval, [&] { return stop; });
    }
  });
  struct Join {
    std::thread& thread;
    std::mutex& mu;
    std::condition_variable& cv;
    bool& stop;
    std::atomic<bool>& stopping;
    ~Join() {
      stopping.store(true);
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_all();
      thread.join();
    }
  } join{thread, mu, cv, stop, stopping};

  top::Model model;
  top::ViewOptions view = setup.view;
  bool editing = false;
  std::string edit;
  bool observed = false;
  std::string taken_at;
  int dead_reads = 0;
  Screen screen;
  while (signal.load() == 0) {
    {
      std::lock_guard lock(mu);
      // Paused: what was collected meanwhile is dropped, so the screen
      // stays exactly as it was.
      if (fresh && !view.paused) {
        model.Observe(std::move(*fresh));
        observed = true;
        taken_at = WallClock();  // the clock shown is the data's
      }
      fresh.reset();
    }
    std::vector<top::Line> lines;
    if (observed) {
      lines = top::Render(model.View(view), view,
                          {.source = setup.source,
                           .clock = taken_at,
                           .width = COLS,
                           .height = LINES,
                           .interactive = true});
    } else {
      lines = {{"lockfleet top  " + setup.source, true}, {"collecting ..."}};
    }
    screen.Draw(lines, editing ? "filter: " + edit + "_" : "");
    const auto asked = std::chrono::steady_clock::now();
    const int key = getch();
    if (key == ERR) {
      // getch waits up to 100 ms for a key; at once, many times over, means
      // the terminal is gone (EOF or EIO on stdin): do not spin.
      const bool at_once =
          std::chrono::steady_clock::now() - asked < milliseconds(20);
      if (at_once && ++dead_reads > 50) return kExitTerminalGone;
      if (!at_once) dead_reads = 0;
      continue;
    }
    dead_reads = 0;
    if (key == KEY_RESIZE) continue;
    if (editing) {
      if (key == '\n' || key == '\r' || key == KEY_ENTER) {
        view.filter = edit;
        editing = false;
      } else if (key == 27) {  // Esc
        editing = false;
      } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
        if (!edit.empty()) edit.pop_back();
      } else if (key >= 0x20 && key < 0x7f && edit.size() < 200) {
        edit += static_cast<char>(key);
      }
      continue;
    }
    switch (key) {
      case 'q':
      case 'Q':
        return kExitOk;
      case 's':
      case 'S':
        view.sort = top::NextSortKey(view.sort);
        break;
      case '/':
        editing = true;
        edit = view.filter;
        break;
      case 'p':
      case 'P':
      case ' ': {
        std::lock_guard lock(mu);
        paused = !paused;
        view.paused = paused;
        break;
      }
      default:
        break;
    }
  }
  return kExitSignalBase + signal.load();
}

int RunTop(const TopArgs& args, const Context& context) {
  Setup setup;
  setup.interval = ParseDurationOption("--interval", args.interval);
  if (setup.interval < milliseconds(200) ||
      setup.interval > milliseconds(60'000)) {
    throw UsageError("--interval " + Quoted(args.interval) +
                     ": must be 200ms..1m");
  }
  CheckRange("--limit", args.limit, 1, 100'000);
  const std::optional<top::SortKey> sort = top::ParseSortKey(args.sort);
  if (!sort) {
    throw UsageError("--sort " + Quoted(args.sort) +
                     ": expected waiters, wait, held or name");
  }
  setup.view.sort = *sort;
  setup.view.filter = args.filter;
  if (!args.once &&
      (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0)) {
    throw UsageError(
        "the live view needs a terminal on stdin and stdout; --once prints "
        "one frame");
  }
  int status = kExitOk;
  std::optional<Connection> connection = Connect(args.connection, &status);
  if (!connection) return status;
  setup.connection = std::move(*connection);
  setup.targets = ResolveTargets(args.targets, setup.connection.config);
  std::string url = setup.connection.redis.url;
  try {
    url = ParseRedisUrl(url).Redacted();
  } catch (const Error&) {
    url = config::RedactRedisUrl(url);  // the Collector refuses it below
  }
  setup.source = "redis " + url + " (" + setup.connection.redis_source + ")  " +
                 std::to_string(setup.targets.size()) +
                 (setup.targets.size() == 1 ? " worker" : " workers");
  return Guarded(setup.connection, [&] {
    Collector collector(setup, static_cast<size_t>(args.limit));
    if (args.once) return RunOnce(setup, collector);
    const int status = RunLive(setup, collector, context.signals);
    if (status == kExitTerminalGone) {
      PrintError("the terminal went away (stdin gives no input)");
    }
    return status;
  });
}

}  // namespace

Subcommand AddTopCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("top", kTopDescription);
  formatter.SetSynopsis(
      app,
      "[--config FILE | --redis URL] [--metrics HOST:PORT]... "
      "[--interval D] [--sort KEY] [--filter TEXT] [--once]");
  app->footer(kTopFooter);
  auto args = std::make_shared<TopArgs>();
  args->connection.discover_demo = true;
  AddConnectionOptions(*app, args->connection, /*kafka=*/false);
  AddTargetOption(*app, args->targets);
  app->add_option("--interval", args->interval,
                  "Time between refreshes (200ms..1m). Default: 1s")
      ->type_name("D");
  app->add_option("--limit", args->limit,
                  "Locks read from Redis per refresh (1..100000). Default: "
                  "1000")
      ->type_name("N");
  app->add_option("--sort", args->sort,
                  "waiters, wait, held or name. Default: waiters")
      ->type_name("KEY");
  app->add_option("--filter", args->filter,
                  "Only lock names containing TEXT (a glob when it has * ? "
                  "or [)")
      ->type_name("TEXT");
  app->add_flag("--once", args->once,
                "Print one frame to stdout and exit (two looks --interval "
                "apart, for rates); no terminal needed");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context& context) {
    return RunTop(*args, context);
  };
  return subcommand;
}

}  // namespace lockfleet::cli
