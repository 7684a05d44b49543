// GET /openapi.json: the OpenAPI 3.1 document of the routes this server answers (vLLM serves
// FastAPI's; clients and gateways read it to discover the API). Paths and methods only, with
// the API-key security scheme; --root-path becomes the server URL.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace pagellm {

nlohmann::ordered_json OpenApiSpec(const std::string& root_path);

}  // namespace pagellm
