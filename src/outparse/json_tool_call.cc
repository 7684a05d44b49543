#include "outparse/json_tool_call.h"

#include "outparse/json_prefix.h"
#include "outparse/partial_json_object.h"

namespace pagellm {

JsonToolCallRead ReadJsonToolCall(std::string_view text) {
  JsonToolCallRead r;
  const PartialJsonObject o = ReadPartialJsonObject(text);
  r.error = o.error;
  if (o.error) return r;
  if (const PartialJsonField* name = o.Find("name"); name != nullptr && name->complete) {
    auto s = o.StringField("name");
    if (!s) {
      r.error = true;
      return r;
    }
    r.call.name = std::move(*s);
  }
  const PartialJsonField* args = o.Find("arguments");
  if (args == nullptr) args = o.Find("parameters");
  if (args != nullptr) r.call.arguments = CanonicalJsonPrefix(args->raw).text;
  if (o.closed) {
    if (r.call.name.empty()) {
      r.error = true;
      return r;
    }
    if (args == nullptr) r.call.arguments = "{}";
    r.call.complete = true;
    r.end = o.end;
  }
  return r;
}

}  // namespace pagellm
