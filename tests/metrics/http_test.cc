// The /metrics and /healthz servers, and the HttpGet client, on loopback.
#include "lockfleet/metrics/http.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/metrics/metrics.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A loopback TCP socket bound to a free port, listening when `listen` is
// set but never accepting.
struct Socket {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  explicit Socket(bool listening) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        (listening && listen(fd, 4) != 0)) {
      throw std::runtime_error("test socket setup failed");
    }
    port = ntohs(a.sin_port);
  }
  ~Socket() { close(fd); }
};

// Throws unless `f` throws Error(kInvalidArgument); returns its message.
template <typename F>
std::string InvalidArgumentMessage(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no Error(kInvalidArgument)";
  return "";
}

TEST(MetricsServer, ServesTheExpositionOnAPortItPicked) {
  auto metrics = std::make_shared<Metrics>();
  metrics->lock_observer()->OnWaiting(+3);
  MetricsServer server(metrics, "127.0.0.1:0");
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.url(),
            "http://127.0.0.1:" + std::to_string(server.port()) + "/metrics");

  const HttpResponse r =
      HttpGet("127.0.0.1", server.port(), "/metrics", seconds(10));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(SumSamples(ParseExposition(r.body), "lockfleet_lock_waiters"), 3);
}

TEST(MetricsServer, EachScrapeSeesTheCurrentValues) {
  auto metrics = std::make_shared<Metrics>();
  MetricsServer server(metrics, "localhost:0");
  metrics->lock_observer()->OnRenewal(2, false);
  const HttpResponse r =
      HttpGet("localhost", server.port(), "/metrics", seconds(10));
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(
      SumSamples(ParseExposition(r.body), "lockfleet_lock_renewals_total"), 2);
}

TEST(MetricsServer, OtherPathsAreNotFound) {
  MetricsServer server(std::make_shared<Metrics>(), "127.0.0.1:0");
  EXPECT_EQ(HttpGet("127.0.0.1", server.port(), "/", seconds(10)).status, 404);
  EXPECT_EQ(
      HttpGet("127.0.0.1", server.port(), "/metrics/x", seconds(10)).status,
      404);
}

TEST(MetricsServer, StopsPromptlyAfterServing) {
  // A server that polls its accept loop could take seconds to notice.
  auto server =
      std::make_unique<MetricsServer>(std::make_shared<Metrics>(), "0.0.0.0:0");
  ASSERT_EQ(
      HttpGet("127.0.0.1", server->port(), "/metrics", seconds(10)).status,
      200);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
}

TEST(MetricsServer, ABusyPortFailsWithInvalidArgument) {
  auto metrics = std::make_shared<Metrics>();
  MetricsServer first(metrics, "127.0.0.1:0");
  const std::string message = InvalidArgumentMessage([&] {
    MetricsServer second(metrics, "127.0.0.1:" + std::to_string(first.port()));
  });
  EXPECT_TRUE(Contains(message, "in use")) << message;
  EXPECT_TRUE(Contains(message, std::to_string(first.port()))) << message;
}

TEST(MetricsServer, MalformedAddressesFailWithInvalidArgument) {
  auto metrics = std::make_shared<Metrics>();
  for (const char* listen :
       {"", "9464", ":9464", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x",
        "::1:9464", "[::1", "[::1]9464", "[nothost]:1",
        "no-such-host.invalid:0"}) {
    const std::string message =
        InvalidArgumentMessage([&] { MetricsServer server(metrics, listen); });
    EXPECT_TRUE(Contains(message, listen)) << message;
  }
}

TEST(MetricsServer, AnIpv6AddressServesOrIsRefusedClearly) {
  auto metrics = std::make_shared<Metrics>();
  std::unique_ptr<MetricsServer> server;
  try {
    server = std::make_unique<MetricsServer>(metrics, "[::1]:0");
  } catch (const Error& e) {
    // A host without IPv6: the message must say so.
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_TRUE(Contains(e.what(), "IPv6")) << e.what();
    return;
  }
  EXPECT_EQ(server->url(),
            "http://[::1]:" + std::to_string(server->port()) + "/metrics");
  EXPECT_EQ(HttpGet("::1", server->port(), "/metrics", seconds(10)).status,
            200);
}

TEST(MetricsServer, ConcurrentScrapesWhileObserversFire) {
  auto metrics = std::make_shared<Metrics>();
  MetricsServer server(metrics, "127.0.0.1:0");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    auto observer = metrics->lock_observer();
    for (int i = 0; !stop; ++i) {
      observer->OnAcquire("c" + std::to_string(i % 20),
                          AcquireStatus::kAcquired, milliseconds(1), 1, false);
    }
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 3; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (HttpGet("127.0.0.1", server.port(), "/metrics", seconds(10))
                .status == 200)
          ++ok;
      }
    });
  }
  for (auto& s : scrapers) s.join();
  stop = true;
  writer.join();
  EXPECT_EQ(ok.load(), 30);
}

TEST(HealthServer, AnswersOkWhenHealthy) {
  HealthServer server([] { return HealthReport{true, "ok\n"}; }, "127.0.0.1:0");
  EXPECT_EQ(server.url(),
            "http://127.0.0.1:" + std::to_string(server.port()) + "/healthz");
  const HttpResponse r =
      HttpGet("127.0.0.1", server.port(), "/healthz", seconds(10));
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, "ok\n");
}

TEST(HealthServer, Answers503WithTheDetailWhenUnhealthy) {
  HealthServer server(
      [] {
        return HealthReport{false, "redis unreachable"};
      },
      "127.0.0.1:0");
  const HttpResponse r =
      HttpGet("127.0.0.1", server.port(), "/healthz", seconds(10));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "redis unreachable");
}

TEST(HealthServer, Answers503WhenTheCheckThrows) {
  HealthServer server(
      []() -> HealthReport { throw std::runtime_error("boom"); },
      "127.0.0.1:0");
  const HttpResponse r =
      HttpGet("127.0.0.1", server.port(), "/healthz", seconds(10));
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(Contains(r.body, "boom")) << r.body;
}

TEST(HealthServer, ABusyPortFailsWithInvalidArgument) {
  Socket taken(/*listening=*/true);
  InvalidArgumentMessage([&] {
    HealthServer server(
        [] {
          return HealthReport{true, ""};
        },
        "127.0.0.1:" + std::to_string(taken.port));
  });
}

TEST(HttpGet, ARefusedConnectionIsAResult) {
  uint16_t port = 0;
  {
    Socket closed(/*listening=*/false);
    port = closed.port;
  }
  const HttpResponse r = HttpGet("127.0.0.1", port, "/metrics", seconds(10));
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(Contains(r.error, "refused")) << r.error;
}

TEST(HttpGet, AServerThatNeverAnswersTimesOut) {
  Socket silent(/*listening=*/true);  // the kernel accepts; nobody reads
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r =
      HttpGet("127.0.0.1", silent.port, "/metrics", milliseconds(200));
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(Contains(r.error, "timed out")) << r.error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

TEST(HttpGet, AnUnknownHostIsAResult) {
  const HttpResponse r =
      HttpGet("no-such-host.invalid", 80, "/metrics", seconds(10));
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
}

TEST(HttpGet, BadArgumentsThrow) {
  InvalidArgumentMessage([] { HttpGet("", 80, "/", seconds(1)); });
  InvalidArgumentMessage([] { HttpGet("127.0.0.1", 0, "/", seconds(1)); });
  InvalidArgumentMessage([] { HttpGet("127.0.0.1", 80, "x", seconds(1)); });
}

}  // namespace
}  // namespace lockfleet::metrics::testing
