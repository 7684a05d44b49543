#include "server/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "pagellm/check.h"
#include "spdlog/spdlog.h"

namespace pagellm {
namespace {

constexpr int kReservedFds = 256;  // model files, logs, the listener, pipes: not for clients
constexpr auto kSweepInterval = std::chrono::milliseconds(50);

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  std::string ip;
  int port = 0;
  SocketAddressText(addr, &ip, &port);
  return ip.empty() ? "local" : ip;
}

// The soft limit on open files raised to the hard one; returns the soft limit in force.
int64_t RaiseFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(lim.rlim_cur);
}

const char* StatusText(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

const char* ErrorType(int status) {
  switch (status) {
    case 408:
      return "RequestTimeoutError";
    case 431:
      return "BadRequestError";
    default:
      return "ServiceUnavailableError";
  }
}

}  // namespace

void SocketAddressText(const sockaddr_storage& addr, std::string* ip, int* port) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    *port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    *port = ntohs(in6->sin6_port);
  }
  *ip = text;
}

HeadScan ScanRequestHead(std::string_view received, size_t max_head_bytes) {
  HeadScan scan;
  const size_t end = received.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (received.size() >= max_head_bytes) scan.state = HeadScan::State::kTooLarge;
    return scan;
  }
  scan.head_bytes = end + 4;
  if (scan.head_bytes > max_head_bytes) {
    scan.state = HeadScan::State::kTooLarge;
    return scan;
  }
  scan.state = HeadScan::State::kComplete;
  // Header lines after the request line: "Name: value\r\n".
  std::string_view head = received.substr(0, end + 2);
  size_t line_start = head.find("\r\n");
  bool chunked = false;
  while (line_start != std::string_view::npos && line_start + 2 < head.size()) {
    const size_t from = line_start + 2;
    const size_t line_end = head.find("\r\n", from);
    const std::string_view line = head.substr(from, line_end - from);
    line_start = line_end;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "transfer-encoding")) {
      chunked = true;
    } else if (EqualsIgnoreCase(name, "content-length")) {
      int64_t n = 0;
      bool valid = !value.empty() && value.size() <= 18;
      for (char c : value) {
        if (c < '0' || c > '9') {
          valid = false;
          break;
        }
        n = n * 10 + (c - '0');
      }
      // A malformed length is left for the HTTP parser to reject.
      scan.content_length = valid ? n : -1;
    }
  }
  if (chunked) scan.content_length = -1;
  return scan;
}

ConnectionGate::ConnectionGate(const ConnectionLimits& limits, ServeFn serve)
    : limits_(limits), serve_(std::move(serve)) {
  CHECK(limits_.workers > 0);
  const int64_t file_limit = RaiseFileLimit();
  if (file_limit > 0 && file_limit - kReservedFds < INT32_MAX) {
    const int cap = static_cast<int>(std::max<int64_t>(64, file_limit - kReservedFds));
    if (limits_.max_connections <= 0 || limits_.max_connections > cap) {
      if (limits_.max_connections > cap)
        spdlog::warn(
            "--max-connections {} is above what the open-file limit ({}) allows; "
            "using {}",
            limits_.max_connections, file_limit, cap);
      limits_.max_connections = cap;
    }
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0) << std::strerror(errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  CHECK(epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0) << std::strerror(errno);
  last_sweep_ = Clock::now();
  reactor_ = std::thread([this] { ReactorLoop(); });
  // Workers start on demand (Dispatch), so a server that fails at start-up, or serves a few
  // clients, does not create and join hundreds of threads.
  workers_.reserve(limits_.workers);
}

ConnectionGate::~ConnectionGate() {
  Shutdown();
  close(epoll_fd_);
  close(wake_fd_);
}

void ConnectionGate::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void ConnectionGate::Admit(int fd) {
  if (stopping_.load()) {
    close(fd);
    return;
  }
  std::string client = PeerAddress(fd);
  {
    std::lock_guard<std::mutex> lock(count_mu_);
    if (limits_.max_connections > 0 && open_ >= limits_.max_connections) {
      rejected_.fetch_add(1);
      Reject(fd, 503, "The server has too many open connections; retry shortly.");
      return;
    }
    if (limits_.max_connections_per_client > 0) {
      int& mine = per_client_[client];
      if (mine >= limits_.max_connections_per_client) {
        rejected_.fetch_add(1);
        Reject(fd, 503, "Too many open connections from this address; retry shortly.");
        return;
      }
      ++mine;
    }
    ++open_;
  }
  Waiting w;
  w.fd = fd;
  w.client = std::move(client);
  w.deadline = Clock::now() + limits_.head_timeout;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    inbox_.push_back(std::move(w));
  }
  Wake();
}

void ConnectionGate::Reject(int fd, int status, std::string_view reason) {
  const std::string body =
      fmt::format(R"({{"error":{{"message":"{}","type":"{}","param":null,"code":{}}}}})", reason,
                  ErrorType(status), status);
  const std::string response = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      status, StatusText(status), body.size(), body);
  // Best effort: a client that does not read gets its connection closed all the same.
  [[maybe_unused]] const ssize_t n =
      send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  close(fd);
}

void ConnectionGate::Close(int fd, const std::string& client) {
  close(fd);
  Release(client);
}

void ConnectionGate::Release(const std::string& client) {
  std::lock_guard<std::mutex> lock(count_mu_);
  --open_;
  if (limits_.max_connections_per_client > 0) {
    auto it = per_client_.find(client);
    if (it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
  }
}

void ConnectionGate::Register(Waiting w) {
  const int fd = w.fd;
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  epoll_event ev{};
  // Edge-triggered: the bytes stay in the socket (they are only peeked at) until a worker
  // reads them, so a level-triggered registration would report the same bytes forever.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    spdlog::warn("epoll_ctl(ADD) failed for a connection: {}", std::strerror(errno));
    Close(fd, w.client);
    return;
  }
  auto [it, inserted] = waiting_.emplace(fd, std::move(w));
  CHECK(inserted) << "fd " << fd << " registered twice";
  // Bytes may have arrived before the registration (a kept-alive client's next request).
  bool done = false;
  OnReadable(it->second, &done);
  if (done) waiting_.erase(fd);
}

void ConnectionGate::OnReadable(Waiting& w, bool* done) {
  *done = false;
  thread_local std::string peek;
  peek.resize(limits_.max_head_bytes);
  const ssize_t n = recv(w.fd, peek.data(), peek.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    // The client went away (or the socket failed) before sending a whole request.
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
    Close(w.fd, w.client);
    *done = true;
    return;
  }
  if (n < 0) return;
  if (!w.got_bytes) {
    w.got_bytes = true;
    // A kept-alive connection's idle timeout becomes the head deadline at its first byte.
    if (w.requests_served > 0) w.deadline = Clock::now() + limits_.head_timeout;
  }
  const std::string_view received(peek.data(), static_cast<size_t>(n));
  const HeadScan scan = ScanRequestHead(received, limits_.max_head_bytes);
  if (scan.state == HeadScan::State::kIncomplete) return;
  if (scan.state == HeadScan::State::kComplete && scan.content_length > 0) {
    // A small body that fits in the head buffer is waited for here too, so that a slow
    // upload of one does not hold a worker; the head deadline covers the wait.
    const size_t whole = scan.head_bytes + static_cast<size_t>(scan.content_length);
    if (whole <= limits_.max_head_bytes && received.size() < whole) return;
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
  *done = true;
  if (scan.state == HeadScan::State::kTooLarge) {
    Reject(w.fd, 431, "The request head is too large.");
    Release(w.client);
    return;
  }
  Dispatch(std::move(w), scan);
}

void ConnectionGate::Dispatch(Waiting w, const HeadScan& scan) {
  Ready ready;
  ready.fd = w.fd;
  ready.requests_served = w.requests_served;
  ready.head_bytes = scan.head_bytes;
  ready.content_length = scan.content_length;
  auto body_time = std::chrono::milliseconds(0);
  if (scan.content_length > 0)
    body_time = std::chrono::milliseconds(static_cast<int64_t>(
        1000.0 * static_cast<double>(scan.content_length) / std::max(1.0, limits_.min_body_rate)));
  ready.read_deadline = Clock::now() + limits_.head_timeout + body_time;
  bool spawn = false;
  {
    std::lock_guard<std::mutex> lock(work_mu_);
    work_.emplace_back(ready, std::move(w.client));
    spawn = idle_workers_ < static_cast<int>(work_.size()) &&
            static_cast<int>(workers_.size()) < limits_.workers;
  }
  // Only the reactor thread adds workers; Shutdown joins them after the reactor has ended.
  if (spawn) workers_.emplace_back([this] { WorkerLoop(); });
  work_cv_.notify_one();
}

void ConnectionGate::ExpireDeadlines(Clock::time_point now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Waiting& w = it->second;
    if (now < w.deadline) {
      ++it;
      continue;
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
    if (w.got_bytes) {
      head_timeouts_.fetch_add(1);
      Reject(w.fd, 408, "The request head did not arrive in time.");
      Release(w.client);
    } else {
      // Nothing sent: a fresh connection that never spoke, or an idle kept-alive one.
      (w.requests_served > 0 ? keep_alive_expired_ : head_timeouts_).fetch_add(1);
      Close(w.fd, w.client);
    }
    it = waiting_.erase(it);
  }
}

void ConnectionGate::ReactorLoop() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  while (!stopping_.load()) {
    const int n =
        epoll_wait(epoll_fd_, events, kMaxEvents, static_cast<int>(kSweepInterval.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = read(wake_fd_, &count, sizeof(count));
        std::vector<Waiting> arrived;
        {
          std::lock_guard<std::mutex> lock(inbox_mu_);
          arrived.swap(inbox_);
        }
        for (Waiting& w : arrived) Register(std::move(w));
        continue;
      }
      auto it = waiting_.find(fd);
      if (it == waiting_.end()) continue;
      bool done = false;
      OnReadable(it->second, &done);
      if (done) waiting_.erase(it);
    }
    const Clock::time_point now = Clock::now();
    if (now - last_sweep_ >= kSweepInterval) {
      last_sweep_ = now;
      ExpireDeadlines(now);
    }
  }
  // Shutting down: nobody will serve the connections still waiting for a request.
  for (auto& [fd, w] : waiting_) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    Close(fd, w.client);
  }
  waiting_.clear();
  std::vector<Waiting> arrived;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    arrived.swap(inbox_);
  }
  for (Waiting& w : arrived) Close(w.fd, w.client);
}

void ConnectionGate::WorkerLoop() {
  while (true) {
    std::pair<Ready, std::string> item;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      ++idle_workers_;
      work_cv_.wait(lock, [this] { return !work_.empty() || stopping_.load(); });
      --idle_workers_;
      if (work_.empty()) return;  // stopping, and the queue is drained
      item = std::move(work_.front());
      work_.pop_front();
    }
    const Ready& ready = item.first;
    serving_.fetch_add(1);
    bool keep = false;
    try {
      keep = serve_(ready);
    } catch (const std::exception& e) {
      spdlog::error("serving a connection failed: {}", e.what());
    }
    serving_.fetch_sub(1);
    if (keep && !stopping_.load()) {
      Waiting w;
      w.fd = ready.fd;
      w.client = std::move(item.second);
      w.requests_served = ready.requests_served + 1;
      w.deadline = Clock::now() + limits_.keep_alive_timeout;
      {
        std::lock_guard<std::mutex> lock(inbox_mu_);
        inbox_.push_back(std::move(w));
      }
      Wake();
    } else {
      Close(ready.fd, item.second);
    }
  }
}

void ConnectionGate::Shutdown() {
  stopping_.store(true);
  Wake();
  work_cv_.notify_all();
  if (reactor_.joinable()) reactor_.join();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
  // Connections that workers handed back after the reactor stopped.
  std::vector<Waiting> arrived;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    arrived.swap(inbox_);
  }
  for (Waiting& w : arrived) Close(w.fd, w.client);
}

ConnectionGate::Counters ConnectionGate::counters() const {
  Counters c;
  {
    std::lock_guard<std::mutex> lock(count_mu_);
    c.open = open_;
  }
  c.serving = serving_.load();
  c.rejected = rejected_.load();
  c.head_timeouts = head_timeouts_.load();
  c.keep_alive_expired = keep_alive_expired_.load();
  return c;
}

}  // namespace pagellm
