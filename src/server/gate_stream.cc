#include "server/gate_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pagellm {

GateStream::GateStream(const ConnectionGate::Ready& ready, std::chrono::milliseconds read_timeout,
                       std::chrono::milliseconds write_timeout)
    : fd_(ready.fd),
      read_deadline_(ready.read_deadline),
      read_timeout_(read_timeout),
      write_timeout_(write_timeout),
      request_bytes_(ready.content_length >= 0
                         ? static_cast<int64_t>(ready.head_bytes) + ready.content_length
                         : -1) {}

short GateStream::Wait(short events, std::chrono::milliseconds timeout, bool reading) const {
  auto limit = std::chrono::steady_clock::now() + timeout;
  if (reading) limit = std::min(limit, read_deadline_);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        limit - std::chrono::steady_clock::now());
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n > 0) return p.revents;
    if (n == 0) return 0;
    if (errno != EINTR) return POLLERR;
  }
}

bool GateStream::is_readable() const {
  if (buffer_begin_ < buffer_end_) return true;
  return (Wait(POLLIN, read_timeout_, /*reading=*/true) & (POLLIN | POLLHUP | POLLERR)) != 0;
}

bool GateStream::is_writable() const {
  // A peer that hung up is not writable, though poll() would report POLLOUT for it: this is
  // how a stream notices a client that went away.
  const short revents = Wait(POLLOUT | POLLRDHUP, write_timeout_, /*reading=*/false);
  if (revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  return (revents & POLLOUT) != 0;
}

ssize_t GateStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (buffer_begin_ < buffer_end_) {
    const size_t n = std::min(size, buffer_end_ - buffer_begin_);
    std::memcpy(ptr, buffer_ + buffer_begin_, n);
    buffer_begin_ += n;
    return static_cast<ssize_t>(n);
  }
  // Within a request of known length, read ahead up to its end (never past it).
  size_t want = size;
  bool into_buffer = false;
  if (request_bytes_ >= 0) {
    const int64_t left = request_bytes_ - consumed_;
    if (left <= 0) return 0;  // the request is complete; the rest belongs to the next one
    want = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(sizeof(buffer_))));
    into_buffer = want > size;
    if (!into_buffer) want = std::min(size, want);
  }
  while (true) {
    const ssize_t n = recv(fd_, into_buffer ? buffer_ : ptr, want, MSG_DONTWAIT);
    if (n >= 0) {
      consumed_ += n;
      if (!into_buffer || n == 0) return n;
      buffer_begin_ = 0;
      buffer_end_ = static_cast<size_t>(n);
      const size_t give = std::min(size, buffer_end_);
      std::memcpy(ptr, buffer_, give);
      buffer_begin_ = give;
      return static_cast<ssize_t>(give);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if ((Wait(POLLIN, read_timeout_, /*reading=*/true) & (POLLIN | POLLHUP | POLLERR)) == 0)
      return -1;  // read timeout, or the request's read deadline passed
  }
}

ssize_t GateStream::write(const char* ptr, size_t size) {
  while (true) {
    const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if ((Wait(POLLOUT, write_timeout_, /*reading=*/false) & POLLOUT) == 0) return -1;
  }
}

void GateStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    SocketAddressText(addr, &ip, &port);
}

void GateStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    SocketAddressText(addr, &ip, &port);
}

bool GateStream::consumed_whole_request() const {
  if (buffer_begin_ < buffer_end_) return false;
  return request_bytes_ < 0 || consumed_ == request_bytes_;
}

}  // namespace pagellm
