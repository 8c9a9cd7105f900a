// Fuzzes LoadString, the deployment-file loader (`lockfleet config check`,
// `lockfleet worker --config`), on arbitrary text.
//
// Property: it returns a config or throws ConfigErrors (every diagnostic
// naming a position) — never another exception, a crash or a hang. ${VAR}
// references resolve against an empty environment, so runs are repeatable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "lockfleet/config/config.h"
#include "lockfleet/config/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lockfleet::config::LoadOptions options;
  options.env = [](const std::string&) -> std::optional<std::string> {
    return std::nullopt;
  };
  try {
    (void)lockfleet::config::LoadString(text, "fuzz.yaml", options);
  } catch (const lockfleet::config::ConfigErrors& e) {
    if (e.errors().empty()) std::abort();
  }
  return 0;
}
