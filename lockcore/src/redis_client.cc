#include "lockfleet/lockcore/redis_client.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>

#include "lockfleet/lockcore/error.h"
#include "redis_client_impl.h"
#include "redis_connection.h"

namespace lockfleet {

using internal::RedisConnection;

Script::Script(std::string source) : source_(std::move(source)) {}

ErrorCode ErrorReplyCode(const std::string& message, ErrorCode otherwise) {
  return internal::CodeForErrorReply(message, otherwise);
}

namespace {

// OpenSSL writes with write(2), so a peer that closed a TLS connection
// raises SIGPIPE, whose default action kills the process (plain sockets use
// send(MSG_NOSIGNAL)). Ignore it (once, and only if nobody chose a
// disposition): the write then fails with EPIPE and becomes
// Error(kRedisUnavailable).
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
        current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace

RedisClient::Impl::Impl(RedisOptions opts) : options(std::move(opts)) {
  IgnoreSigpipeOnce();
  endpoint = ParseRedisUrl(options.url);
  if (options.pool_size < 1 || options.pool_size > 1024) {
    throw Error(ErrorCode::kInvalidArgument, "Redis pool_size must be 1..1024");
  }
  if (options.connect_timeout.count() <= 0 ||
      options.command_timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument, "Redis timeouts must be positive");
  }
  const TlsOptions& tls_options = options.tls;
  const bool use_tls = endpoint.tls || tls_options.enabled;
  const bool tls_set = static_cast<const config::RedisTlsConfig&>(
                           tls_options) != config::RedisTlsConfig{};
  const std::string where = endpoint.Redacted();
  if (use_tls && !endpoint.unix_path.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "TLS with the unix socket " + where +
                    ": Redis serves TLS on TCP ports only");
  }
  if (!use_tls && tls_set) {
    // Never a silent plaintext connection for a caller who set up TLS.
    throw Error(ErrorCode::kInvalidArgument,
                "TLS options are set but " + where +
                    " is not TLS: use rediss:// (or TlsOptions::enabled)");
  }
  if (tls_options.insecure_skip_verify &&
      (!tls_options.ca_file.empty() || !tls_options.ca_dir.empty())) {
    throw Error(ErrorCode::kInvalidArgument,
                "TLS insecure_skip_verify verifies no certificate: the CA "
                "in ca_file/ca_dir would be ignored");
  }
  if (use_tls) {
    endpoint.tls = true;
    tls = std::make_shared<const internal::TlsContext>(tls_options);
  }
  if (endpoint.sentinel()) {
    sentinel_ = std::make_unique<internal::Sentinel>(
        endpoint, options.sentinel_auth, tls.get(), options.connect_timeout,
        options.command_timeout);
  } else if (options.sentinel_auth != config::RedisAuthConfig{}) {
    throw Error(ErrorCode::kInvalidArgument,
                "Sentinel credentials are set but " + where +
                    " is not a redis+sentinel:// URL");
  }
  if (endpoint.cluster()) slots_ = std::make_unique<internal::SlotMap>();
}

RedisClient::Impl::Impl(const Impl& cluster, const RedisNode& node)
    : options(cluster.options),
      endpoint(cluster.EndpointAt(node)),
      tls(cluster.tls) {}

RedisEndpoint RedisClient::Impl::EndpointAt(const RedisNode& node) const {
  RedisEndpoint at = endpoint;
  at.sentinels.clear();
  at.master_name.clear();
  at.seeds.clear();
  at.host = node.host;
  at.port = node.port;
  return at;
}

RedisClient::Impl::~Impl() {
  // The watch thread calls MasterIs, which uses the members below: it stops
  // first, whatever the order of the members.
  sentinel_.reset();
}

bool RedisClient::Impl::Current(const RedisConnection& conn) const {
  return !sentinel_ ||
         conn.tag() == generation_.load(std::memory_order_acquire);
}

RedisClient::Impl::MasterAt RedisClient::Impl::KnownMaster() {
  // REQUIRES: master_mu_ held, master_ set.
  return {EndpointAt(*master_), generation_.load()};
}

RedisClient::Impl::MasterAt RedisClient::Impl::Master(
    internal::Deadline deadline) {
  {
    std::lock_guard lock(master_mu_);
    if (master_) return KnownMaster();
  }
  std::unique_lock ask(ask_mu_, deadline);
  if (!ask.owns_lock()) {
    throw Error(ErrorCode::kRedisTimeout,
                "the sentinels of " + sentinel_->where() +
                    " did not name the master in time");
  }
  {
    std::lock_guard lock(master_mu_);
    if (master_) return KnownMaster();  // asked by another thread meanwhile
  }
  const RedisNode node = sentinel_->AskMaster(deadline);
  std::lock_guard lock(master_mu_);
  if (!master_) {  // (a +switch-master may have come meanwhile: it wins)
    master_ = node;
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  return KnownMaster();
}

void RedisClient::Impl::MasterIs(const RedisNode& node) {
  std::lock_guard lock(master_mu_);
  if (master_ && *master_ == node) return;
  master_ = node;
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void RedisClient::Impl::MasterFailed(uint64_t generation) {
  std::lock_guard lock(master_mu_);
  if (generation_.load() != generation) return;
  master_.reset();
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::unique_ptr<RedisConnection> RedisClient::Impl::Open(
    std::chrono::milliseconds budget) {
  if (!sentinel_) {
    return std::make_unique<RedisConnection>(endpoint, tls.get(),
                                             options.connect_timeout,
                                             options.command_timeout, budget);
  }
  std::call_once(watching_, [this] {
    sentinel_->Watch([this](const RedisNode& node) { MasterIs(node); });
  });
  const internal::Deadline deadline =
      std::chrono::steady_clock::now() +
      (budget.count() > 0 ? budget
                          : options.connect_timeout + options.command_timeout);
  // Twice at most: once more when the master moved while connecting.
  for (int attempt = 1;; ++attempt) {
    MasterAt master = Master(deadline);
    std::unique_ptr<RedisConnection> conn;
    try {
      // ROLE too: the address the sentinels gave may be a replica by now.
      conn = std::make_unique<RedisConnection>(
          master.endpoint, tls.get(), options.connect_timeout,
          options.command_timeout, internal::Remaining(deadline),
          /*must_be_master=*/true);
    } catch (const Error& e) {
      // Refused, closed, or not a master: ask the sentinels next time. A
      // slow connect (a timeout) or a refused AUTH says nothing about
      // where the master is.
      if (e.code() == ErrorCode::kRedisUnavailable)
        MasterFailed(master.generation);
      throw;
    }
    conn->set_tag(master.generation);
    // A +switch-master while connecting: the old master still says ROLE
    // master for seconds after a failover, so only the generation tells.
    if (Current(*conn)) return conn;
    if (attempt == 2) {
      throw Error(ErrorCode::kRedisUnavailable,
                  "the master of " + sentinel_->where() +
                      " moved twice while connecting");
    }
  }
}

RedisClient::Impl::Lent RedisClient::Impl::Borrow(
    std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds wait =
      timeout.count() > 0 ? std::min(timeout, options.command_timeout)
                          : options.command_timeout;
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    if (!cv_.wait_until(lock, start + wait, [&] {
          return !idle_.empty() || open_ < options.pool_size;
        })) {
      throw Error(ErrorCode::kRedisTimeout,
                  "no free Redis connection within the timeout (pool_size " +
                      std::to_string(options.pool_size) + ")");
    }
    bool dropped = false;
    while (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      if (Current(*conn)) {
        if (dropped) cv_.notify_all();
        return Lent(this, std::move(conn));
      }
      --open_;  // to a former master (Sentinel): closed
      dropped = true;
    }
    if (dropped) cv_.notify_all();  // slots for the other waiters too
    if (open_ < options.pool_size) break;
  }
  ++open_;
  lock.unlock();
  try {
    // A budgeted call's connect, AUTH and SELECT fit in what is left of it.
    return Lent(this,
                Open(timeout.count() > 0 ? internal::Remaining(start + wait)
                                         : std::chrono::milliseconds(0)));
  } catch (...) {
    lock.lock();
    --open_;
    cv_.notify_one();
    throw;
  }
}

void RedisClient::Impl::Return(std::unique_ptr<RedisConnection> conn) {
  std::lock_guard lock(mu_);
  if (!Current(*conn)) {
    --open_;  // the master moved (Sentinel): never reused
  } else if (conn->broken() && conn->timed_out()) {
    // A slow server, not a gone one: only this connection (its reply may
    // still come) is dropped; reconnecting every idle one would add TLS
    // handshakes to a server that is already slow.
    --open_;
  } else if (conn->broken()) {
    // A broken connection usually means the server restarted or dropped us:
    // the idle ones are most likely dead too, so reconnect them lazily
    // instead of failing once per pooled connection.
    open_ -= 1 + static_cast<int>(idle_.size());
    idle_.clear();
  } else {
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

RedisClient::Impl::Lent::~Lent() {
  if (conn_) pool_->Return(std::move(conn_));
}

RedisClient::Impl::Lent& RedisClient::Impl::Lent::operator=(
    Lent&& other) noexcept {
  if (this != &other) {
    if (conn_) pool_->Return(std::move(conn_));
    pool_ = other.pool_;
    conn_ = std::move(other.conn_);
  }
  return *this;
}

namespace {

// Runs `step` (a step before anything is sent); its Error becomes a
// NotSentError.
template <typename Step>
auto BeforeSending(Step step) {
  try {
    return step();
  } catch (const internal::NotSentError&) {
    throw;
  } catch (const Error& e) {
    throw internal::NotSentError(e);
  }
}

}  // namespace

std::vector<Reply> RedisClient::Impl::Run(
    const std::vector<const Command*>& commands,
    std::chrono::milliseconds timeout, std::chrono::milliseconds server_wait) {
  using std::chrono::milliseconds;
  if (slots_) return RunCluster(commands, timeout, server_wait);
  // A WAIT that runs out is answered on the server's next timer tick (up to
  // 100 ms later at the default hz 10): its timeout and a margin for that.
  const milliseconds extra = server_wait.count() > 0
                                 ? server_wait + milliseconds(250)
                                 : milliseconds(0);
  // A call's budget shortens the command timeout, never lengthens it, and
  // covers the pool wait and connect too.
  const bool bounded = timeout.count() > 0;
  if (bounded) timeout = std::min(timeout, options.command_timeout);
  const auto end = std::chrono::steady_clock::now() + timeout;
  // What is left of the call's budget (the command timeout when unbounded).
  auto left = [&] {
    return bounded ? internal::Remaining(end) : options.command_timeout;
  };
  int stale = 0;        // connections skipped: the master moved meanwhile
  bool resent = false;  // the one resend after a READONLY refusal
  for (;;) {
    Lent conn =
        BeforeSending([&] { return bounded ? Borrow(left()) : Borrow(); });
    if (!Current(*conn)) {
      // The master moved (Sentinel) since the connection was lent. Never
      // sent to it: the old master still says ROLE master for seconds.
      if (++stale > 2) {
        throw internal::NotSentError(Error(ErrorCode::kRedisUnavailable,
                                           "the master of " +
                                               sentinel_->where() +
                                               " kept moving during the call"));
      }
      continue;
    }
    round_trips.fetch_add(1, std::memory_order_relaxed);
    std::vector<Reply> replies = RunOn(conn, commands, left() + extra);
    if (!sentinel_) return replies;
    const auto readonly = [](const Reply& r) {
      return r.is_error() && r.str.rfind("READONLY ", 0) == 0;
    };
    if (std::none_of(replies.begin(), replies.end(), readonly)) return replies;
    // Sentinel: the master we had is a replica now; ask the sentinels on
    // the next connection.
    MasterFailed(conn->tag());
    // Sent once more only when no command ran: every reply is a refusal
    // Redis gives before running (or the WAIT a replica refuses). A
    // pipeline the demotion cut in two, or a script that failed after
    // writing, ran: its replies go back as they are.
    bool none_ran = true;
    for (size_t i = 0; i < replies.size(); ++i) {
      const bool wait = internal::VerbIs(commands[i]->front(), "WAIT");
      none_ran = none_ran && replies[i].is_error() &&
                 (wait || internal::IsRefusedBeforeRunning(replies[i].str));
    }
    if (!none_ran || resent ||
        (bounded && std::chrono::steady_clock::now() >= end)) {
      return replies;  // READONLY errors reach the caller
    }
    resent = true;
  }
}

std::vector<Reply> RedisClient::Impl::RunOn(
    Lent& conn, const std::vector<const Command*>& commands,
    std::chrono::milliseconds bound) {
  try {
    return conn->Run(commands, bound);
  } catch (const Error&) {
    // The master died or dropped us (not a slow one: a +switch-master
    // covers that): ask the sentinels on the next connection.
    if (sentinel_ && !conn->timed_out()) MasterFailed(conn->tag());
    throw;
  }
}

std::string RedisClient::Impl::ShaOf(const Script& script,
                                     std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(script.mu_);
    if (!script.sha_.empty()) return script.sha_;
  }
  Command load{"SCRIPT", "LOAD", script.source_};
  std::vector<const Command*> one{&load};
  Reply r = std::move(Run(one, timeout).front());
  if (r.type != Reply::Type::kString) {
    throw internal::RefusedError(
        internal::CodeForErrorReply(r.str, ErrorCode::kRedisScript),
        "SCRIPT LOAD failed: " + r.str);
  }
  std::lock_guard lock(script.mu_);
  script.sha_ = r.str;
  return script.sha_;
}

RedisClient::RedisClient(RedisOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
RedisClient::~RedisClient() = default;

Reply RedisClient::Execute(const Command& command,
                           std::chrono::milliseconds timeout) {
  std::vector<const Command*> one{&command};
  return std::move(impl_->Run(one, timeout).front());
}

std::vector<Reply> RedisClient::Pipeline(const std::vector<Command>& commands) {
  if (commands.empty()) return {};
  std::vector<const Command*> ptrs;
  ptrs.reserve(commands.size());
  for (const Command& c : commands) ptrs.push_back(&c);
  return impl_->Run(ptrs);
}

namespace {

Command EvalCommand(const char* verb, const std::string& body_or_sha,
                    const std::vector<std::string>& keys,
                    const std::vector<std::string>& args) {
  Command cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.emplace_back(verb);
  cmd.push_back(body_or_sha);
  cmd.push_back(std::to_string(keys.size()));
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

bool IsNoScript(const Reply& r) {
  return r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0;
}

}  // namespace

std::vector<Reply> RedisClient::EvalPipeline(const std::vector<EvalCall>& calls,
                                             std::chrono::milliseconds timeout,
                                             ReplicaWait* wait) {
  if (calls.empty()) return {};
  if (wait) {
    if (wait->replicas <= 0 || wait->timeout.count() <= 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "WAIT needs replicas > 0 and a timeout > 0 ms");
    }
    wait->acked = std::numeric_limits<int64_t>::max();
    wait->error.clear();
  }
  const Command wait_command =
      wait ? Command{"WAIT", std::to_string(wait->replicas),
                     std::to_string(wait->timeout.count())}
           : Command{};
  // Each round trip may run on another connection of the pool, and WAIT
  // covers its own connection's writes: a NOSCRIPT retry waits again and
  // the fewer acknowledgements count.
  auto pipeline = [&](const std::vector<Command>& commands) {
    std::vector<const Command*> ptrs;
    ptrs.reserve(commands.size() + 1);
    for (const Command& c : commands) ptrs.push_back(&c);
    if (!wait) return impl_->Run(ptrs, timeout);
    ptrs.push_back(&wait_command);
    std::vector<Reply> replies = impl_->Run(ptrs, timeout, wait->timeout);
    const Reply acked = std::move(replies.back());
    replies.pop_back();
    if (acked.type == Reply::Type::kInteger) {
      wait->acked = std::min<int64_t>(wait->acked, acked.integer);
    } else {
      wait->acked = -1;
      wait->error = acked.is_error() ? acked.str : "an unexpected WAIT reply";
    }
    return replies;
  };
  std::vector<Command> commands;
  commands.reserve(calls.size());
  for (const EvalCall& call : calls) {
    commands.push_back(EvalCommand("EVALSHA", BeforeSending([&] {
                                     return impl_->ShaOf(*call.script, timeout);
                                   }),
                                   call.keys, call.args));
  }
  std::vector<Reply> replies = pipeline(commands);
  // The server lost its script cache (restart, SCRIPT FLUSH): send the bodies.
  std::vector<Command> retry;
  std::vector<size_t> retry_index;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!IsNoScript(replies[i])) continue;
    retry.push_back(EvalCommand("EVAL", calls[i].script->source(),
                                calls[i].keys, calls[i].args));
    retry_index.push_back(i);
  }
  if (!retry.empty()) {
    std::vector<Reply> again = pipeline(retry);
    for (size_t j = 0; j < again.size(); ++j)
      replies[retry_index[j]] = std::move(again[j]);
  }
  return replies;
}

Reply RedisClient::Eval(const Script& script,
                        const std::vector<std::string>& keys,
                        const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout, ReplicaWait* wait) {
  std::vector<EvalCall> one{{&script, keys, args}};
  Reply r = std::move(EvalPipeline(one, timeout, wait).front());
  if (r.is_error()) {
    const ErrorCode code =
        internal::CodeForErrorReply(r.str, ErrorCode::kRedisScript);
    const std::string message = "Redis script failed: " + r.str;
    // Refused up front: did not run. Failed while running: its writes
    // before the failure stay (Redis does not roll a script back).
    if (internal::IsRefusedBeforeRunning(r.str))
      throw internal::RefusedError(code, message);
    throw Error(code, message);
  }
  return r;
}

std::vector<RedisNode> RedisClient::Masters() {
  if (!impl_->cluster()) {
    const RedisEndpoint& e = impl_->endpoint;
    return {RedisNode{e.unix_path.empty() ? e.host : e.unix_path, e.port}};
  }
  impl_->RefreshSlots(
      std::chrono::steady_clock::now() + impl_->options.command_timeout,
      /*force=*/false);
  return impl_->slots_->Masters();
}

Reply RedisClient::ExecuteOn(const RedisNode& master, const Command& command) {
  if (!impl_->cluster()) return Execute(command);
  std::vector<const Command*> one{&command};
  impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
  try {
    return std::move(impl_->NodePool(master)->Run(one).front());
  } catch (const Error&) {
    impl_->stale_.store(true, std::memory_order_relaxed);  // the node gone?
    throw;
  }
}

RedisClient::ClusterStats RedisClient::cluster_stats() const noexcept {
  const Impl& i = *impl_;
  return {i.moved.load(std::memory_order_relaxed),
          i.asked.load(std::memory_order_relaxed),
          i.tryagain.load(std::memory_order_relaxed),
          i.refreshes.load(std::memory_order_relaxed)};
}

uint64_t RedisClient::round_trips() const noexcept {
  return impl_->round_trips.load(std::memory_order_relaxed);
}

const RedisEndpoint& RedisClient::endpoint() const noexcept {
  return impl_->endpoint;
}

}  // namespace lockfleet
