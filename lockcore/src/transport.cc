#include "transport.h"

#include <utility>

#include "lockfleet/lockcore/error.h"
#include "tls.h"

namespace lockfleet::internal {
namespace {

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(Socket socket) : socket_(std::move(socket)) {}

  void Write(std::string_view data, Deadline deadline) override {
    socket_.Write(data.data(), data.size(), deadline);
  }
  size_t Read(char* buffer, size_t size, Deadline deadline) override {
    return socket_.Read(buffer, size, deadline);
  }
  bool secure() const override { return false; }

 private:
  Socket socket_;
};

}  // namespace

std::unique_ptr<Transport> OpenTransport(const RedisEndpoint& endpoint,
                                         const TlsContext* tls,
                                         Deadline deadline) {
  if (!endpoint.unix_path.empty()) {
    if (tls != nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  "TLS over a unix socket: Redis serves TLS on TCP ports");
    }
    return std::make_unique<PlainTransport>(
        Socket::ConnectUnix(endpoint.unix_path, deadline));
  }
  Socket socket = Socket::ConnectTcp(endpoint.host, endpoint.port, deadline);
  if (tls == nullptr)
    return std::make_unique<PlainTransport>(std::move(socket));
  return tls->Handshake(std::move(socket), endpoint.host, endpoint.port,
                        deadline);
}

}  // namespace lockfleet::internal
