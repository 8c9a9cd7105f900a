#include "jobs_dead_letters.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "jobs_support.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"

namespace lockfleet::cli {
namespace {

using json = nlohmann::json;

constexpr int kBatch = 200;  // entries per round trip (each <= ~128 KiB)

// The list's length and one batch, atomically. ARGV: the length at the
// previous batch (-1 before the first), the next unseen index then, the
// batch size. Entries pushed since shift the unseen ones towards the tail.
const Script kReadBatch(R"lua(
local len = redis.call('LLEN', KEYS[1])
local prev = tonumber(ARGV[1])
local start = tonumber(ARGV[2])
if prev >= 0 and len > prev then start = start + (len - prev) end
return {len, start,
        redis.call('LRANGE', KEYS[1], start, start + tonumber(ARGV[3]) - 1)}
)lua");

// The top-level "id", "lock" and "type" strings of a JSON object, read as
// far as the text is JSON: a record cut at 64 KiB still names its id and
// lock (EncodeJob writes the keys in order id, lock, payload, type).
class FieldReader : public json::json_sax_t {
 public:
  std::optional<std::string> id, lock, type;

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(json::number_integer_t) override { return Value(); }
  bool number_unsigned(json::number_unsigned_t) override { return Value(); }
  bool number_float(json::number_float_t, const std::string&) override {
    return Value();
  }
  bool binary(json::binary_t&) override { return Value(); }
  bool string(std::string& value) override {
    if (depth_ == 1 && field_ != nullptr && !*field_) *field_ = value;
    return Value();
  }
  bool start_object(std::size_t) override { return Open(); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }
  bool key(std::string& key) override {
    field_ = nullptr;
    if (depth_ == 1) {
      if (key == "id") field_ = &id;
      if (key == "lock") field_ = &lock;
      if (key == "type") field_ = &type;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) override {
    return false;  // keep what was read before the error
  }

 private:
  bool Value() {
    field_ = nullptr;
    return true;
  }
  bool Open() {
    field_ = nullptr;
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  int depth_ = 0;
  std::optional<std::string>* field_ = nullptr;
};

// The full length a cut text notes ("<64 KiB>... (N bytes in all)"), or
// nullopt when `text` is not cut.
std::optional<size_t> ClippedLength(std::string_view text) {
  constexpr std::string_view kOpen = "... (";
  constexpr std::string_view kClose = " bytes in all)";
  if (text.size() <= worker::JobRunner::kDeadLetterClipBytes + kOpen.size() +
                         kClose.size() ||
      text.substr(worker::JobRunner::kDeadLetterClipBytes, kOpen.size()) !=
          kOpen ||
      !text.ends_with(kClose)) {
    return std::nullopt;
  }
  const std::string_view digits =
      text.substr(worker::JobRunner::kDeadLetterClipBytes + kOpen.size(),
                  text.size() - worker::JobRunner::kDeadLetterClipBytes -
                      kOpen.size() - kClose.size());
  size_t length = 0;
  const auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), length);
  if (ec != std::errc() || end != digits.data() + digits.size() ||
      length <= worker::JobRunner::kDeadLetterClipBytes) {
    return std::nullopt;
  }
  return length;
}

bool IsJob(std::string_view record) {
  try {
    worker::ParseJob(record);
    return true;
  } catch (const worker::JobError&) {
    return false;
  }
}

}  // namespace

DeadLetter ParseDeadLetter(std::string entry, int64_t index) {
  DeadLetter d;
  d.index = index;
  d.entry = std::move(entry);
  const std::string_view e = d.entry;
  const size_t first = e.find('\t');
  const size_t second =
      first == std::string_view::npos ? first : e.find('\t', first + 1);
  if (second == std::string_view::npos) {
    d.reason = d.entry;
    d.problem =
        "not an entry a worker wrote (no '<reason> TAB <worker> TAB "
        "<record>')";
    return d;
  }
  // A job record has no raw tab (EncodeJob escapes it), but a reason can
  // (it quotes lock names and exceptions) and so can a malformed record.
  // When the part after the last tab is a job, or a cut one, it is the
  // record and the reason takes the extra tabs; otherwise the record does.
  const size_t last = e.rfind('\t');
  const std::string_view tail = e.substr(last + 1);
  size_t worker_start = first + 1, record_start = second + 1;
  if (last != second && (ClippedLength(tail) || IsJob(tail))) {
    record_start = last + 1;
    worker_start = e.rfind('\t', last - 1) + 1;
  }
  d.reason = std::string(e.substr(0, worker_start - 1));
  d.worker =
      std::string(e.substr(worker_start, record_start - 1 - worker_start));
  d.record = std::string(e.substr(record_start));
  d.record_bytes = d.record.size();
  if (const std::optional<size_t> full = ClippedLength(d.record)) {
    d.clipped = true;
    d.record_bytes = *full;
  }
  try {
    if (!d.clipped) d.job = worker::ParseJob(d.record);
  } catch (const worker::JobError& error) {
    d.problem = std::string("its record is not a job (") + error.what() + ")";
  }
  if (d.job) {
    d.id = d.job->id;
    d.lock = d.job->lock;
    d.type = d.job->type;
    return d;
  }
  if (d.clipped) {
    d.problem = "its record was cut at 64 KiB when it was dead-lettered (" +
                std::to_string(d.record_bytes) + " bytes in all)";
  }
  FieldReader fields;
  json::sax_parse(d.record, &fields, json::input_format_t::json,
                  /*strict=*/false);
  d.id = std::move(fields.id);
  d.lock = std::move(fields.lock);
  d.type = std::move(fields.type);
  return d;
}

bool DeadLetterFilter::Matches(const DeadLetter& letter) const {
  if (!ids.empty() && (!letter.id || std::find(ids.begin(), ids.end(),
                                               *letter.id) == ids.end())) {
    return false;
  }
  if (lock && letter.lock != lock) return false;
  return reason_glob.empty() || GlobMatch(reason_glob, letter.reason);
}

Reply Checked(Reply reply, std::string_view what) {
  if (reply.is_error()) {
    throw Error(ErrorCode::kRedisProtocol,
                std::string(what) + ": " + reply.str);
  }
  return reply;
}

void ForEachDeadLetter(RedisClient& redis, const std::string& key,
                       const std::function<bool(DeadLetter)>& visit) {
  long long previous_length = -1;
  long long next = 0;
  while (true) {
    const Reply reply =
        redis.Eval(kReadBatch, {key},
                   {std::to_string(previous_length), std::to_string(next),
                    std::to_string(kBatch)});
    if (reply.elements.size() != 3) {
      throw Error(ErrorCode::kRedisProtocol,
                  "reading " + key + ": unexpected reply");
    }
    previous_length = reply.elements[0].integer;
    const long long start = reply.elements[1].integer;
    const std::vector<Reply>& batch = reply.elements[2].elements;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!visit(ParseDeadLetter(batch[i].str,
                                 start + static_cast<long long>(i)))) {
        return;
      }
    }
    if (static_cast<int>(batch.size()) < kBatch) return;
    next = start + kBatch;
  }
}

std::vector<DeadLetter> SelectDeadLetters(RedisClient& redis,
                                          const std::string& key,
                                          const DeadLetterFilter& filter) {
  std::vector<DeadLetter> out;
  ForEachDeadLetter(redis, key, [&](DeadLetter letter) {
    if (filter.Matches(letter)) out.push_back(std::move(letter));
    return true;
  });
  return out;
}

}  // namespace lockfleet::cli
