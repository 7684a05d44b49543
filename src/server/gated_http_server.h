// GatedHttpServer: cpp-httplib's request processing (routing, parsing, chunked responses)
// behind a ConnectionGate instead of httplib's thread-per-connection pool. httplib's accepting
// thread hands each socket to the gate (through an inline task queue and the
// process_and_close_socket hook); a gate worker serves a request only once its head has
// arrived, through GateStream, and gives a kept-alive connection back to the gate afterwards.
#pragma once

#include <httplib.h>

#include <memory>

#include "server/connection_gate.h"

namespace pagellm {

class GatedHttpServer : public httplib::Server {
 public:
  GatedHttpServer();
  ~GatedHttpServer() override;

  // Starts the gate's threads. Call once, before listening (on the thread that will then
  // start the listener).
  void StartGate(const ConnectionLimits& limits);
  ConnectionGate::Counters gate_counters() const;
  // The limits in force (the connection cap lowered to the open-file limit).
  const ConnectionLimits& effective_limits() const;

 private:
  class InlineTaskQueue;
  // httplib's accept loop calls this for every accepted socket: it goes to the gate.
  bool process_and_close_socket(socket_t sock) override;
  // On a gate worker: serves the request whose head has arrived on `ready.fd`.
  bool Serve(const ConnectionGate::Ready& ready);

  std::unique_ptr<ConnectionGate> gate_;
};

}  // namespace pagellm
