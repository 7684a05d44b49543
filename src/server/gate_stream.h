// GateStream: httplib::Stream over a non-blocking socket handed out by ConnectionGate. Reads
// wait with poll() up to the read timeout and never past the request's read deadline (the
// body-rate floor), and never consume bytes beyond the current request when its length is
// known, so a kept-alive connection's next request stays in the socket for the gate to see.
// poll() rather than select(): descriptors above 1024 are normal with thousands of clients.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "server/connection_gate.h"

namespace pagellm {

class GateStream : public httplib::Stream {
 public:
  GateStream(const ConnectionGate::Ready& ready, std::chrono::milliseconds read_timeout,
             std::chrono::milliseconds write_timeout);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  // True when exactly the request's head and declared body were read (nothing of it left in
  // the socket), so the connection can carry another request.
  bool consumed_whole_request() const;

 private:
  // Waits for `events` up to `timeout` (capped by `deadline` for reads); returns revents.
  short Wait(short events, std::chrono::milliseconds timeout, bool reading) const;

  int fd_;
  std::chrono::steady_clock::time_point read_deadline_;
  std::chrono::milliseconds read_timeout_;
  std::chrono::milliseconds write_timeout_;
  // Bytes of this request (head + declared body); -1 when unknown (chunked or no length).
  int64_t request_bytes_;
  int64_t consumed_ = 0;  // bytes taken from the socket
  char buffer_[4096];     // read-ahead within the request (httplib reads heads byte by byte)
  size_t buffer_begin_ = 0;
  size_t buffer_end_ = 0;
};

}  // namespace pagellm
