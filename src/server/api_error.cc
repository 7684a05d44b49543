#include "server/api_error.h"

#include "fmt/format.h"

namespace pagellm {

ApiError ApiError::BadRequest(std::string message, std::string param) {
  return {400, "BadRequestError", std::move(message), std::move(param)};
}

ApiError ApiError::Unauthorized() {
  return {401, "AuthenticationError", "Unauthorized", ""};
}

ApiError ApiError::NotFound(std::string message) {
  return {404, "NotFoundError", std::move(message), ""};
}

ApiError ApiError::MethodNotAllowed() {
  return {405, "MethodNotAllowedError", "Method Not Allowed", ""};
}

ApiError ApiError::PayloadTooLarge(size_t limit) {
  return {413, "RequestEntityTooLargeError",
          fmt::format("Request body is larger than the server's limit of {} bytes "
                      "(--max-body-size).",
                      limit),
          ""};
}

ApiError ApiError::Unavailable(std::string message) {
  return {503, "ServiceUnavailableError", std::move(message), ""};
}

ApiError ApiError::Internal(std::string message) {
  return {500, "InternalServerError", std::move(message), ""};
}

ApiError ApiError::FromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
    case StatusCode::kFailedPrecondition:
      return BadRequest(status.message());
    case StatusCode::kNotFound:
      return NotFound(status.message());
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
      return Unavailable(status.message());
    case StatusCode::kUnauthenticated:
      return Unauthorized();
    default:
      return Internal(status.message());
  }
}

nlohmann::ordered_json ApiError::ToJson() const {
  using OJson = nlohmann::ordered_json;
  OJson error = {{"message", message},
                 {"type", type},
                 {"param", param.empty() ? OJson(nullptr) : OJson(param)},
                 {"code", status}};
  return {{"error", std::move(error)}};
}

std::string ApiError::Body() const {
  return ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pagellm
