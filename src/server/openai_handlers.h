// The OpenAI-compatible endpoints: POST /v1/completions and POST /v1/chat/completions
// (streaming by SSE or not), /tokenize, /detokenize and /v1/models, shaped as vLLM answers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <vector>

#include "server/generation.h"
#include "server/serving_context.h"

namespace pagellm {

using Arrival = std::chrono::steady_clock::time_point;

void HandleCompletions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                       Arrival arrival);
void HandleChatCompletions(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                           Arrival arrival);

// POST /v1/embeddings (the pooling runner; vLLM's request and response shapes).
void HandleEmbeddings(ServingContext& ctx, const httplib::Request& req, httplib::Response& res,
                      Arrival arrival);

// POST /tokenize (a prompt, or chat messages rendered with the template) and POST /detokenize,
// as vLLM's; GET /v1/models.
void HandleTokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleDetokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void HandleModels(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);

// Shared by both generation endpoints: starts the engine requests, or answers the error (400 for a
// request the engine refuses, e.g. a prompt longer than max-model-len; 503 when the queue is full
// or the server is stopping) and returns null.
std::unique_ptr<Generation> StartOrRespond(ServingContext& ctx, std::vector<EngineRequest> requests,
                                           int n, Arrival arrival, httplib::Response& res);

// For a finished non-streaming request: the error to answer instead of a response when an
// engine request failed or was aborted (server stopping, engine failure); nullopt if none.
std::optional<ApiError> ResultError(const ServingContext& ctx,
                                    const std::vector<ChoiceResult>& results);

}  // namespace pagellm
