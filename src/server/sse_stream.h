// Pumps a Generation into a server-sent-events response (OpenAI streaming): the handler
// supplies how outputs become events; this loop does the waiting, the writing, the final
// "data: [DONE]", and the abort when the client goes away. A hang-up shows as a failed write
// (cpp-httplib gives no other view of the socket), so it is noticed within a token or two.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

#include "server/generation.h"

namespace pagellm {

struct SseCallbacks {
  std::function<void(std::string* out)> prologue;  // events before any output (may be null)
  std::function<void(GenerationItem& item, std::string* out)> on_item;
  std::function<void(std::string* out)> epilogue;  // events after the last output (may be null)
};

// Runs the whole stream inside one content-provider call. Returns false (and aborts the
// generation) when the client disconnected.
bool PumpSse(Generation& gen, httplib::DataSink& sink, const SseCallbacks& callbacks,
             const std::string& request_id);

}  // namespace pagellm
