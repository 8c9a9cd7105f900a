// TcpForwarder: listens on 127.0.0.1:port and relays each connection to a
// target loopback port. Gives the embedded broker a fixed bootstrap address
// although the mock cluster binds a kernel-chosen port.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace lockfleet::notifier {

class TcpForwarder {
 public:
  // Throws Error(kInvalidArgument) if the port cannot be bound.
  TcpForwarder(int listen_port, int target_port);
  ~TcpForwarder();  // closes the listener and every relayed connection
  TcpForwarder(const TcpForwarder&) = delete;
  TcpForwarder& operator=(const TcpForwarder&) = delete;

 private:
  void AcceptLoop();
  void Relay(int client_fd);

  int target_port_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written on shutdown to wake every poll()
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  struct RelayThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<RelayThread> relays_;  // mu_; finished ones are joined on accept
};

}  // namespace lockfleet::notifier
