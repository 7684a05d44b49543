#include "server/openapi_spec.h"

namespace pagellm {

nlohmann::ordered_json OpenApiSpec(const std::string& root_path) {
  using json = nlohmann::ordered_json;
  struct Op {
    const char* path;
    const char* method;
    const char* summary;
    bool key;  // needs the API key when one is set
  };
  static constexpr Op kOps[] = {
      {"/v1/completions", "post", "Create Completion", true},
      {"/v1/chat/completions", "post", "Create Chat Completion", true},
      {"/v1/embeddings", "post", "Create Embedding", true},
      {"/v1/models", "get", "Show Available Models", true},
      {"/v1/models/{model}", "get", "Show Model", true},
      {"/invocations", "post", "Invocations", true},
      {"/tokenize", "post", "Tokenize", false},
      {"/detokenize", "post", "Detokenize", false},
      {"/health", "get", "Health", false},
      {"/ping", "get", "Ping", false},
      {"/ping", "post", "Ping", false},
      {"/load", "get", "Get Server Load Metrics", false},
      {"/version", "get", "Show Version", false},
      {"/metrics", "get", "Metrics", false},
      {"/reset_prefix_cache", "post", "Reset Prefix Cache", true},
  };
  json paths = json::object();
  for (const Op& op : kOps) {
    json o = {{"summary", op.summary},
              {"responses", {{"200", {{"description", "Successful Response"}}}}}};
    if (op.key) o["security"] = json::array({{{"bearer", json::array()}}});
    paths[op.path][op.method] = std::move(o);
  }
  json spec = {{"openapi", "3.1.0"},
               {"info", {{"title", "pagellm"}, {"version", PAGELLM_VERSION}}},
               {"paths", std::move(paths)},
               {"components",
                {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}}};
  if (!root_path.empty()) spec["servers"] = json::array({{{"url", root_path}}});
  return spec;
}

}  // namespace pagellm
