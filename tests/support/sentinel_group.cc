#include "support/sentinel_group.h"

#include <stdexcept>

#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

constexpr std::chrono::seconds kPatience{60};

// The number after "<field>:" in `info`, or -1.
long long Field(const std::string& info, const std::string& field) {
  const size_t at = info.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(info.substr(at + field.size() + 1));
}

}  // namespace

SentinelGroup::SentinelGroup(Options options) : options_(std::move(options)) {
  const bool tls = !options_.tls.cert_file.empty();
  auto node_options = [&] {
    RedisServer::Options o{.tcp = true};
    if (tls) {
      o.tls = options_.tls;
      o.extra_args = {"--tls-replication", "yes"};
    }
    return o;
  };
  nodes_.push_back(std::make_unique<RedisServer>(node_options()));
  const int master_port = Port(*nodes_[0]);
  for (int i = 0; i < options_.replicas; ++i) {
    RedisServer::Options o = node_options();
    o.extra_args.insert(o.extra_args.end(), {"--replicaof", "127.0.0.1",
                                             std::to_string(master_port)});
    nodes_.push_back(std::make_unique<RedisServer>(o));
  }
  if (!WaitForReplicas(nodes_.size() - 1)) {
    throw std::runtime_error("the replicas did not sync with the master");
  }
  const std::string& name = options_.master_name;
  std::string conf = "sentinel monitor " + name + " 127.0.0.1 " +
                     std::to_string(master_port) + " 2\n" +
                     "sentinel down-after-milliseconds " + name + " " +
                     std::to_string(options_.down_after.count()) + "\n" +
                     "sentinel failover-timeout " + name + " 10000\n" +
                     "sentinel parallel-syncs " + name + " 1\n";
  if (!options_.sentinel_password.empty()) {
    conf += "sentinel sentinel-pass " + options_.sentinel_password + "\n";
  }
  for (int i = 0; i < options_.sentinels; ++i) {
    RedisServer::Options o = node_options();
    o.sentinel_config = conf;
    o.requirepass = options_.sentinel_password;
    sentinels_.push_back(std::make_unique<RedisServer>(o));
  }
  // Every sentinel knows every replica and the other sentinels.
  const bool ready = WaitUntil(
      [&] {
        for (auto& s : sentinels_) {
          RedisClient& client = Poller(s->url());
          try {
            const Reply replicas =
                client.Execute({"SENTINEL", "replicas", name});
            const Reply others =
                client.Execute({"SENTINEL", "sentinels", name});
            if (replicas.elements.size() != nodes_.size() - 1 ||
                others.elements.size() != sentinels_.size() - 1) {
              return false;
            }
          } catch (const Error&) {
            return false;
          }
        }
        return true;
      },
      kPatience);
  if (!ready) throw std::runtime_error("the sentinels did not meet");
}

SentinelGroup::~SentinelGroup() = default;

int SentinelGroup::Port(const RedisServer& server) const {
  return options_.tls.cert_file.empty() ? server.port() : server.tls_port();
}

int SentinelGroup::IndexOfPort(int port) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (Port(*nodes_[i]) == port) return static_cast<int>(i);
  }
  return -1;
}

std::string SentinelGroup::url() const {
  std::string hosts;
  for (const auto& s : sentinels_) {
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") +
             std::to_string(Port(*s));
  }
  return (options_.tls.cert_file.empty() ? "redis+sentinel://"
                                         : "rediss+sentinel://") +
         hosts + "/" + options_.master_name;
}

std::unique_ptr<RedisClient> SentinelGroup::Client(
    const std::string& url) const {
  RedisOptions o;
  o.url = url;
  o.pool_size = 1;
  o.connect_timeout = std::chrono::milliseconds(1000);
  if (!options_.tls.cert_file.empty()) o.tls.ca_file = options_.tls.ca_file;
  return std::make_unique<RedisClient>(o);
}

RedisClient& SentinelGroup::Poller(const std::string& url) {
  std::unique_ptr<RedisClient>& client = pollers_[url];
  if (!client) client = Client(url);
  return *client;
}

int SentinelGroup::MasterIndex() {
  for (auto& s : sentinels_) {
    try {
      const Reply r = Poller(s->url()).Execute(
          {"SENTINEL", "get-master-addr-by-name", options_.master_name});
      if (r.elements.size() == 2)
        return IndexOfPort(std::stoi(r.elements[1].str));
    } catch (const Error&) {
    }
  }
  return -1;
}

int SentinelGroup::WaitForNewMaster(int old_index) {
  int found = -1;
  WaitUntil(
      [&] {
        int agreed = -1;
        for (auto& s : sentinels_) {
          try {
            const Reply r = Poller(s->url()).Execute(
                {"SENTINEL", "get-master-addr-by-name", options_.master_name});
            if (r.elements.size() != 2) return false;
            const int index = IndexOfPort(std::stoi(r.elements[1].str));
            if (index == old_index || (agreed >= 0 && index != agreed))
              return false;
            agreed = index;
          } catch (const Error&) {
            // A stopped sentinel does not vote.
          }
        }
        if (agreed < 0) return false;
        try {
          const Reply role = Poller(nodes_[agreed]->url()).Execute({"ROLE"});
          if (role.elements.empty() || role.elements[0].str != "master")
            return false;
        } catch (const Error&) {
          return false;
        }
        found = agreed;
        return true;
      },
      kPatience);
  return found;
}

int SentinelGroup::Failover() {
  const int old_index = MasterIndex();
  const bool asked = WaitUntil(
      [&] {
        // -NOGOODSLAVE until a replica looks healthy to this sentinel.
        try {
          const Reply r =
              Poller(sentinels_[0]->url())
                  .Execute({"SENTINEL", "FAILOVER", options_.master_name});
          return r.str == "OK";
        } catch (const Error&) {
          return false;
        }
      },
      kPatience);
  if (!asked) throw std::runtime_error("SENTINEL FAILOVER was refused");
  return WaitForNewMaster(old_index);
}

bool SentinelGroup::WaitForReplicas(size_t count) {
  return WaitUntil(
      [&] {
        const int master =
            nodes_.size() == 1 || sentinels_.empty() ? 0 : MasterIndex();
        if (master < 0) return false;
        try {
          const std::string info = Poller(nodes_[master]->url())
                                       .Execute({"INFO", "replication"})
                                       .str;
          if (Field(info, "connected_slaves") != static_cast<long long>(count))
            return false;
          // Every one of them online (state=online).
          size_t online = 0;
          for (size_t at = info.find("state=online"); at != std::string::npos;
               at = info.find("state=online", at + 1))
            ++online;
          return online == count;
        } catch (const Error&) {
          return false;
        }
      },
      kPatience);
}

}  // namespace lockfleet::testing
