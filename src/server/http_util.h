// Small helpers shared by the HTTP handlers: JSON bodies in and out, errors, SSE events.
#pragma once

#include <httplib.h>

#include <string>

#include "nlohmann/json.hpp"
#include "pagellm/status.h"
#include "server/api_error.h"

namespace pagellm {

// Serializes a response body. Generated text is valid UTF-8, but a client's strings echoed
// back need not be: they are replaced, never thrown on.
std::string DumpJson(const nlohmann::json& j);
std::string DumpJson(const nlohmann::ordered_json& j);

void SendJson(httplib::Response& res, int status, const nlohmann::ordered_json& body);
void SendError(httplib::Response& res, const ApiError& error);

// Parses a request body that must be a JSON object (400 otherwise, with the parser's reason:
// malformed JSON, invalid UTF-8, a lone surrogate escape, ...).
StatusOr<nlohmann::json> ParseJsonObject(const std::string& body);
StatusOr<nlohmann::ordered_json> ParseOrderedJsonObject(const std::string& body);

// "data: <json>\n\n", one server-sent event.
std::string SseEvent(const nlohmann::ordered_json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Length of a UTF-8 string in code points (OpenAI's text_offset counts characters).
size_t Utf8Length(const std::string& s);

}  // namespace pagellm
