// ConnectionGate: the part of the HTTP front end that decides when a connection deserves a
// thread. Accepted sockets wait in one epoll reactor thread until a whole request head (request
// line + headers, and a small body when it fits in the first read) has arrived; only then does a
// worker thread take the connection and serve the request. A client that connects and sends
// nothing, or trickles its headers a byte at a time, costs a file descriptor and a few hundred
// bytes of bookkeeping, never a thread; when its whole-head deadline passes it gets 408 and is
// closed. Idle keep-alive connections go back to the reactor between requests the same way.
//
// Limits: open connections in total and per client address (past them: 503 at once, closed),
// a head-size limit (431), the whole-head deadline, the keep-alive idle timeout and a body
// deadline that grows with the declared Content-Length (a floor on the upload rate).
//
// Threads: the accepting thread calls Admit(); one reactor thread; up to `workers` serving
// threads, started as requests need them.
// Nothing here knows HTTP beyond finding the end of the head and its Content-Length: serving is
// the callback's (GatedHttpServer hands the socket to cpp-httplib's request processing).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace pagellm {

struct ConnectionLimits {
  int max_connections = 16384;         // open connections, all clients (0: no limit)
  int max_connections_per_client = 0;  // open connections from one address (0: no limit)
  // From the first byte of a request (or from accept) to the end of its head.
  std::chrono::milliseconds head_timeout{10000};
  // Idle time allowed between two requests on a kept-alive connection (uvicorn's 5 s).
  std::chrono::milliseconds keep_alive_timeout{5000};
  // The body must arrive at no less than this rate once the head is in (bytes/s), after a
  // grace of head_timeout: an 8 MiB body gets 10 s + 128 s.
  double min_body_rate = 64.0 * 1024;
  size_t max_head_bytes = 16384;  // request line + headers; larger heads get 431
  int workers = 64;               // requests served at once (streams included)
};

// Where a request head ends, read from the bytes received so far.
struct HeadScan {
  enum class State { kIncomplete, kComplete, kTooLarge };
  State state = State::kIncomplete;
  size_t head_bytes = 0;       // through the blank line, when complete
  int64_t content_length = 0;  // 0 when absent; -1: chunked or malformed (length unknown)
};
HeadScan ScanRequestHead(std::string_view received, size_t max_head_bytes);

// The IP text and port of a socket address; ip stays empty for families other than IPv4/IPv6.
void SocketAddressText(const sockaddr_storage& addr, std::string* ip, int* port);

class ConnectionGate {
 public:
  // What a worker is handed: an accepted socket whose request head has arrived.
  struct Ready {
    int fd = -1;
    int requests_served = 0;     // before this one, on this connection
    size_t head_bytes = 0;       // request line + headers, through the blank line
    int64_t content_length = 0;  // declared body size; -1: unknown (chunked)
    // Reads of this request (head and body) must be done by then; writes are not bound by it.
    std::chrono::steady_clock::time_point read_deadline;
  };
  // Serves the request(s) waiting on `ready.fd`. Returns true to keep the connection for
  // another request (it goes back to the reactor), false to close it.
  using ServeFn = std::function<bool(const Ready& ready)>;

  struct Counters {
    int64_t open = 0;                // connections held (waiting + being served)
    int64_t serving = 0;             // connections a worker holds now
    int64_t rejected = 0;            // refused with 503 at the connection limits (total)
    int64_t head_timeouts = 0;       // closed by the head deadline (total)
    int64_t keep_alive_expired = 0;  // idle keep-alive connections closed (total)
  };

  ConnectionGate(const ConnectionLimits& limits, ServeFn serve);
  ~ConnectionGate();  // Shutdown()
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Takes ownership of an accepted socket. Past a connection limit it answers 503 and closes
  // it at once. Never blocks on the client.
  void Admit(int fd);
  // Closes every connection waiting for a request, lets the workers finish the requests they
  // hold and the ones already queued, then joins every thread. Idempotent.
  void Shutdown();
  Counters counters() const;
  // The effective limits (max_connections capped by the file-descriptor limit).
  const ConnectionLimits& limits() const { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiting {
    int fd = -1;
    std::string client;  // peer address, for the per-client count
    int requests_served = 0;
    bool got_bytes = false;  // any byte of the current request seen
    Clock::time_point deadline;
  };

  void ReactorLoop();
  void WorkerLoop();
  void Register(Waiting w);                 // reactor thread: into epoll
  void OnReadable(Waiting& w, bool* done);  // reactor thread
  void ExpireDeadlines(Clock::time_point now);
  void Dispatch(Waiting w, const HeadScan& scan);
  void Close(int fd, const std::string& client);  // close + Release
  void Release(const std::string& client);        // one connection fewer in the counts
  // Answers `status` with an OpenAI-style error body and closes `fd` (counts untouched).
  void Reject(int fd, int status, std::string_view reason);
  void Wake();

  ConnectionLimits limits_;
  ServeFn serve_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the inbox has something

  // Inbox of the reactor: newly accepted and kept-alive connections.
  std::mutex inbox_mu_;
  std::vector<Waiting> inbox_;
  // Reactor-owned: connections waiting for a request head, by fd.
  std::unordered_map<int, Waiting> waiting_;
  Clock::time_point last_sweep_;

  // Connection counts (Admit on the accepting thread, Close on reactor and workers).
  mutable std::mutex count_mu_;
  std::unordered_map<std::string, int> per_client_;
  int64_t open_ = 0;
  std::atomic<int64_t> serving_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> head_timeouts_{0};
  std::atomic<int64_t> keep_alive_expired_{0};

  // Work queue of the serving threads.
  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<std::pair<Ready, std::string>> work_;  // (connection, client address)
  int idle_workers_ = 0;                            // waiting on work_cv_

  std::atomic<bool> stopping_{false};
  std::thread reactor_;
  std::vector<std::thread> workers_;  // grown by the reactor thread up to limits_.workers
};

}  // namespace pagellm
