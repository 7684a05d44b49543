#include "outparse/partial_json_object.h"

#include "nlohmann/json.hpp"
#include "outparse/json_prefix.h"

namespace pagellm {
namespace {

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

}  // namespace

const PartialJsonField* PartialJsonObject::Find(std::string_view key) const {
  for (const PartialJsonField& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

std::optional<std::string> PartialJsonObject::StringField(std::string_view key) const {
  const PartialJsonField* f = Find(key);
  if (f == nullptr || !f->complete) return std::nullopt;
  auto v = nlohmann::json::parse(f->raw, nullptr, false);
  if (v.is_discarded() || !v.is_string()) return std::nullopt;
  return v.get<std::string>();
}

PartialJsonObject ReadPartialJsonObject(std::string_view t) {
  PartialJsonObject o;
  size_t i = SkipSpace(t, 0);
  if (i >= t.size()) return o;
  if (t[i] != '{') {
    o.error = true;
    return o;
  }
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == '}') {
    o.closed = true;
    o.end = i + 1;
    return o;
  }
  while (i < t.size()) {
    if (t[i] != '"') {
      o.error = true;
      return o;
    }
    const JsonPrefix key = CanonicalJsonPrefix(t.substr(i));
    if (key.error) o.error = true;
    if (!key.complete) return o;
    const auto key_value = nlohmann::json::parse(t.substr(i, key.end), nullptr, false);
    if (!key_value.is_string()) {  // e.g. not UTF-8
      o.error = true;
      return o;
    }
    i = SkipSpace(t, i + key.end);
    if (i >= t.size()) return o;
    if (t[i] != ':') {
      o.error = true;
      return o;
    }
    i = SkipSpace(t, i + 1);
    if (i >= t.size()) return o;
    const JsonPrefix value = CanonicalJsonPrefix(t.substr(i));
    if (value.error) {
      o.error = true;
      return o;
    }
    PartialJsonField f;
    f.key = key_value.get<std::string>();
    f.complete = value.complete;
    f.raw = value.complete ? t.substr(i, value.end) : t.substr(i);
    o.fields.push_back(std::move(f));
    if (!value.complete) return o;
    i = SkipSpace(t, i + value.end);
    if (i >= t.size()) return o;
    if (t[i] == '}') {
      o.closed = true;
      o.end = i + 1;
      return o;
    }
    if (t[i] != ',') {
      o.error = true;
      return o;
    }
    i = SkipSpace(t, i + 1);
  }
  return o;
}

}  // namespace pagellm
