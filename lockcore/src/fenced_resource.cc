#include "lockfleet/lockcore/fenced_resource.h"

#include <algorithm>
#include <stdexcept>

#include "lockfleet/lockcore/error.h"

namespace lockfleet {
namespace {

// The fence key holds "<token>" (anonymous grant, and every value written
// before grants were stored) or "<token>:<owner>": the token is digits, so
// the first ':' ends it whatever the owner holds.
//
// KEYS[1]: the fence key. ARGV[1]: token, ARGV[2]: owner ('' = anonymous).
// Leaves `token` and `hi` for the rest of the script, or returns the refusal.
constexpr std::string_view kCheck = R"lua(
local token = tonumber(ARGV[1])
local hi, owner = 0, ''
local stored = redis.call('GET', KEYS[1])
if stored then
  local sep = string.find(stored, ':', 1, true)
  if sep then
    hi = tonumber(string.sub(stored, 1, sep - 1))
    owner = string.sub(stored, sep + 1)
  else
    hi = tonumber(stored)
  end
  if hi == nil then
    return redis.error_reply('fence key ' .. KEYS[1] .. ' holds no token')
  end
end
if token < hi or (token == hi and ARGV[2] ~= owner) then
  return {0, hi}
end
)lua";

// Runs after the writes succeeded (a failed command raised and left the
// fence as it was). An equal token is the current grant: nothing to record.
constexpr std::string_view kAdvance = R"lua(
if token > hi then
  if ARGV[2] == '' then
    redis.call('SET', KEYS[1], ARGV[1])
  else
    redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
  end
  hi = token
end
)lua";

// Declared "#!lua" (may write, no allow-oom): a full Redis (maxmemory,
// noeviction) refuses a fenced write before it runs, never half-way.
constexpr std::string_view kShebang = "#!lua\n";

// ARGV[3]: number of commands, then per command its argc and arguments.
const Script& WriteScript() {
  static const Script script([] {
    std::string s(kShebang);
    s += kCheck;
    s += R"lua(
local results = {}
local i = 4
for n = 1, tonumber(ARGV[3]) do
  local argc = tonumber(ARGV[i])
  local cmd = {}
  for j = 1, argc do
    cmd[j] = ARGV[i + j]
  end
  i = i + argc + 1
  results[n] = redis.call(unpack(cmd))
end
)lua";
    s += kAdvance;
    s += "return {1, hi, results}\n";
    return s;
  }());
  return script;
}

// The caller's body runs as a local function that sees its own KEYS/ARGV
// (ours minus the fence key, the token and the owner). It is defined before
// our locals, so it cannot see (or assign) them.
std::string WrapBody(std::string_view body) {
  std::string s(kShebang);
  s += "local function body(KEYS, ARGV)\n";
  s += body;
  s += "\nend\n";
  s += kCheck;
  s += R"lua(
local user_keys, user_args = {}, {}
for i = 2, #KEYS do user_keys[i - 1] = KEYS[i] end
for i = 3, #ARGV do user_args[i - 2] = ARGV[i] end
local result = body(user_keys, user_args)
)lua";
  s += kAdvance;
  s += "return {1, hi, result}\n";
  return s;
}

FenceResult Decode(Reply r) {
  FenceResult out;
  if (r.type != Reply::Type::kArray || r.elements.size() < 2) {
    throw Error(ErrorCode::kRedisProtocol,
                "unexpected reply from fenced write");
  }
  out.accepted = r.elements[0].integer == 1;
  out.highest_fence = r.elements[1].integer;
  if (r.elements.size() > 2) out.reply = std::move(r.elements[2]);
  return out;
}

// ARGV[1] and ARGV[2] of every script.
std::vector<std::string> GrantArgs(const FenceGrant& grant) {
  if (grant.fence <= 0 || grant.fence > FencedResource::kMaxFence) {
    throw Error(ErrorCode::kInvalidArgument,
                "fencing tokens are 1.." +
                    std::to_string(FencedResource::kMaxFence) + ", not " +
                    std::to_string(grant.fence));
  }
  return {std::to_string(grant.fence), grant.owner};
}

// --- key encoding ---------------------------------------------------------

constexpr std::string_view kResourceInfix = ":res:";
constexpr std::string_view kFencePart = "fence";
constexpr char kHex[] = "0123456789ABCDEF";

// What is escaped where: the name may keep ':' (so "product:7" keeps its
// key); a part may not, or parts could be re-split differently.
bool Escaped(char c, bool in_part) {
  return c == '%' || c == '{' || c == '}' || (in_part && c == ':');
}

void AppendEncodedComponent(std::string& out, std::string_view text,
                            bool in_part) {
  for (char c : text) {
    if (Escaped(c, in_part)) {
      const auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is not what AppendEncodedComponent writes
}

// AppendEncodedComponent's inverse; false for anything it would not have
// written (a raw escaped byte, a bad escape, an escape of a byte kept as is).
bool DecodeComponent(std::string_view text, bool in_part, std::string& out) {
  out.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      if (Escaped(text[i], in_part)) return false;
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return false;
    const int hi = HexValue(text[i + 1]);
    const int lo = HexValue(text[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const char c = static_cast<char>(hi * 16 + lo);
    if (!Escaped(c, in_part)) return false;
    out += c;
    i += 2;
  }
  return true;
}

void CheckPrefixAndName(std::string_view key_prefix, std::string_view name) {
  if (key_prefix.empty() ||
      key_prefix.find_first_of("{}") != std::string_view::npos) {
    throw Error(ErrorCode::kInvalidArgument,
                "key_prefix must be non-empty and contain no '{' or '}'");
  }
  if (name.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "resource name must not be empty");
  }
}

template <typename Parts>
std::string BuildKey(std::string_view key_prefix, std::string_view name,
                     const Parts& parts) {
  CheckPrefixAndName(key_prefix, name);
  std::string key(key_prefix);
  // "res:" goes before the hash tag: every lock key has "{" right after
  // the prefix, so no lock name can make a resource key (a tag "{res:X}"
  // would be the keys of the lock named "res:X").
  key += kResourceInfix;
  key += '{';
  AppendEncodedComponent(key, name, false);
  key += '}';
  for (const auto& part : parts) {
    key += ':';
    AppendEncodedComponent(key, part, true);
  }
  return key;
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t colon = path.find(':', start);
    parts.push_back(path.substr(start, colon - start));
    if (colon == std::string_view::npos) return parts;
    start = colon + 1;
  }
}

void RefuseFencePart(const std::vector<std::string_view>& parts) {
  if (parts.size() == 1 && parts[0] == kFencePart) {
    throw Error(ErrorCode::kInvalidArgument,
                "the key {\"fence\"} is reserved for the resource's fence");
  }
}

}  // namespace

FenceGrant FenceGrant::Of(const Lease& lease) {
  if (!lease.held()) {
    throw Error(ErrorCode::kInvalidArgument,
                "a fenced write needs a held lease");
  }
  return {.fence = lease.fence(), .owner = lease.owner()};
}

FencedResource::FencedResource(std::shared_ptr<RedisClient> redis,
                               std::string name, std::string key_prefix)
    : redis_(std::move(redis)),
      name_(std::move(name)),
      prefix_(std::move(key_prefix)) {
  if (!redis_)
    throw Error(ErrorCode::kInvalidArgument,
                "FencedResource needs a RedisClient");
  fence_key_ = KeyOf(prefix_, name_, {kFencePart});
}

std::string FencedResource::Key(
    std::initializer_list<std::string_view> parts) const {
  RefuseFencePart(std::vector<std::string_view>(parts));
  return BuildKey(prefix_, name_, parts);
}

std::string FencedResource::Key(std::string_view path) const {
  const std::vector<std::string_view> parts = SplitPath(path);
  RefuseFencePart(parts);
  return BuildKey(prefix_, name_, parts);
}

std::string FencedResource::KeyOf(
    std::string_view key_prefix, std::string_view name,
    std::initializer_list<std::string_view> parts) {
  return BuildKey(key_prefix, name, parts);
}

std::string FencedResource::KeyOf(std::string_view key_prefix,
                                  std::string_view name,
                                  std::span<const std::string> parts) {
  return BuildKey(key_prefix, name, parts);
}

std::string FencedResource::KeyOf(std::string_view key_prefix,
                                  std::string_view name,
                                  std::string_view path) {
  return BuildKey(key_prefix, name, SplitPath(path));
}

std::optional<ResourceKey> FencedResource::ParseKey(std::string_view key) {
  // The prefix has no '{', the encoded name and parts have none: the first
  // '{' opens the tag, and the first '}' after it closes it.
  const size_t open = key.find('{');
  if (open == std::string_view::npos || open <= kResourceInfix.size() ||
      key.substr(open - kResourceInfix.size(), kResourceInfix.size()) !=
          kResourceInfix) {
    return std::nullopt;
  }
  ResourceKey out;
  out.prefix = key.substr(0, open - kResourceInfix.size());
  if (out.prefix.find('}') != std::string::npos) return std::nullopt;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos ||
      !DecodeComponent(key.substr(open + 1, close - open - 1), false,
                       out.name) ||
      out.name.empty()) {
    return std::nullopt;
  }
  std::string_view rest = key.substr(close + 1);
  if (rest.empty()) return out;
  if (rest.front() != ':') return std::nullopt;
  for (std::string_view part : SplitPath(rest.substr(1))) {
    if (!DecodeComponent(part, true, out.parts.emplace_back()))
      return std::nullopt;
  }
  return out;
}

FenceResult FencedResource::Write(const Lease& lease,
                                  const std::vector<Command>& commands) {
  return Write(FenceGrant::Of(lease), commands);
}

FenceResult FencedResource::Write(int64_t fence,
                                  const std::vector<Command>& commands) {
  return Write(FenceGrant{.fence = fence}, commands);
}

FenceResult FencedResource::Write(const FenceGrant& grant,
                                  const std::vector<Command>& commands) {
  std::vector<std::string> args = GrantArgs(grant);
  args.push_back(std::to_string(commands.size()));
  for (const Command& cmd : commands) {
    if (cmd.empty())
      throw Error(ErrorCode::kInvalidArgument, "empty command in fenced write");
    args.push_back(std::to_string(cmd.size()));
    args.insert(args.end(), cmd.begin(), cmd.end());
  }
  return Decode(redis_->Eval(WriteScript(), {fence_key_}, args));
}

FenceResult FencedResource::Eval(const Lease& lease, std::string_view body,
                                 const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args) {
  return Eval(FenceGrant::Of(lease), body, keys, args);
}

FenceResult FencedResource::Eval(int64_t fence, std::string_view body,
                                 const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args) {
  return Eval(FenceGrant{.fence = fence}, body, keys, args);
}

FenceResult FencedResource::Eval(const FenceGrant& grant, std::string_view body,
                                 const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args) {
  std::vector<std::string> all_args = GrantArgs(grant);
  std::vector<std::string> all_keys{fence_key_};
  all_keys.insert(all_keys.end(), keys.begin(), keys.end());
  all_args.insert(all_args.end(), args.begin(), args.end());
  return Decode(redis_->Eval(ScriptFor(body), all_keys, all_args));
}

FenceResult FencedResource::Claim(const Lease& lease) {
  return Write(FenceGrant::Of(lease), {});
}

FenceResult FencedResource::Claim(const FenceGrant& grant) {
  return Write(grant, {});
}

int64_t FencedResource::HighestFence() { return HighestGrant().fence; }

FenceGrant FencedResource::HighestGrant() {
  Reply r = redis_->Execute({"GET", fence_key_});
  if (r.is_nil()) return {};
  if (r.type != Reply::Type::kString) {
    throw Error(ErrorCode::kRedisProtocol,
                "fence key holds a non-string: " + r.str);
  }
  const size_t sep = r.str.find(':');
  FenceGrant out;
  try {
    size_t used = 0;
    out.fence = std::stoll(r.str.substr(0, sep), &used);
    if (used != std::min(sep, r.str.size())) throw std::invalid_argument("");
  } catch (const std::logic_error&) {
    throw Error(ErrorCode::kRedisProtocol,
                "fence key " + fence_key_ + " holds no token: " + r.str);
  }
  if (sep != std::string::npos) out.owner = r.str.substr(sep + 1);
  return out;
}

const Script& FencedResource::ScriptFor(std::string_view body) {
  std::lock_guard lock(mu_);
  auto it = scripts_.find(body);
  if (it == scripts_.end()) {
    it = scripts_
             .emplace(std::string(body),
                      std::make_unique<Script>(WrapBody(body)))
             .first;
  }
  return *it->second;
}

}  // namespace lockfleet
