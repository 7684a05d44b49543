#include "server/sse_stream.h"

#include <chrono>

#include "server/http_util.h"
#include "spdlog/spdlog.h"

namespace pagellm {

bool PumpSse(Generation& gen, httplib::DataSink& sink, const SseCallbacks& cb,
             const std::string& request_id) {
  auto client_gone = [&] {
    gen.AbortAll();
    spdlog::info("Aborted request {}: the client disconnected", request_id);
    return false;
  };
  std::string out;
  if (cb.prologue) cb.prologue(&out);
  if (!out.empty() && !sink.write(out.data(), out.size())) return client_gone();
  GenerationItem item;
  while (true) {
    const Generation::Wait w = gen.Next(&item, std::chrono::milliseconds(500));
    if (w == Generation::Wait::kDone) break;
    if (w == Generation::Wait::kTimeout) {
      if (!sink.is_writable()) return client_gone();
      continue;
    }
    out.clear();
    cb.on_item(item, &out);
    if (!out.empty() && !sink.write(out.data(), out.size())) return client_gone();
  }
  out.clear();
  if (cb.epilogue) cb.epilogue(&out);
  out += kSseDone;
  if (!sink.write(out.data(), out.size())) return false;
  sink.done();
  return true;
}

}  // namespace pagellm
