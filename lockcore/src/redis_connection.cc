#include "redis_connection.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <string>

#include "lockfleet/lockcore/error.h"
#include "transport.h"

namespace lockfleet::internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

Reply Convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i)
        out.elements.push_back(Convert(r->element[i]));
      break;
    default:  // REDIS_REPLY_NIL
      out.type = Reply::Type::kNil;
  }
  return out;
}

milliseconds Since(steady_clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

// Appends `command` in RESP to `out`.
void Encode(const Command& command, std::string& out) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(command.size());
  lens.reserve(command.size());
  for (const std::string& arg : command) {
    argv.push_back(arg.data());
    lens.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int len = redisFormatCommandArgv(
      &formatted, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (len < 0 || formatted == nullptr) {
    throw Error(ErrorCode::kInternal, "cannot encode a Redis command");
  }
  out.append(formatted, static_cast<size_t>(len));
  redisFreeCommand(formatted);
}

}  // namespace

ErrorCode CodeForErrorReply(const std::string& message, ErrorCode otherwise) {
  auto starts = [&](const char* prefix) {
    return message.rfind(prefix, 0) == 0;
  };
  if (starts("NOAUTH") || starts("WRONGPASS") || starts("NOPERM"))
    return ErrorCode::kRedisAuth;
  if (message.starts_with(kFailedNodeReply))
    return ErrorCode::kRedisUnavailable;
  if (starts("BUSY") || starts("LOADING") || starts("OOM") ||
      starts("READONLY") || starts("MASTERDOWN") || starts("TRYAGAIN") ||
      starts("CLUSTERDOWN") || starts("MOVED ") || starts("ASK ")) {
    // (A MOVED or ASK reaches a caller only after the redirects ran out:
    // a cluster reconfiguring, ridden out like a busy server.)
    return ErrorCode::kRedisBusy;
  }
  return otherwise;
}

namespace {

// An error reply to AUTH as a message may show it. Redis 6.2+ answers an
// AUTH it does not know (renamed away, a proxy without it) with "ERR unknown
// command 'AUTH', with args beginning with: '<password>' ...": of a reply
// other than the fixed refusals only its first word is shown.
std::string ShownRefusal(const std::string& reply, bool auth) {
  if (!auth) return reply;
  for (std::string_view fixed : {"WRONGPASS ", "NOAUTH ", "NOPERM "}) {
    if (std::string_view(reply).substr(0, fixed.size()) == fixed) return reply;
  }
  return reply.substr(0, reply.find(' ')) +
         " (the rest of the reply is not shown: it may repeat the password)";
}

}  // namespace

bool IsRefusedBeforeRunning(const std::string& message) {
  static constexpr std::string_view kPrefixes[] = {
      "NOSCRIPT ",
      "BUSY ",
      "LOADING ",
      "OOM ",
      "READONLY ",
      "MASTERDOWN ",
      "NOAUTH ",
      "NOPERM ",
      "WRONGPASS ",
      "MISCONF ",
      "CLUSTERDOWN ",
      "TRYAGAIN ",
      "MOVED ",
      "ASK ",
      "CROSSSLOT ",
      "NOREPLICAS ",
      "ERR Error compiling script",
      "ERR unknown command",
      "ERR wrong number of arguments",
      "ERR Number of keys"};
  for (std::string_view prefix : kPrefixes) {
    if (std::string_view(message).substr(0, prefix.size()) == prefix)
      return true;
  }
  return false;
}

void RedisConnection::ReaderFree::operator()(redisReader* reader) const {
  redisReaderFree(reader);
}

RedisConnection::RedisConnection(const RedisEndpoint& endpoint,
                                 const TlsContext* tls,
                                 milliseconds connect_timeout,
                                 milliseconds command_timeout,
                                 milliseconds budget, bool must_be_master)
    : reader_(redisReaderCreate()),
      where_(endpoint.Redacted()),
      command_timeout_(command_timeout) {
  const auto start = steady_clock::now();
  if (!reader_) {
    throw Error(ErrorCode::kInternal, "cannot allocate a hiredis reader");
  }
  if (budget.count() > 0) connect_timeout = std::min(connect_timeout, budget);
  try {
    transport_ = OpenTransport(endpoint, tls, start + connect_timeout);
  } catch (const Error& e) {
    const bool timeout = e.code() == ErrorCode::kRedisTimeout;
    throw Error(
        e.code(),
        "cannot connect to Redis at " + where_ +
            (timeout
                 ? " within " + std::to_string(connect_timeout.count()) + " ms"
                 : "") +
            ": " + e.what());
  }

  // AUTH and SELECT each get what is left of the budget.
  auto left = [&] {
    if (budget.count() <= 0) return command_timeout;
    const milliseconds rest = budget - Since(start);
    if (rest.count() <= 0) {
      broken_ = true;
      throw Error(ErrorCode::kRedisTimeout,
                  "Redis at " + where_ +
                      ": the call's budget ran out while "
                      "connecting");
    }
    return std::min(rest, command_timeout);
  };
  auto must_ok = [&](const Command& cmd, const char* what) {
    Reply r = std::move(Run({&cmd}, left()).front());
    if (r.is_error()) {
      broken_ = true;
      throw Error(CodeForErrorReply(r.str, ErrorCode::kRedisAuth),
                  std::string("Redis at ") + where_ + " refused " + what +
                      ": " + ShownRefusal(r.str, cmd.front() == "AUTH"));
    }
  };
  if (!endpoint.password.empty()) {
    if (endpoint.user.empty()) {
      must_ok({"AUTH", endpoint.password}, "AUTH");
    } else {
      must_ok({"AUTH", endpoint.user, endpoint.password}, "AUTH");
    }
  }
  if (endpoint.db != 0)
    must_ok({"SELECT", std::to_string(endpoint.db)}, "SELECT");
  if (must_be_master) {
    const Command role{"ROLE"};
    const Reply r = std::move(Run({&role}, left()).front());
    if (r.is_error()) {
      broken_ = true;
      // NOPERM: an ACL without +role (the -@dangerous of a least-privilege
      // user takes it away).
      throw Error(CodeForErrorReply(r.str, ErrorCode::kRedisUnavailable),
                  "Redis at " + where_ + " refused ROLE: " + r.str +
                      (r.str.rfind("NOPERM", 0) == 0
                           ? " (the ACL user needs +role for Sentinel)"
                           : ""));
    }
    const std::string role_name =
        r.type == Reply::Type::kArray && !r.elements.empty()
            ? r.elements.front().str
            : "an unexpected reply";
    if (role_name != "master") {
      broken_ = true;
      throw Error(ErrorCode::kRedisUnavailable,
                  "Redis at " + where_ + " is not the master (ROLE: " +
                      role_name + "): a failover in progress?");
    }
  }
}

RedisConnection::~RedisConnection() = default;

void RedisConnection::Fail(const char* what, const Error& e,
                           milliseconds timeout) {
  broken_ = true;
  timed_out_ = e.code() == ErrorCode::kRedisTimeout;
  std::string detail = e.what();
  if (e.code() == ErrorCode::kRedisTimeout) {
    detail += " after " + std::to_string(timeout.count()) + " ms";
  }
  // A TLS port drops a plaintext client, by a reset or a close, before any
  // reply.
  if (e.code() == ErrorCode::kRedisUnavailable && !replied_ && transport_ &&
      !transport_->secure() && detail.find("rediss://") == std::string::npos) {
    detail += " (a TLS port? use rediss:// for one)";
  }
  throw Error(e.code(), std::string("Redis at ") + where_ + ": " + what +
                            " failed: " + detail);
}

void RedisConnection::ReadReplies(size_t count, std::vector<Reply>& replies,
                                  steady_clock::time_point deadline) {
  const bool secure = transport_->secure();
  while (replies.size() < count) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      std::string detail = reader_->errstr;
      // A TLS alert or handshake record where a reply should be.
      if (!secure && !replied_ && (first_byte_ == 0x15 || first_byte_ == 0x16))
        detail += " (the server speaks TLS: use rediss://)";
      throw Error(ErrorCode::kRedisProtocol, detail);
    }
    if (raw != nullptr) {
      std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(
          static_cast<redisReply*>(raw), &freeReplyObject);
      replies.push_back(Convert(reply.get()));
      replied_ = true;
      continue;
    }
    char buffer[16 * 1024];
    const size_t n = transport_->Read(buffer, sizeof(buffer), deadline);
    if (n == 0) {
      throw Error(ErrorCode::kRedisUnavailable,
                  replied_ ? "the server closed the connection"
                           : "the server closed the connection before its "
                             "first reply");
    }
    if (first_byte_ < 0) first_byte_ = static_cast<unsigned char>(buffer[0]);
    if (redisReaderFeed(reader_.get(), buffer, n) != REDIS_OK) {
      throw Error(ErrorCode::kRedisProtocol, reader_->errstr);
    }
  }
}

std::vector<Reply> RedisConnection::Run(
    const std::vector<const Command*>& commands, milliseconds timeout) {
  if (broken_)
    throw Error(ErrorCode::kRedisUnavailable, "Redis connection is broken");
  const milliseconds bound = timeout.count() > 0 ? timeout : command_timeout_;
  const auto deadline = steady_clock::now() + bound;
  std::string out;
  for (const Command* cmd : commands) Encode(*cmd, out);
  try {
    transport_->Write(out, deadline);
  } catch (const Error& e) {
    Fail("send", e, bound);
  } catch (...) {
    broken_ = true;
    throw;
  }
  std::vector<Reply> replies;
  try {
    replies.reserve(commands.size());
    ReadReplies(commands.size(), replies, deadline);
  } catch (const Error& e) {
    // Unread replies would be handed to the next caller: never reused.
    Fail("read reply", e, bound);
  } catch (...) {
    broken_ = true;
    throw;
  }
  return replies;
}

void RedisConnection::Send(const Command& command,
                           steady_clock::time_point deadline) {
  if (broken_)
    throw Error(ErrorCode::kRedisUnavailable, "Redis connection is broken");
  std::string out;
  Encode(command, out);
  try {
    transport_->Write(out, deadline);
  } catch (const Error& e) {
    Fail("send", e, command_timeout_);
  }
}

std::optional<Reply> RedisConnection::ReadOne(
    steady_clock::time_point deadline) {
  if (broken_)
    throw Error(ErrorCode::kRedisUnavailable, "Redis connection is broken");
  std::vector<Reply> replies;
  try {
    ReadReplies(1, replies, deadline);
  } catch (const Error& e) {
    // Nothing came in time: a part of a reply read so far stays in the
    // reader for the next call.
    if (e.code() == ErrorCode::kRedisTimeout) return std::nullopt;
    Fail("read", e, command_timeout_);
  }
  return std::move(replies.front());
}

Reply RedisConnection::RunOne(const Command& command) {
  std::vector<const Command*> one{&command};
  return std::move(Run(one).front());
}

}  // namespace lockfleet::internal
