// ApiError: an HTTP error in the shape vLLM's OpenAI-compatible server (and OpenAI) answers
// with:
//   {"error": {"message": "...", "type": "BadRequestError", "param": null, "code": 400}}
// The official clients read error.message and map the status code to their exception types.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "pagellm/status.h"

namespace pagellm {

struct ApiError {
  int status = 400;
  std::string type;
  std::string message;
  std::string param;  // the offending request field; empty = null

  static ApiError BadRequest(std::string message, std::string param = "");
  static ApiError Unauthorized();
  static ApiError NotFound(std::string message);
  static ApiError MethodNotAllowed();
  static ApiError PayloadTooLarge(size_t limit);
  static ApiError Unavailable(std::string message);
  static ApiError Internal(std::string message);
  // InvalidArgument / OutOfRange / Unimplemented -> 400, NotFound -> 404, Unavailable /
  // ResourceExhausted -> 503, Unauthenticated -> 401, anything else -> 500.
  static ApiError FromStatus(const Status& status);

  nlohmann::ordered_json ToJson() const;
  // ToJson() serialized (invalid UTF-8 in a message is replaced, never thrown on).
  std::string Body() const;
};

}  // namespace pagellm
