#include "server/http_util.h"

namespace pagellm {
namespace {

template <typename Json>
StatusOr<Json> ParseObject(const std::string& body) {
  if (body.empty())
    return InvalidArgumentError("The request body is empty; expected a JSON object.");
  Json j;
  try {
    j = Json::parse(body);
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (1e400)
    return InvalidArgumentError(std::string("Malformed JSON in the request body: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgumentError("The request body must be a JSON object.");
  return j;
}

}  // namespace

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void SendJson(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

void SendError(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(error.Body(), "application/json");
}

StatusOr<nlohmann::json> ParseJsonObject(const std::string& body) {
  return ParseObject<nlohmann::json>(body);
}

StatusOr<nlohmann::ordered_json> ParseOrderedJsonObject(const std::string& body) {
  return ParseObject<nlohmann::ordered_json>(body);
}

std::string SseEvent(const nlohmann::ordered_json& j) {
  return "data: " + DumpJson(j) + "\n\n";
}

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace pagellm
