#include "server/gated_http_server.h"

#include <unistd.h>

#include "pagellm/check.h"
#include "server/gate_stream.h"

namespace pagellm {

// httplib's accept loop enqueues one task per accepted socket; running it inline hands the
// socket to the gate at once (process_and_close_socket below only registers it), so the
// accepting thread never waits on a client.
class GatedHttpServer::InlineTaskQueue : public httplib::TaskQueue {
 public:
  explicit InlineTaskQueue(GatedHttpServer* server) : server_(server) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  // The listener has stopped: close what waits, finish what is being served.
  void shutdown() override {
    if (server_->gate_) server_->gate_->Shutdown();
  }

 private:
  GatedHttpServer* server_;
};

GatedHttpServer::GatedHttpServer() {
  new_task_queue = [this]() -> httplib::TaskQueue* { return new InlineTaskQueue(this); };
}

void GatedHttpServer::StartGate(const ConnectionLimits& limits) {
  CHECK(gate_ == nullptr) << "the gate starts once";
  gate_ = std::make_unique<ConnectionGate>(
      limits, [this](const ConnectionGate::Ready& ready) { return Serve(ready); });
}

GatedHttpServer::~GatedHttpServer() {
  if (gate_) gate_->Shutdown();
}

bool GatedHttpServer::process_and_close_socket(socket_t sock) {
  CHECK(gate_ != nullptr) << "StartGate() before listening";
  gate_->Admit(sock);
  return true;
}

bool GatedHttpServer::Serve(const ConnectionGate::Ready& ready) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  const auto read_timeout = std::chrono::duration_cast<milliseconds>(
      seconds(read_timeout_sec_) + microseconds(read_timeout_usec_));
  const auto write_timeout = std::chrono::duration_cast<milliseconds>(
      seconds(write_timeout_sec_) + microseconds(write_timeout_usec_));
  GateStream stream(ready, read_timeout, write_timeout);
  // The last request a connection may carry says "Connection: close".
  const bool last = keep_alive_max_count_ > 0 &&
                    static_cast<size_t>(ready.requests_served) + 1 >= keep_alive_max_count_;
  bool closed = false;
  const bool ok = process_request(stream, last, closed, nullptr);
  return ok && !last && !closed && stream.consumed_whole_request();
}

ConnectionGate::Counters GatedHttpServer::gate_counters() const {
  CHECK(gate_ != nullptr);
  return gate_->counters();
}

const ConnectionLimits& GatedHttpServer::effective_limits() const {
  CHECK(gate_ != nullptr);
  return gate_->limits();
}

}  // namespace pagellm
