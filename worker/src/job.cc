#include "lockfleet/worker/job.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace lockfleet::worker {
namespace {

using config::Scalar;
using nlohmann::json;

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxLockBytes = 1024;
constexpr size_t kMaxTypeBytes = 128;
constexpr size_t kMaxShownBytes = 64;  // of a bad value, in an error

std::string CheckField(std::string_view field, std::string_view value,
                       size_t max_bytes) {
  if (value.empty()) {
    return "field '" + std::string(field) + "': expected a non-empty string";
  }
  if (value.size() > max_bytes) {
    return "field '" + std::string(field) + "': longer than " +
           std::to_string(max_bytes) + " bytes";
  }
  if (field == "lock" && value.front() == '}') {
    // lockcore refuses it (its keys' hash tag would be empty): say so here,
    // where the job is refused with its reason, not at the acquire.
    return "field 'lock': must not start with '}'";
  }
  return "";
}

std::string RequireString(const json& object, const char* field,
                          size_t max_bytes) {
  const auto it = object.find(field);
  if (it == object.end()) {
    throw JobError(std::string("field '") + field + "': missing");
  }
  if (!it->is_string()) {
    throw JobError(std::string("field '") + field +
                   "': expected a string, found " + it->type_name());
  }
  std::string value = it->get<std::string>();
  if (std::string problem = CheckField(field, value, max_bytes);
      !problem.empty()) {
    throw JobError(problem);
  }
  return value;
}

Scalar ToScalar(const std::string& key, const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return {Scalar::Type::kString, value.get<std::string>()};
    case json::value_t::boolean:
      return {Scalar::Type::kBool, value.get<bool>() ? "true" : "false"};
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return {Scalar::Type::kInteger, value.dump()};
    case json::value_t::number_float:
      return {Scalar::Type::kNumber, value.dump()};
    default:
      throw JobError("payload field '" + key +
                     "': expected a string, number or boolean, found " +
                     value.type_name());
  }
}

json FromScalar(const Scalar& scalar) {
  switch (scalar.type) {
    case Scalar::Type::kString:
      return scalar.text;
    case Scalar::Type::kBool:
      return scalar.text == "true";
    case Scalar::Type::kInteger:
    case Scalar::Type::kNumber: {
      json number =
          json::parse(scalar.text, nullptr, /*allow_exceptions=*/false);
      if (!number.is_number()) {
        throw JobError("payload value '" + scalar.text + "' is not a number");
      }
      return number;
    }
  }
  return scalar.text;
}

const Scalar* Find(const Settings& settings, std::string_view key) {
  const auto it = settings.find(std::string(key));
  return it == settings.end() ? nullptr : &it->second;
}

[[noreturn]] void WrongType(std::string_view key, const char* expected,
                            const Scalar& found) {
  throw JobError("'" + std::string(key) + "': expected " + expected +
                 ", found '" + found.text + "'");
}

constexpr int64_t kMaxLimitPermits = 1'000'000;

int64_t LimitInt(const json& limit, const char* field, int64_t low,
                 std::optional<int64_t> fallback) {
  const auto it = limit.find(field);
  if (it == limit.end()) {
    if (fallback) return *fallback;
    throw JobError(std::string("field 'limit.") + field + "': missing");
  }
  if (!it->is_number_integer() || it->get<int64_t>() < low ||
      it->get<int64_t>() > kMaxLimitPermits) {
    throw JobError(std::string("field 'limit.") + field +
                   "': expected an integer " + std::to_string(low) + ".." +
                   std::to_string(kMaxLimitPermits) + ", found " + it->dump());
  }
  return it->get<int64_t>();
}

config::LimitConfig ParseLimit(const json& limit) {
  if (!limit.is_object()) {
    throw JobError(std::string("field 'limit': expected an object, found ") +
                   limit.type_name());
  }
  for (const auto& [key, value] : limit.items()) {
    if (key != "name" && key != "permits" && key != "take") {
      throw JobError("field 'limit." + key +
                     "': unknown (a limit has name, permits and take)");
    }
  }
  config::LimitConfig out;
  try {
    out.name = RequireString(limit, "name", kMaxLockBytes);
  } catch (const JobError& e) {  // "field 'name': ..." -> 'limit.name'
    std::string message = e.what();
    message.replace(0, std::string("field 'name'").size(),
                    "field 'limit.name'");
    throw JobError(message);
  }
  if (out.name.front() == '}') {
    throw JobError("field 'limit.name': must not start with '}'");
  }
  out.permits = static_cast<int>(LimitInt(limit, "permits", 1, std::nullopt));
  out.take = static_cast<int>(LimitInt(limit, "take", 1, 1));
  if (out.take > out.permits) {
    throw JobError("field 'limit.take': " + std::to_string(out.take) +
                   " is more than the limit's " + std::to_string(out.permits) +
                   " permits");
  }
  return out;
}

config::LockMode ParseLockMode(const json& mode) {
  if (mode.is_string()) {
    if (const std::optional<config::LockMode> parsed =
            config::LockModeFromName(mode.get<std::string>())) {
      return *parsed;
    }
  }
  // Shown as JSON, cut short: a record may be megabytes.
  std::string found = mode.dump(-1, ' ', false, json::error_handler_t::replace);
  if (found.size() > kMaxShownBytes) {
    found = found.substr(0, kMaxShownBytes) + "...";
  }
  throw JobError(
      "field 'lock_mode': expected \"read\" or \"write\" (or no lock_mode "
      "for the plain lock), found " +
      found);
}

}  // namespace

Job ParseJob(std::string_view text) {
  json record = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) throw JobError("not JSON");
  if (!record.is_object()) {
    throw JobError(std::string("expected a JSON object, found ") +
                   record.type_name());
  }
  Job job;
  job.id = RequireString(record, "id", kMaxIdBytes);
  job.lock = RequireString(record, "lock", kMaxLockBytes);
  job.type = RequireString(record, "type", kMaxTypeBytes);
  if (const auto payload = record.find("payload"); payload != record.end()) {
    if (!payload->is_object()) {
      throw JobError(
          std::string("field 'payload': expected an object, found ") +
          payload->type_name());
    }
    for (const auto& [key, value] : payload->items()) {
      job.payload[key] = ToScalar(key, value);
    }
  }
  if (const auto limit = record.find("limit"); limit != record.end()) {
    job.limit = ParseLimit(*limit);
  }
  if (const auto mode = record.find("lock_mode"); mode != record.end()) {
    job.lock_mode = ParseLockMode(*mode);
  }
  return job;
}

std::string EncodeJob(const Job& job) {
  for (const auto& [field, value, max] :
       {std::tuple{"id", &job.id, kMaxIdBytes},
        std::tuple{"lock", &job.lock, kMaxLockBytes},
        std::tuple{"type", &job.type, kMaxTypeBytes}}) {
    if (std::string problem = CheckField(field, *value, max);
        !problem.empty()) {
      throw JobError(problem);
    }
  }
  json payload = json::object();
  for (const auto& [key, scalar] : job.payload)
    payload[key] = FromScalar(scalar);
  json record = {{"id", job.id},
                 {"lock", job.lock},
                 {"type", job.type},
                 {"payload", std::move(payload)}};
  if (job.limit) {
    record["limit"] = {{"name", job.limit->name},
                       {"permits", job.limit->permits},
                       {"take", job.limit->take}};
    ParseLimit(record["limit"]);  // nothing unparseable is produced
  }
  if (job.lock_mode) record["lock_mode"] = config::LockModeName(*job.lock_mode);
  // Replace invalid UTF-8 rather than throw: ids come from callers.
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::string> GetString(const Settings& settings,
                                     std::string_view key) {
  const Scalar* scalar = Find(settings, key);
  if (scalar == nullptr) return std::nullopt;
  return scalar->text;  // every scalar has a text form
}

std::optional<int64_t> GetInt(const Settings& settings, std::string_view key) {
  const Scalar* scalar = Find(settings, key);
  if (scalar == nullptr) return std::nullopt;
  if (scalar->type != Scalar::Type::kInteger &&
      scalar->type != Scalar::Type::kString) {
    WrongType(key, "an integer", *scalar);
  }
  try {
    size_t used = 0;
    const long long value = std::stoll(scalar->text, &used);
    if (used == scalar->text.size()) return value;
  } catch (const std::exception&) {
  }
  WrongType(key, "an integer", *scalar);
}

std::optional<bool> GetBool(const Settings& settings, std::string_view key) {
  const Scalar* scalar = Find(settings, key);
  if (scalar == nullptr) return std::nullopt;
  if (scalar->text == "true") return true;
  if (scalar->text == "false") return false;
  WrongType(key, "true or false", *scalar);
}

}  // namespace lockfleet::worker
