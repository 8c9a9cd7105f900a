// `lockfleet top` as a person uses it: a running `lockfleet demo` (found
// without flags, through its registration), `top` started in a tmux pane,
// keys sent with send-keys, the pane read back with capture-pane and what
// is on the screen asserted. Plus --once and the errors, without tmux.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/shell.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kLease{120000};

// A tmux server of its own (its own socket), one session running COMMAND in
// a 150x45 pane; killed on destruction.
class Tmux {
 public:
  Tmux(const TempDir& dir, const std::string& command)
      : socket_(dir.File("tmux.sock")) {
    const ShellResult result =
        Run("-f /dev/null new-session -d -s top -x 150 -y 45 " +
            ShellQuote(command));
    started_ = result.status == 0;
    if (!started_) error_ = result.output;
  }
  ~Tmux() { Run("kill-server"); }

  bool started() const { return started_; }
  const std::string& error() const { return error_; }

  std::string Capture() { return Run("capture-pane -p -t top").output; }
  // Keys as tmux names them ("s", "Enter", "Escape", "C-c").
  void Keys(const std::string& keys) { Run("send-keys -t top " + keys); }
  void Type(const std::string& text) {
    Run("send-keys -t top -l " + ShellQuote(text));
  }
  void Resize(int width, int height) {
    Run("resize-window -t top -x " + std::to_string(width) + " -y " +
        std::to_string(height));
  }

  // Polls the pane until `ok` accepts it (up to `timeout`); returns the
  // last capture either way, and whether it was accepted.
  bool WaitFor(const std::function<bool(const std::string&)>& ok,
               std::string* screen, milliseconds timeout = seconds(60)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      *screen = Capture();
      if (ok(*screen)) return true;
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(200));
    }
  }

 private:
  // `tmux ARGS` against this server.
  ShellResult Run(const std::string& args) const {
    return RunShell("tmux -S " + ShellQuote(socket_) + " " + args);
  }

  std::string socket_;
  bool started_ = false;
  std::string error_;
};

bool Has(const std::string& screen, const std::string& text) {
  return screen.find(text) != std::string::npos;
}

// (No std::regex here: GCC 12 warns inside it under the sanitizers.)
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::stringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The screen's row for lock `name` split into words.
std::vector<std::string> Row(const std::string& screen,
                             const std::string& name) {
  for (const std::string& line : SplitLines(screen)) {
    if (line.rfind(name + " ", 0) == 0) return Words(line);
  }
  return {};
}

// "HH:MM:SS" from the header line, or "".
std::string HeaderClock(const std::string& screen) {
  const std::string head = "lockfleet top  ";
  const size_t at = screen.find(head);
  if (at == std::string::npos || screen.size() < at + head.size() + 8) {
    return "";
  }
  const std::string clock = screen.substr(at + head.size(), 8);
  for (char c : clock) {
    if (!(c >= '0' && c <= '9') && c != ':') return "";
  }
  return clock;
}

// The STATE word of the worker row for `target` ("HOST:PORT"), or "".
std::string WorkerState(const std::string& screen, const std::string& target) {
  for (const std::string& line : SplitLines(screen)) {
    const std::vector<std::string> words = Words(line);
    if (words.size() >= 2 && words[0] == target) return words[1];
  }
  return "";
}

class TopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RunShell("command -v tmux").output.empty()) {
      GTEST_SKIP() << "tmux not found (scripts/setup.sh installs it)";
    }
  }
};

TEST_F(TopTest, ALiveViewOfARunningDemoAnswersItsKeys) {
  TempDir runtime;  // the demo registers itself here
  const std::string env = "XDG_RUNTIME_DIR=" + runtime.path();
  CliProcess demo({"demo", "--workers", "2", "--threads", "2", "--jobs",
                   "100000", "--timeout", "900"},
                  {env});
  struct StopDemo {
    CliProcess& demo;
    ~StopDemo() {
      demo.Signal(SIGINT);
      demo.Wait(seconds(60));
    }
  } stop_demo{demo};
  // Its redis-server, from "  redis-server  unix://..." once the workers
  // are up ("watch it" follows them).
  std::string redis_url;
  const auto deadline = Clock::now() + seconds(120);
  while (Clock::now() < deadline && demo.Running()) {
    const std::string out = demo.Stdout();
    const size_t at = out.find("redis-server  unix://");
    if (Has(out, "watch it") && at != std::string::npos) {
      const size_t start = at + std::string("redis-server  ").size();
      redis_url = out.substr(start, out.find_first_of(" \n", start) - start);
      break;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_FALSE(redis_url.empty()) << demo.Stdout() << demo.Stderr();

  // A lock of our own among the demo's: held, with one waiter queued.
  auto redis = std::make_shared<RedisClient>(RedisOptions{.url = redis_url});
  LockClient holder(redis);
  AcquireResult held = holder.TryAcquire("report:nightly", {.lease = kLease});
  ASSERT_TRUE(held);
  std::stop_source stop_waiter;
  auto waiter = std::async(std::launch::async, [&] {
    LockClient other(redis);
    other.AcquireFor("report:nightly", seconds(120),
                     {.stop = stop_waiter.get_token()});
  });
  struct StopWaiter {
    std::stop_source& stop;
    std::future<void>& waiter;
    ~StopWaiter() {
      stop.request_stop();
      waiter.wait();
    }
  } stop_waiter_at_end{stop_waiter, waiter};

  TempDir dir;
  Tmux tmux(dir, "env " + env + " " + LockfleetBinary() +
                     " top --interval 500ms; echo EXIT=$?; stty -a; sleep 600");
  ASSERT_TRUE(tmux.started()) << tmux.error();
  std::string screen;

  // The demo found without flags: its two workers up, its product locks
  // acquired (a class row with a rate), our lock with its holder and waiter.
  ASSERT_TRUE(tmux.WaitFor(
      [](const std::string& s) {
        std::vector<std::string> row = Row(s, "report:nightly");
        int up = 0;
        for (const std::string& line : SplitLines(s)) {
          const std::vector<std::string> words = Words(line);
          up += words.size() >= 2 && words[0].starts_with("127.0.0.1:") &&
                words[1] == "up";
        }
        return row.size() >= 7 && up == 2 && Has(s, "\nproduct ") &&
               Has(s, "2 workers");
      },
      // The demo first waits for its consumer group, then produces: slow
      // under the sanitizers.
      &screen, seconds(240)))
      << screen;
  std::vector<std::string> row = Row(screen, "report:nightly");
  EXPECT_EQ(row[1], held.lease.owner()) << screen;
  EXPECT_EQ(row[row.size() - 2], "1") << screen;  // WAITERS
  EXPECT_TRUE(Has(screen, "s sort: waiters")) << screen;
  EXPECT_TRUE(Has(screen, "WAITERS*")) << screen;

  // s: the next sort column.
  tmux.Keys("s");
  EXPECT_TRUE(tmux.WaitFor(
      [](const std::string& s) {
        return Has(s, "s sort: wait ") && Has(s, "WAITED*");
      },
      &screen, seconds(20)))
      << screen;

  // /: a filter typed at the prompt; only matching locks stay.
  tmux.Keys("/");
  tmux.Type("nightly");
  EXPECT_TRUE(tmux.WaitFor(
      [](const std::string& s) { return Has(s, "filter: nightly_"); }, &screen,
      seconds(20)))
      << screen;
  tmux.Keys("Enter");
  EXPECT_TRUE(tmux.WaitFor(
      [](const std::string& s) {
        bool product_lock = false;
        for (const std::string& line : SplitLines(s)) {
          product_lock = product_lock || line.rfind("product:", 0) == 0;
        }
        return Has(s, "/ filter: nightly") && !product_lock &&
               Row(s, "report:nightly").size() >= 7;
      },
      &screen, seconds(20)))
      << screen;

  // p: paused — the header says so and its clock stops.
  tmux.Keys("p");
  ASSERT_TRUE(
      tmux.WaitFor([](const std::string& s) { return Has(s, "[paused]"); },
                   &screen, seconds(20)))
      << screen;
  const std::string paused_at = HeaderClock(screen);
  ASSERT_FALSE(paused_at.empty()) << screen;
  std::this_thread::sleep_for(milliseconds(2500));
  screen = tmux.Capture();
  EXPECT_EQ(HeaderClock(screen), paused_at) << screen;
  tmux.Keys("p");
  EXPECT_TRUE(tmux.WaitFor(
      [&](const std::string& s) {
        return !Has(s, "[paused]") && HeaderClock(s) != paused_at;
      },
      &screen, seconds(20)))
      << screen;

  // A smaller terminal: redrawn to fit, the key help still on the last line.
  tmux.Resize(100, 20);
  EXPECT_TRUE(tmux.WaitFor(
      [](const std::string& s) {
        const std::vector<std::string> lines = SplitLines(s);
        return lines.size() == 20 && lines.back().rfind("s sort:", 0) == 0;
      },
      &screen, seconds(20)))
      << screen;

  // q: quits with status 0 and gives the terminal back as it was: line
  // editing and echo on again (stty -a runs after it). stty writes a line at
  // a time, so wait for the line of local modes (icanon and echo share it),
  // not just its first line.
  tmux.Keys("q");
  EXPECT_TRUE(tmux.WaitFor(
      [](const std::string& s) {
        const size_t exit = s.find("EXIT=0");
        return exit != std::string::npos &&
               s.find("icanon", exit) != std::string::npos;
      },
      &screen, seconds(20)))
      << screen;
  const std::string modes = screen.substr(screen.find("EXIT=0"));
  EXPECT_TRUE(Has(modes, " icanon") && !Has(modes, "-icanon")) << modes;
  EXPECT_TRUE(Has(modes, " echo ") && !Has(modes, "-echo ")) << modes;
}

TEST_F(TopTest, CtrlCEndsTheViewWithTheSignalsStatus) {
  RedisServer server;
  TempDir dir;
  Tmux tmux(dir, std::string(LockfleetBinary()) + " top --redis " +
                     server.url() + "; echo EXIT=$?; sleep 600");
  ASSERT_TRUE(tmux.started()) << tmux.error();
  std::string screen;
  ASSERT_TRUE(tmux.WaitFor(
      [](const std::string& s) { return Has(s, "(no lock held)"); }, &screen))
      << screen;
  // No metrics targets: said, not an empty table.
  EXPECT_TRUE(Has(screen, "0 workers")) << screen;
  EXPECT_TRUE(Has(screen, "no metrics: give --metrics")) << screen;
  tmux.Keys("C-c");
  EXPECT_TRUE(
      tmux.WaitFor([](const std::string& s) { return Has(s, "EXIT=130"); },
                   &screen, seconds(20)))
      << screen;
}

TEST(TopOnce, PrintsOneFrameWithTheHeldLocks) {
  RedisServer server;
  auto redis = std::make_shared<RedisClient>(RedisOptions{.url = server.url()});
  LockClient holder(redis);
  AcquireResult held = holder.TryAcquire("orders/42", {.lease = kLease});
  ASSERT_TRUE(held);
  const CliResult result = RunCli({"top", "--once", "--redis", server.url()});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out.rfind("lockfleet top  ", 0), 0u) << result.out;
  EXPECT_TRUE(Has(result.out, "locks held 1 ")) << result.out;
  const std::vector<std::string> row = Row(result.out, "orders/42");
  ASSERT_GE(row.size(), 7u) << result.out;
  EXPECT_EQ(row[1], held.lease.owner());
  EXPECT_EQ(row[4], std::to_string(held.lease.fence())) << result.out;
  EXPECT_FALSE(Has(result.out, "s sort:")) << "no key help without keys";
}

TEST(TopOnce, BadArgumentsAndNoTerminalAreUsageErrors) {
  RedisServer server;
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"top", "--once", "--interval", "10ms"},
        {"top", "--once", "--interval", "soon"},
        {"top", "--once", "--sort", "size"},
        {"top", "--once", "--limit", "0"},
        {"top", "--once", "--metrics", "localhost"},
        {"top", "--once", "--metrics", "host:0"}}) {
    std::vector<std::string> args = bad;
    args.insert(args.begin() + 1, {"--redis", server.url()});
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.status, 2) << bad.back() << ": " << result.err;
    EXPECT_TRUE(Has(result.err, "lockfleet: ")) << result.err;
  }
  // Not a terminal: the live view refuses and points at --once.
  const CliResult piped = RunCli({"top", "--redis", server.url()});
  EXPECT_EQ(piped.status, 2) << piped.err;
  EXPECT_TRUE(Has(piped.err, "--once")) << piped.err;
}

TEST(TopOnce, UnreachableRedisIsExit69WithoutThePassword) {
  const int port = UnusedTcpPort();
  const CliResult result =
      RunCli({"top", "--once", "--redis",
              "redis://admin:s3cret-pw@127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(result.status, 69) << result.err;
  EXPECT_TRUE(Has(result.err, "127.0.0.1:" + std::to_string(port)))
      << result.err;
  EXPECT_FALSE(Has(result.err, "s3cret-pw")) << result.err;
}

TEST(TopOnce, AWorkerThatDoesNotAnswerIsShownDown) {
  RedisServer server;
  const int port = UnusedTcpPort();
  const CliResult result =
      RunCli({"top", "--once", "--interval", "200ms", "--redis", server.url(),
              "--metrics", "127.0.0.1:" + std::to_string(port)});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(WorkerState(result.out, "127.0.0.1:" + std::to_string(port)),
            "down")
      << result.out;
}

}  // namespace
}  // namespace lockfleet::testing
