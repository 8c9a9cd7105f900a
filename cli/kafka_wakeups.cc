#include "kafka_wakeups.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include "command.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet::cli {
namespace {

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

// What is wrong with one "HOST[:PORT]" entry, or "".
std::string CheckEntry(std::string_view entry) {
  if (entry.empty()) return "empty server address";
  if (std::any_of(entry.begin(), entry.end(), [](unsigned char c) {
        return std::isspace(c) != 0 || std::iscntrl(c) != 0;
      })) {
    return "server address " + Quoted(entry) + " contains whitespace";
  }
  // librdkafka also takes a "PLAINTEXT://"-style prefix.
  if (const size_t scheme = entry.find("://"); scheme != std::string::npos) {
    entry.remove_prefix(scheme + 3);
  }
  std::string_view port;
  if (entry.starts_with("[")) {
    const size_t close = entry.find(']');
    if (close == std::string_view::npos) {
      return "unclosed '[' in " + Quoted(entry);
    }
    const std::string_view rest = entry.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(":")) return "expected ':PORT' after ']'";
      port = rest.substr(1);
    }
    if (close == 1) return "empty host in " + Quoted(entry);
  } else if (const size_t colon = entry.rfind(':');
             colon != std::string_view::npos) {
    if (colon == 0) return "empty host in " + Quoted(entry);
    port = entry.substr(colon + 1);
  } else {
    return "";
  }
  if (!AllDigits(port) || port.size() > 5 || std::stoi(std::string(port)) < 1 ||
      std::stoi(std::string(port)) > 65535) {
    return "port " + Quoted(port) + " must be a number 1..65535";
  }
  return "";
}

void LogToStderr(notifier::LogLevel level, std::string_view message) {
  switch (level) {
    case notifier::LogLevel::kDebug:
    case notifier::LogLevel::kInfo:
      return;
    case notifier::LogLevel::kWarning:
      PrintError("kafka warning: " + std::string(message));
      return;
    case notifier::LogLevel::kError:
      PrintError("kafka error: " + std::string(message));
      return;
  }
}

}  // namespace

std::string CheckBootstrap(std::string_view bootstrap) {
  if (bootstrap.empty()) return "no server address";
  size_t begin = 0;
  while (true) {
    const size_t comma = bootstrap.find(',', begin);
    const std::string problem = CheckEntry(bootstrap.substr(
        begin, comma == std::string_view::npos ? comma : comma - begin));
    if (!problem.empty()) return problem;
    if (comma == std::string_view::npos) return "";
    begin = comma + 1;
  }
}

std::shared_ptr<notifier::KafkaNotifier> StartKafka(
    notifier::KafkaOptions options) {
  if (const std::string problem = CheckBootstrap(options.bootstrap);
      !problem.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "bad Kafka bootstrap " + Quoted(options.bootstrap) + ": " +
                    problem + " (expected HOST:PORT[,HOST:PORT...])");
  }
  if (!options.log) options.log = LogToStderr;
  return std::make_shared<notifier::KafkaNotifier>(std::move(options));
}

std::shared_ptr<notifier::KafkaNotifier> StartOptionalKafka(
    const std::optional<notifier::KafkaOptions>& options,
    const std::string& source, std::string_view without, bool* bad) {
  *bad = false;
  if (!options) return nullptr;
  try {
    return StartKafka(*options);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) {
      PrintError(source + ": " + e.what());
      *bad = true;
    } else {
      PrintError("warning: cannot start the Kafka client (" +
                 std::string(e.what()) + "); " + std::string(without));
    }
    return nullptr;
  }
}

int FinishWithKafka(std::shared_ptr<notifier::KafkaNotifier> notifier,
                    int status, std::chrono::milliseconds budget) {
  if (notifier != nullptr && !ShutDownKafka(std::move(notifier), budget)) {
    PrintError("warning: the Kafka client did not shut down within " +
               config::FormatDuration(budget) + "; exiting without it");
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return status;
}

bool ShutDownKafka(std::shared_ptr<notifier::KafkaNotifier> notifier,
                   std::chrono::milliseconds budget) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread destroyer(
      [notifier = std::move(notifier), done = std::move(done)]() mutable {
        notifier.reset();
        done.set_value();
      });
  if (finished.wait_for(budget) == std::future_status::ready) {
    destroyer.join();
    return true;
  }
  destroyer.detach();
  return false;
}

ScopedSubscription::ScopedSubscription(notifier::KafkaNotifier* notifier,
                                       LockClient* client)
    : notifier_(notifier), client_(client) {
  if (notifier_ != nullptr) notifier_->Subscribe(client_);
}

ScopedSubscription::~ScopedSubscription() {
  if (notifier_ != nullptr) notifier_->Unsubscribe(client_);
}

}  // namespace lockfleet::cli
