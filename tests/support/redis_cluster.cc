#include "support/redis_cluster.h"

#include <map>
#include <stdexcept>

#include "lockfleet/lockcore/error.h"
#include "support/shell.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

constexpr std::chrono::seconds kPatience{60};

bool Tls(const RedisCluster::Options& o) { return !o.tls.cert_file.empty(); }

// slot -> port, from a CLUSTER SLOTS reply.
std::map<int, long long> SlotPorts(const Reply& slots) {
  std::map<int, long long> out;
  for (const Reply& range : slots.elements) {
    if (range.elements.size() < 3) continue;
    for (long long s = range.elements[0].integer;
         s <= range.elements[1].integer; ++s) {
      out[static_cast<int>(s)] = range.elements[2].elements[1].integer;
    }
  }
  return out;
}

}  // namespace

RedisCluster::RedisCluster(Options options) : options_(std::move(options)) {
  const int total = options_.masters * (1 + options_.replicas);
  for (int i = 0; i < total; ++i) {
    RedisServer::Options o{.tcp = true};
    o.cluster = true;
    o.extra_args = {"--cluster-node-timeout",
                    std::to_string(options_.node_timeout.count())};
    if (Tls(options_)) {
      o.tls = options_.tls;
      o.extra_args.insert(o.extra_args.end(),
                          {"--tls-cluster", "yes", "--tls-replication", "yes"});
      // The cluster bus always wants a client certificate (whatever
      // tls-auth-clients says): the nodes show the client one.
      if (options_.tls.client_cert_file.empty()) {
        throw std::runtime_error(
            "a TLS cluster needs tls.client_cert_file/client_key_file for "
            "its bus");
      }
      o.extra_args.insert(
          o.extra_args.end(),
          {"--tls-client-cert-file", options_.tls.client_cert_file,
           "--tls-client-key-file", options_.tls.client_key_file});
    }
    nodes_.push_back(std::make_unique<RedisServer>(o));
  }
  // Bounded: redis-cli waits for the nodes to join without end.
  std::string command = "timeout 60 redis-cli";
  if (Tls(options_)) {
    command += " --tls --cacert " + ShellQuote(options_.tls.ca_file);
    if (options_.tls.auth_clients) {
      command += " --cert " + ShellQuote(options_.tls.client_cert_file) +
                 " --key " + ShellQuote(options_.tls.client_key_file);
    }
  }
  command += " --cluster create";
  for (const auto& node : nodes_)
    command += " 127.0.0.1:" + std::to_string(node->client_port());
  command += " --cluster-replicas " + std::to_string(options_.replicas) +
             " --cluster-yes";
  const ShellResult created = RunShell(command);
  if (created.status != 0) {
    throw std::runtime_error("redis-cli --cluster create failed: " +
                             created.output);
  }
  if (!WaitForStable()) {
    throw std::runtime_error("the cluster did not become stable");
  }
}

RedisCluster::~RedisCluster() = default;

std::string RedisCluster::url(bool all_seeds) const {
  std::string hosts;
  for (const auto& node : nodes_) {
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") +
             std::to_string(node->client_port());
    if (!all_seeds) break;
  }
  return (Tls(options_) ? "rediss+cluster://" : "redis+cluster://") + hosts;
}

RedisOptions RedisCluster::ClientOptions(const std::string& url) const {
  RedisOptions o;
  o.url = url;
  o.connect_timeout = std::chrono::milliseconds(1000);
  if (Tls(options_)) o.tls.ca_file = options_.tls.ca_file;
  if (options_.tls.auth_clients) {
    o.tls.cert_file = options_.tls.client_cert_file;
    o.tls.key_file = options_.tls.client_key_file;
  }
  return o;
}

std::unique_ptr<RedisClient> RedisCluster::Client(size_t i) const {
  RedisOptions o = ClientOptions(nodes_[i]->url());
  o.pool_size = 1;
  return std::make_unique<RedisClient>(o);
}

std::string RedisCluster::NodeId(size_t i) const {
  return Client(i)->Execute({"CLUSTER", "MYID"}).str;
}

int RedisCluster::AnyLive() const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->pid() <= 0) continue;
    try {
      if (Client(i)->Execute({"PING"}).str == "PONG")
        return static_cast<int>(i);
    } catch (const Error&) {
    }
  }
  return -1;
}

int RedisCluster::OwnerOf(uint16_t slot, size_t asked) const {
  const Reply slots = Client(asked)->Execute({"CLUSTER", "SLOTS"});
  const std::map<int, long long> ports = SlotPorts(slots);
  const auto it = ports.find(slot);
  if (it == ports.end()) return -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->client_port() == it->second) return static_cast<int>(i);
  }
  return -1;
}

void RedisCluster::BeginMigration(uint16_t slot, size_t to) {
  const int from = OwnerOf(slot);
  if (from < 0) throw std::runtime_error("nobody serves the slot");
  const std::string s = std::to_string(slot);
  const Reply a = Client(to)->Execute({"CLUSTER", "SETSLOT", s, "IMPORTING",
                                       NodeId(static_cast<size_t>(from))});
  const Reply b =
      Client(static_cast<size_t>(from))
          ->Execute({"CLUSTER", "SETSLOT", s, "MIGRATING", NodeId(to)});
  if (a.is_error() || b.is_error()) {
    throw std::runtime_error("CLUSTER SETSLOT failed: " + a.str + " " + b.str);
  }
}

int RedisCluster::MigrateKeys(uint16_t slot, size_t to, int batch) {
  const int from = OwnerOf(slot);
  if (from < 0) throw std::runtime_error("nobody serves the slot");
  auto source = Client(static_cast<size_t>(from));
  const Reply keys =
      source->Execute({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot),
                       std::to_string(batch)});
  if (keys.elements.empty()) return 0;
  Command migrate{
      "MIGRATE", "127.0.0.1", std::to_string(nodes_[to]->client_port()),
      "",        "0",         "5000",
      "KEYS"};
  for (const Reply& key : keys.elements) migrate.push_back(key.str);
  const Reply r = source->Execute(migrate);
  if (r.is_error()) throw std::runtime_error("MIGRATE failed: " + r.str);
  return static_cast<int>(keys.elements.size());
}

void RedisCluster::FinishMigration(uint16_t slot, size_t to) {
  const int from = OwnerOf(slot);
  const std::string s = std::to_string(slot);
  const std::string id = NodeId(to);
  // The target first, then the source, then everyone: the order
  // redis-cli uses, so no moment has the slot owned by nobody.
  std::vector<size_t> order{to};
  if (from >= 0 && static_cast<size_t>(from) != to)
    order.push_back(static_cast<size_t>(from));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i != to && static_cast<int>(i) != from && nodes_[i]->pid() > 0)
      order.push_back(i);
  }
  for (size_t i : order) {
    const Reply r = Client(i)->Execute({"CLUSTER", "SETSLOT", s, "NODE", id});
    // A replica refuses SETSLOT; its master's change reaches it.
    if (r.is_error() && r.str.find("only with masters") == std::string::npos) {
      throw std::runtime_error("CLUSTER SETSLOT NODE failed: " + r.str);
    }
  }
}

bool RedisCluster::WaitForStable() {
  return WaitUntil(
      [&] {
        std::optional<std::map<int, long long>> agreed;
        for (size_t i = 0; i < nodes_.size(); ++i) {
          if (nodes_[i]->pid() <= 0) continue;
          try {
            auto client = Client(i);
            const std::string info = client->Execute({"CLUSTER", "INFO"}).str;
            if (info.find("cluster_state:ok") == std::string::npos)
              return false;
            std::map<int, long long> ports =
                SlotPorts(client->Execute({"CLUSTER", "SLOTS"}));
            if (ports.size() != 16384) return false;
            if (agreed && *agreed != ports) return false;
            agreed = std::move(ports);
            // Every replica of a master online (before a test kills it).
            const std::string repl =
                client->Execute({"INFO", "replication"}).str;
            if (repl.find("role:master") != std::string::npos &&
                options_.replicas > 0) {
              const size_t at = repl.find("connected_slaves:");
              const int connected = std::stoi(repl.substr(at + 17));
              size_t online = 0;
              for (size_t p = repl.find("state=online"); p != std::string::npos;
                   p = repl.find("state=online", p + 1))
                ++online;
              // A master that has slots has its replicas (one that lost its
              // replica to a failover has none left to wait for).
              if (connected > 0 && static_cast<int>(online) != connected)
                return false;
            }
          } catch (const Error&) {
            return false;
          }
        }
        return agreed.has_value();
      },
      kPatience);
}

int RedisCluster::WaitForPromotion(size_t killed, uint16_t slot) {
  int found = -1;
  WaitUntil(
      [&] {
        const int asked = AnyLive();
        if (asked < 0) return false;
        try {
          const int owner = OwnerOf(slot, static_cast<size_t>(asked));
          if (owner < 0 || static_cast<size_t>(owner) == killed) return false;
          found = owner;
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      kPatience);
  if (found < 0 || !WaitForStable()) return -1;
  return found;
}

}  // namespace lockfleet::testing
