#include "redis_connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::internal {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

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

}  // namespace

ErrorCode CodeForErrorReply(const std::string& message, ErrorCode otherwise) {
  auto starts = [&](const char* prefix) {
    return message.rfind(prefix, 0) == 0;
  };
  if (starts("NOAUTH") || starts("WRONGPASS") || starts("NOPERM"))
    return ErrorCode::kRedisAuth;
  if (starts("BUSY") || starts("LOADING") || starts("OOM") ||
      starts("READONLY") || starts("MASTERDOWN") || starts("TRYAGAIN") ||
      starts("CLUSTERDOWN")) {
    return ErrorCode::kRedisBusy;
  }
  return otherwise;
}

void RedisConnection::ContextDeleter::operator()(redisContext* ctx) const {
  redisFree(ctx);
}

RedisConnection::RedisConnection(const RedisEndpoint& endpoint,
                                 std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds command_timeout,
                                 std::chrono::milliseconds budget)
    : where_(endpoint.Redacted()),
      command_timeout_(command_timeout),
      set_timeout_(command_timeout) {
  const auto start = std::chrono::steady_clock::now();
  if (budget.count() > 0) connect_timeout = std::min(connect_timeout, budget);
  redisContext* raw =
      endpoint.unix_path.empty()
          ? redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port,
                                    ToTimeval(connect_timeout))
          : redisConnectUnixWithTimeout(endpoint.unix_path.c_str(),
                                        ToTimeval(connect_timeout));
  if (raw == nullptr)
    throw Error(ErrorCode::kRedisUnavailable,
                "cannot allocate hiredis context");
  ctx_.reset(raw);
  if (ctx_->err != 0) {
    bool timeout =
        ctx_->err == REDIS_ERR_IO &&
        (errno == EAGAIN || errno == EINPROGRESS || errno == ETIMEDOUT);
    throw Error(
        timeout ? ErrorCode::kRedisTimeout : ErrorCode::kRedisUnavailable,
        "cannot connect to Redis at " + where_ + ": " + ctx_->errstr);
  }
  // Child processes (lockfleet lock's COMMAND, say) must not inherit our
  // connections. hiredis 0.14 cannot open the socket with SOCK_CLOEXEC.
  ::fcntl(ctx_->fd, F_SETFD, ::fcntl(ctx_->fd, F_GETFD) | FD_CLOEXEC);
  if (redisSetTimeout(ctx_.get(), ToTimeval(set_timeout_)) != REDIS_OK)
    Fail("set timeout");
  if (endpoint.unix_path.empty()) redisEnableKeepAlive(ctx_.get());

  // AUTH and SELECT each get what is left of the budget (the next Run()
  // sets the timeout it needs).
  auto left = [&] {
    if (budget.count() <= 0) return command_timeout;
    const auto rest =
        budget - std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - start);
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
                      ": " + r.str);
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
}

RedisConnection::~RedisConnection() = default;

void RedisConnection::Fail(const char* what) {
  broken_ = true;
  int err = ctx_->err;
  std::string detail = ctx_->errstr[0] != '\0' ? ctx_->errstr : "unknown error";
  ErrorCode code = ErrorCode::kRedisUnavailable;
  if (err == REDIS_ERR_PROTOCOL) code = ErrorCode::kRedisProtocol;
  // hiredis reports a command timeout as an I/O error with EAGAIN.
  if (err == REDIS_ERR_IO &&
      (detail.find("temporarily unavailable") != std::string::npos ||
       detail.find("timed out") != std::string::npos)) {
    code = ErrorCode::kRedisTimeout;
  }
  throw Error(code, std::string("Redis at ") + where_ + ": " + what +
                        " failed: " + detail);
}

std::vector<Reply> RedisConnection::Run(
    const std::vector<const Command*>& commands,
    std::chrono::milliseconds timeout) {
  if (broken_)
    throw Error(ErrorCode::kRedisUnavailable, "Redis connection is broken");
  const std::chrono::milliseconds want =
      timeout.count() > 0 ? timeout : command_timeout_;
  if (want != set_timeout_) {
    if (redisSetTimeout(ctx_.get(), ToTimeval(want)) != REDIS_OK)
      Fail("set timeout");
    set_timeout_ = want;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const Command* cmd : commands) {
    argv.clear();
    lens.clear();
    for (const std::string& arg : *cmd) {
      argv.push_back(arg.data());
      lens.push_back(arg.size());
    }
    if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()),
                               argv.data(), lens.data()) != REDIS_OK) {
      Fail("send");
    }
  }
  std::vector<Reply> replies;
  try {
    replies.reserve(commands.size());
    for (size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr)
        Fail("read reply");
      std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(
          static_cast<redisReply*>(raw), &freeReplyObject);
      replies.push_back(Convert(reply.get()));
    }
  } catch (...) {
    broken_ = true;  // unread replies would be handed to the next caller
    throw;
  }
  return replies;
}

Reply RedisConnection::RunOne(const Command& command) {
  std::vector<const Command*> one{&command};
  return std::move(Run(one).front());
}

}  // namespace lockfleet::internal
