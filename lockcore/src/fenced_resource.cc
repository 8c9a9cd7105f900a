#include "lockfleet/lockcore/fenced_resource.h"

#include "lockfleet/lockcore/error.h"

namespace lockfleet {
namespace {

// KEYS[1]: the resource's fence key. ARGV[1]: token, ARGV[2]: number of
// commands, then per command its argc followed by its arguments.
const Script& WriteScript() {
  static const Script script(R"lua(
local token = tonumber(ARGV[1])
local hi = tonumber(redis.call('GET', KEYS[1]) or '0')
if token < hi then
  return {0, hi}
end
local results = {}
local i = 3
for n = 1, tonumber(ARGV[2]) do
  local argc = tonumber(ARGV[i])
  local cmd = {}
  for j = 1, argc do
    cmd[j] = ARGV[i + j]
  end
  i = i + argc + 1
  results[n] = redis.call(unpack(cmd))
end
if token > hi then
  redis.call('SET', KEYS[1], token)
  hi = token
end
return {1, hi, results}
)lua");
  return script;
}

// The caller's body runs as a local function that sees its own KEYS/ARGV.
std::string WrapBody(std::string_view body) {
  std::string s = R"lua(
local token = tonumber(ARGV[1])
local hi = tonumber(redis.call('GET', KEYS[1]) or '0')
if token < hi then
  return {0, hi}
end
local user_keys, user_args = {}, {}
for i = 2, #KEYS do user_keys[i - 1] = KEYS[i] end
for i = 2, #ARGV do user_args[i - 1] = ARGV[i] end
local function body(KEYS, ARGV)
)lua";
  s += body;
  s += R"lua(
end
local result = body(user_keys, user_args)
if token > hi then
  redis.call('SET', KEYS[1], token)
  hi = token
end
return {1, hi, result}
)lua";
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

void CheckFence(int64_t fence) {
  if (fence <= 0)
    throw Error(ErrorCode::kInvalidArgument, "fencing tokens are positive");
}

}  // namespace

FencedResource::FencedResource(std::shared_ptr<RedisClient> redis,
                               std::string name, std::string key_prefix)
    : redis_(std::move(redis)),
      name_(std::move(name)),
      prefix_(std::move(key_prefix)) {
  if (!redis_)
    throw Error(ErrorCode::kInvalidArgument,
                "FencedResource needs a RedisClient");
  if (name_.empty())
    throw Error(ErrorCode::kInvalidArgument, "resource name must not be empty");
  fence_key_ = Key("fence");
}

std::string FencedResource::Key(std::string_view suffix) const {
  return KeyOf(prefix_, name_, suffix);
}

std::string FencedResource::KeyOf(std::string_view key_prefix,
                                  std::string_view name,
                                  std::string_view suffix) {
  std::string key(key_prefix);
  // "res:" goes before the hash tag: every lock key has "{" right after
  // the prefix, so no lock name can make a resource key (a tag "{res:X}"
  // would be the keys of the lock named "res:X").
  key.append(":res:{").append(name).append("}:").append(suffix);
  return key;
}

FenceResult FencedResource::Write(int64_t fence,
                                  const std::vector<Command>& commands) {
  CheckFence(fence);
  std::vector<std::string> args{std::to_string(fence),
                                std::to_string(commands.size())};
  for (const Command& cmd : commands) {
    if (cmd.empty())
      throw Error(ErrorCode::kInvalidArgument, "empty command in fenced write");
    args.push_back(std::to_string(cmd.size()));
    args.insert(args.end(), cmd.begin(), cmd.end());
  }
  return Decode(redis_->Eval(WriteScript(), {fence_key_}, args));
}

FenceResult FencedResource::Eval(int64_t fence, std::string_view body,
                                 const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args) {
  CheckFence(fence);
  std::vector<std::string> all_keys{fence_key_};
  all_keys.insert(all_keys.end(), keys.begin(), keys.end());
  std::vector<std::string> all_args{std::to_string(fence)};
  all_args.insert(all_args.end(), args.begin(), args.end());
  return Decode(redis_->Eval(ScriptFor(body), all_keys, all_args));
}

int64_t FencedResource::HighestFence() {
  Reply r = redis_->Execute({"GET", fence_key_});
  if (r.is_nil()) return 0;
  if (r.type != Reply::Type::kString) {
    throw Error(ErrorCode::kRedisProtocol,
                "fence key holds a non-string: " + r.str);
  }
  return std::stoll(r.str);
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
