#include "grammar/json_schema_converter.h"

#include <cmath>
#include <map>
#include <set>

#include "fmt/format.h"
#include "grammar/code_point_set.h"
#include "grammar/integer_range.h"
#include "grammar/regex_converter.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;

// Regexes of the supported string formats, over the string's characters (none needs escaping).
const std::map<std::string, std::string>& Formats() {
  static const auto* formats = [] {
    const std::string date =
        "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
        "02-(0[1-9]|1[0-9]|2[0-8]))";
    const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5]"
        "[0-9])";
    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    return new std::map<std::string, std::string>{
        {"date", date},
        {"time", time},
        {"date-time", date + "T" + time},
        {"email",
         "[a-zA-Z0-9_+-]+(\\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?"
         "(\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"ipv4", octet + "(\\." + octet + "){3}"},
    };
  }();
  return *formats;
}

// Keywords that only annotate.
const std::set<std::string>& Annotations() {
  static const auto* keys = new std::set<std::string>{
      "title",    "description",   "default",          "examples",        "$schema", "$id",
      "$comment", "deprecated",    "readOnly",         "writeOnly",       "$anchor", "strict",
      "name",     "discriminator", "contentMediaType", "contentEncoding", "$defs",   "definitions"};
  return *keys;
}

class SchemaConverter {
 public:
  SchemaConverter(const Json& root, const JsonGrammarOptions& options)
      : root_(root), options_(options) {}

  StatusOr<Grammar> Convert() {
    RETURN_IF_ERROR(Init());
    const int32_t root = g_.AddRule("root");
    ASSIGN_OR_RETURN(GrammarSymbol value, Visit(root_, "#", 0));
    g_.AddAlternative(root, {ws_, value, ws_});
    g_.set_root(root);
    RETURN_IF_ERROR(g_.Validate().WithContext("json schema"));
    return std::move(g_);
  }

  StatusOr<Grammar> ConvertAnyObject() {
    RETURN_IF_ERROR(Init());
    const int32_t root = g_.AddRule("root");
    GrammarSymbol obj = AnyObject();
    g_.AddAlternative(root, {ws_, obj, ws_});
    g_.set_root(root);
    RETURN_IF_ERROR(g_.Validate());
    return std::move(g_);
  }

 private:
  Status Init() {
    if (options_.whitespace_pattern.has_value()) {
      auto ws = AddRegex(g_, *options_.whitespace_pattern, RegexContext::kRaw, "ws");
      if (!ws.ok()) return ws.status().WithContext("whitespace_pattern");
      ws_ = *ws;
    } else {
      // ws ::= "" | " " | "\n" [ \t]{0,20}
      ByteSet indent;
      indent.Add(' ');
      indent.Add('\t');
      ASSIGN_OR_RETURN(GrammarSymbol pad, g_.Repeat({g_.Bytes(indent)}, 0, 20, "ws-indent"));
      ws_ = g_.Choice({{}, {g_.Byte(' ')}, {g_.Byte('\n'), pad}}, "ws");
    }
    // String characters: anything but '"', '\' and controls, or an escape.
    CodePointSet plain;
    plain.Add(0x20, CodePointSet::kMaxCodePoint);
    CodePointSet special;
    special.Add('"');
    special.Add('\\');
    plain = plain.Minus(special);
    ByteSet escaped;
    for (char c : std::string_view("\"\\/bfnrt")) escaped.Add(static_cast<uint8_t>(c));
    ByteSet hex;
    hex.AddRange('0', '9');
    hex.AddRange('a', 'f');
    hex.AddRange('A', 'F');
    const GrammarSymbol h = g_.Bytes(hex);
    char_ = g_.Choice({{plain.ToSymbol(g_, "char-plain")},
                       {g_.Byte('\\'), g_.Bytes(escaped)},
                       {g_.Byte('\\'), g_.Byte('u'), h, h, h, h}},
                      "char");
    return Status::Ok();
  }

  Status Refuse(const std::string& path, std::string_view what) const {
    return InvalidArgumentError(fmt::format("json schema at '{}': {}", path, what));
  }

  // --- generic JSON values -------------------------------------------------------------------

  GrammarSymbol AnyString() {
    if (any_string_.id >= 0) return any_string_;
    // string ::= '"' chars '"' ; chars ::= char chars | ""
    const int32_t chars = g_.AddRule("string-chars");
    g_.AddAlternative(chars, {char_, Grammar::Ref(chars)});
    g_.AddAlternative(chars, {});
    any_string_ = g_.Choice({{g_.Byte('"'), Grammar::Ref(chars), g_.Byte('"')}}, "string");
    return any_string_;
  }

  GrammarSymbol Number(bool integer) {
    GrammarSymbol& cached = integer ? integer_ : number_;
    if (cached.id >= 0) return cached;
    ByteSet nz, d;
    nz.AddRange('1', '9');
    d.AddRange('0', '9');
    const int32_t digits = g_.AddRule("digits");  // [0-9]*
    g_.AddAlternative(digits, {g_.Bytes(d), Grammar::Ref(digits)});
    g_.AddAlternative(digits, {});
    const GrammarSymbol int_part =
        g_.Choice({{g_.Byte('0')}, {g_.Bytes(nz), Grammar::Ref(digits)}}, "int-part");
    const GrammarSymbol sign = g_.Choice({{}, {g_.Byte('-')}}, "sign");
    if (integer) {
      cached = g_.Choice({{sign, int_part}}, "integer");
      return cached;
    }
    ByteSet e, pm;
    e.Add('e');
    e.Add('E');
    pm.Add('+');
    pm.Add('-');
    const GrammarSymbol frac =
        g_.Choice({{}, {g_.Byte('.'), g_.Bytes(d), Grammar::Ref(digits)}}, "frac");
    const GrammarSymbol exp = g_.Choice({{},
                                         {g_.Bytes(e), g_.Choice({{}, {g_.Bytes(pm)}}, "exp-sign"),
                                          g_.Bytes(d), Grammar::Ref(digits)}},
                                        "exp");
    cached = g_.Choice({{sign, int_part, frac, exp}}, "number");
    return cached;
  }

  GrammarSymbol AnyValue() {
    if (any_value_ >= 0) return Grammar::Ref(any_value_);
    any_value_ = g_.AddRule("value");
    const int32_t array = g_.AddRule("array");
    const GrammarSymbol value = Grammar::Ref(any_value_);
    const int32_t more = g_.AddRule("array-more");  // ("," ws value)*
    g_.AddAlternative(more, {ws_, g_.Byte(','), ws_, value, Grammar::Ref(more)});
    g_.AddAlternative(more, {});
    g_.AddAlternative(array, {g_.Byte('['), ws_, g_.Byte(']')});
    g_.AddAlternative(array, {g_.Byte('['), ws_, value, Grammar::Ref(more), ws_, g_.Byte(']')});
    g_.AddAlternative(any_value_, {AnyObject()});
    g_.AddAlternative(any_value_, {Grammar::Ref(array)});
    g_.AddAlternative(any_value_, {AnyString()});
    g_.AddAlternative(any_value_, {Number(false)});
    for (const char* lit : {"true", "false", "null"})
      g_.AddAlternative(any_value_, g_.Literal(lit));
    return value;
  }

  GrammarSymbol AnyObject() {
    if (any_object_ >= 0) return Grammar::Ref(any_object_);
    any_object_ = g_.AddRule("object");
    const GrammarSymbol member =
        g_.Choice({{AnyString(), ws_, g_.Byte(':'), ws_, AnyValue()}}, "member");
    const int32_t more = g_.AddRule("object-more");
    g_.AddAlternative(more, {ws_, g_.Byte(','), ws_, member, Grammar::Ref(more)});
    g_.AddAlternative(more, {});
    g_.AddAlternative(any_object_, {g_.Byte('{'), ws_, g_.Byte('}')});
    g_.AddAlternative(any_object_,
                      {g_.Byte('{'), ws_, member, Grammar::Ref(more), ws_, g_.Byte('}')});
    return Grammar::Ref(any_object_);
  }

  // The JSON text of a value, compact (enum / const).
  GrammarSymbol Literal(const Json& v, const std::string& name) {
    return g_.Choice({g_.Literal(v.dump())}, name);
  }

  // --- schemas -------------------------------------------------------------------------------

  StatusOr<const Json*> Resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      return Refuse(path, fmt::format("only local $ref ('#/...') is supported, got '{}'", ref));
    const Json* node = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') return Refuse(path, fmt::format("bad $ref '{}'", ref));
      size_t j = ref.find('/', i + 1);
      if (j == std::string::npos) j = ref.size();
      std::string token = ref.substr(i + 1, j - i - 1);
      // JSON pointer escapes.
      for (size_t p; (p = token.find("~1")) != std::string::npos;) token.replace(p, 2, "/");
      for (size_t p; (p = token.find("~0")) != std::string::npos;) token.replace(p, 2, "~");
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        return Refuse(path, fmt::format("$ref '{}' does not resolve", ref));
      }
      i = j;
    }
    return node;
  }

  StatusOr<GrammarSymbol> Ref(const std::string& ref, const std::string& path) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return Grammar::Ref(it->second);
    ASSIGN_OR_RETURN(const Json* target, Resolve(ref, path));
    // The rule exists before its body is converted, so recursive references find it.
    const int32_t rule = g_.AddRule(RuleName(ref));
    refs_.emplace(ref, rule);
    ASSIGN_OR_RETURN(GrammarSymbol body, Visit(*target, ref, 0));
    g_.AddAlternative(rule, {body});
    return Grammar::Ref(rule);
  }

  static std::string RuleName(const std::string& path) {
    std::string out;
    for (char c : path) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    return out.empty() ? "schema" : out;
  }

  StatusOr<GrammarSymbol> Visit(const Json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) return Refuse(path, "nested too deeply");
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return Refuse(path, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) return Refuse(path, "a schema must be an object or a boolean");
    for (const char* k :
         {"uniqueItems", "contains", "patternProperties", "propertyNames", "minProperties",
          "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "if", "then",
          "else", "not", "unevaluatedItems", "minContains", "maxContains"}) {
      if (!s.contains(k)) continue;
      if (std::string_view(k) == "uniqueItems" && s[k] == false) continue;
      if (std::string_view(k) == "minProperties" && s[k] == 0) continue;
      return Refuse(path, fmt::format("keyword '{}' is not supported", k));
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Refuse(path, "$ref must be a string");
      return Ref(s["$ref"].get<std::string>(), path);
    }
    const std::string name = RuleName(path);
    if (s.contains("const")) return Literal(s["const"], name + "-const");
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return Refuse(path, "enum must be a non-empty array");
      std::vector<GrammarSequence> alts;
      for (const Json& v : s["enum"]) alts.push_back(g_.Literal(v.dump()));
      return g_.Choice(std::move(alts), name + "-enum");
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_array() || s[k].empty())
        return Refuse(path, fmt::format("{} must be a non-empty array", k));
      // Sibling keywords apply to every branch.
      Json base = s;
      base.erase(k);
      std::vector<GrammarSequence> alts;
      for (size_t i = 0; i < s[k].size(); ++i) {
        Json branch = s[k][i];
        if (base.size() > 0 && branch.is_object()) {
          ASSIGN_OR_RETURN(branch, Merge(base, branch, path));
        }
        ASSIGN_OR_RETURN(GrammarSymbol b,
                         Visit(branch, fmt::format("{}/{}/{}", path, k, i), depth + 1));
        alts.push_back({b});
      }
      return g_.Choice(std::move(alts), name + "-" + k);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array()) return Refuse(path, "allOf must be an array");
      Json merged = s;
      merged.erase("allOf");
      for (const Json& part : s["allOf"]) {
        Json p = part;
        if (p.is_object() && p.contains("$ref")) {
          ASSIGN_OR_RETURN(const Json* target, Resolve(p["$ref"].get<std::string>(), path));
          p = *target;
        }
        ASSIGN_OR_RETURN(merged, Merge(merged, p, path + "/allOf"));
      }
      return Visit(merged, path, depth + 1);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) {
        types.push_back(s["type"].get<std::string>());
      } else if (s["type"].is_array()) {
        for (const Json& t : s["type"]) {
          if (!t.is_string()) return Refuse(path, "type must be a string or a list of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Refuse(path, "type must be a string or a list of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
               s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") ||
               s.contains("format")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return AnyValue();
    }
    if (s.value("nullable", false)) types.push_back("null");
    std::vector<GrammarSequence> alts;
    for (const std::string& t : types) {
      GrammarSymbol sym;
      if (t == "object") {
        ASSIGN_OR_RETURN(sym, Object(s, path, depth));
      } else if (t == "array") {
        ASSIGN_OR_RETURN(sym, Array(s, path, depth));
      } else if (t == "string") {
        ASSIGN_OR_RETURN(sym, String(s, path));
      } else if (t == "integer" || t == "number") {
        ASSIGN_OR_RETURN(sym, NumberSchema(s, path, t == "integer"));
      } else if (t == "boolean") {
        sym = g_.Choice({g_.Literal("true"), g_.Literal("false")}, "boolean");
      } else if (t == "null") {
        sym = g_.Choice({g_.Literal("null")}, "null");
      } else {
        return Refuse(path, fmt::format("unknown type '{}'", t));
      }
      alts.push_back({sym});
    }
    if (alts.size() == 1) return alts[0][0];
    return g_.Choice(std::move(alts), name + "-types");
  }

  // allOf / sibling merge: properties and required are combined; any other keyword must agree.
  StatusOr<Json> Merge(const Json& a, const Json& b, const std::string& path) {
    if (!b.is_object()) return Refuse(path, "allOf parts must be objects");
    Json out = a;
    for (const auto& [k, v] : b.items()) {
      if (!out.contains(k) || Annotations().count(k)) {
        out[k] = v;
      } else if (k == "properties" && v.is_object() && out[k].is_object()) {
        for (const auto& [pk, pv] : v.items()) {
          if (out[k].contains(pk) && out[k][pk] != pv)
            return Refuse(path, fmt::format("property '{}' is defined differently in allOf", pk));
          out[k][pk] = pv;
        }
      } else if (k == "required" && v.is_array() && out[k].is_array()) {
        for (const Json& r : v)
          if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
      } else if (out[k] != v) {
        return Refuse(path, fmt::format("keyword '{}' conflicts between combined schemas", k));
      }
    }
    return out;
  }

  StatusOr<GrammarSymbol> Object(const Json& s, const std::string& path, int depth) {
    const std::string name = RuleName(path);
    struct Prop {
      std::string key;
      GrammarSymbol value;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Refuse(path, "required must be an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Refuse(path, "required must list strings");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Refuse(path, "properties must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        ASSIGN_OR_RETURN(GrammarSymbol v, Visit(sub, path + "/properties/" + key, depth + 1));
        props.push_back({key, v, required.count(key) > 0});
      }
    }
    for (const std::string& r : required) {
      const bool declared =
          std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.key == r; });
      if (!declared) {
        // A required property without a schema takes any value.
        props.push_back({r, AnyValue(), true});
      }
    }
    // Additional properties: false unless given (strict mode); a schema or true otherwise.
    std::optional<GrammarSymbol> extra;
    const bool no_props = props.empty();
    if (s.contains("additionalProperties")) {
      const Json& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.get<bool>())) {
        ASSIGN_OR_RETURN(GrammarSymbol v, Visit(ap, path + "/additionalProperties", depth + 1));
        extra = v;
      }
    } else if (no_props) {
      extra = AnyValue();  // {"type": "object"} alone: any object
    }
    std::optional<GrammarSymbol> extra_member;
    if (extra) {
      extra_member = g_.Choice({{AnyString(), ws_, g_.Byte(':'), ws_, *extra}}, name + "-extra");
    }
    // T(i, any): the members from property i on, `any`: whether one was written already.
    // Memoized as rules; 2 per property at most.
    std::map<std::pair<size_t, bool>, GrammarSymbol> memo;
    const GrammarSymbol comma = g_.Choice({{ws_, g_.Byte(','), ws_}}, "comma");
    std::function<GrammarSymbol(size_t, bool)> tail = [&](size_t i, bool any) -> GrammarSymbol {
      auto it = memo.find({i, any});
      if (it != memo.end()) return it->second;
      std::vector<GrammarSequence> alts;
      if (i == props.size()) {
        if (!extra_member) {
          alts.push_back({});
        } else {
          // any ? ("," member)* : (member ("," member)*)?
          const int32_t star = g_.AddRule(name + "-extra-star");
          g_.AddAlternative(star, {comma, *extra_member, Grammar::Ref(star)});
          g_.AddAlternative(star, {});
          if (any) {
            alts.push_back({Grammar::Ref(star)});
          } else {
            alts.push_back({});
            alts.push_back({*extra_member, Grammar::Ref(star)});
          }
        }
      } else {
        const Prop& p = props[i];
        GrammarSequence with;
        if (any) with.push_back(comma);
        for (const GrammarSymbol& b : g_.Literal(Json(p.key).dump())) with.push_back(b);
        with.push_back(ws_);
        with.push_back(g_.Byte(':'));
        with.push_back(ws_);
        with.push_back(p.value);
        with.push_back(tail(i + 1, true));
        alts.push_back(std::move(with));
        if (!p.required) alts.push_back({tail(i + 1, any)});
      }
      const GrammarSymbol sym = g_.Choice(std::move(alts), name + "-members");
      memo.emplace(std::make_pair(i, any), sym);
      return sym;
    };
    return g_.Choice({{g_.Byte('{'), ws_, tail(0, false), ws_, g_.Byte('}')}}, name + "-object");
  }

  StatusOr<GrammarSymbol> Array(const Json& s, const std::string& path, int depth) {
    const std::string name = RuleName(path);
    std::vector<GrammarSymbol> prefix;
    std::optional<GrammarSymbol> item;  // nullopt: no items past the prefix
    const Json* prefix_items = nullptr;
    const Json* items = s.contains("items") ? &s["items"] : nullptr;
    if (s.contains("prefixItems")) {
      prefix_items = &s["prefixItems"];
    } else if (items != nullptr && items->is_array()) {
      prefix_items = items;  // draft 4-7 tuple form
      items = s.contains("additionalItems") ? &s["additionalItems"] : nullptr;
    }
    if (prefix_items != nullptr) {
      if (!prefix_items->is_array()) return Refuse(path, "prefixItems must be an array");
      for (size_t i = 0; i < prefix_items->size(); ++i) {
        ASSIGN_OR_RETURN(
            GrammarSymbol p,
            Visit((*prefix_items)[i], fmt::format("{}/prefixItems/{}", path, i), depth + 1));
        prefix.push_back(p);
      }
    }
    if (items == nullptr) {
      item = AnyValue();
    } else if (!(items->is_boolean() && !items->get<bool>())) {
      ASSIGN_OR_RETURN(GrammarSymbol v, Visit(*items, path + "/items", depth + 1));
      item = v;
    }
    auto count = [&](const char* key, int64_t dflt) -> StatusOr<int64_t> {
      if (!s.contains(key)) return dflt;
      if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
        return Refuse(path, fmt::format("{} must be a non-negative integer", key));
      return s[key].get<int64_t>();
    };
    ASSIGN_OR_RETURN(int64_t min, count("minItems", 0));
    ASSIGN_OR_RETURN(int64_t max, count("maxItems", -1));
    const int64_t k = static_cast<int64_t>(prefix.size());
    if (!item) max = max < 0 ? k : std::min(max, k);
    if (max >= 0 && min > max)
      return Refuse(path, fmt::format("minItems {} is above the possible maximum {}", min, max));
    const GrammarSymbol comma = g_.Choice({{ws_, g_.Byte(','), ws_}}, "comma");
    // A(i): the elements after the first i (i >= 1).
    std::function<StatusOr<GrammarSymbol>(int64_t)> after =
        [&](int64_t i) -> StatusOr<GrammarSymbol> {
      if (i >= k) {
        if (!item) return g_.Choice({{}}, name + "-end");
        const int64_t rmin = std::max<int64_t>(min - i, 0);
        const int64_t rmax = max < 0 ? -1 : max - i;
        return g_.Repeat({comma, *item}, rmin, rmax, name + "-items");
      }
      std::vector<GrammarSequence> alts;
      if (i >= min) alts.push_back({});
      if (max < 0 || i < max) {
        ASSIGN_OR_RETURN(GrammarSymbol rest, after(i + 1));
        alts.push_back({comma, prefix[i], rest});
      }
      return g_.Choice(std::move(alts), name + "-tuple");
    };
    std::vector<GrammarSequence> alts;
    if (min == 0) alts.push_back({g_.Byte('['), ws_, g_.Byte(']')});
    if (max != 0) {
      const GrammarSymbol first = k > 0 ? prefix[0] : *item;
      ASSIGN_OR_RETURN(GrammarSymbol rest, after(1));
      alts.push_back({g_.Byte('['), ws_, first, rest, ws_, g_.Byte(']')});
    }
    return g_.Choice(std::move(alts), name + "-array");
  }

  StatusOr<GrammarSymbol> String(const Json& s, const std::string& path) {
    const std::string name = RuleName(path);
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Refuse(path, "pattern must be a string");
      if (has_len)
        return Refuse(path, "pattern together with minLength/maxLength is not supported");
      std::string re = s["pattern"].get<std::string>();
      // JSON Schema patterns search anywhere unless anchored; an unanchored side may be padded.
      const bool start = !re.empty() && re.front() == '^';
      const bool end =
          !re.empty() && re.back() == '$' && (re.size() < 2 || re[re.size() - 2] != '\\');
      if (!start)
        re = ".*(" + re;
      else
        re = "(" + re.substr(1);
      if (!end)
        re += ").*";
      else
        re = re.substr(0, re.size() - 1) + ")";
      auto body = AddRegex(g_, re, RegexContext::kJsonString, name + "-pattern");
      if (!body.ok()) return Refuse(path, body.status().message());
      return g_.Choice({{g_.Byte('"'), *body, g_.Byte('"')}}, name + "-string");
    }
    if (s.contains("format") && s["format"].is_string()) {
      auto it = Formats().find(s["format"].get<std::string>());
      if (it != Formats().end()) {
        if (has_len)
          return Refuse(path, "format together with minLength/maxLength is not supported");
        ASSIGN_OR_RETURN(GrammarSymbol body,
                         AddRegex(g_, it->second, RegexContext::kJsonString, name + "-format"));
        return g_.Choice({{g_.Byte('"'), body, g_.Byte('"')}}, name + "-string");
      }
    }
    if (!has_len) return AnyString();
    auto len = [&](const char* key, int64_t dflt) -> StatusOr<int64_t> {
      if (!s.contains(key)) return dflt;
      if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0)
        return Refuse(path, fmt::format("{} must be a non-negative integer", key));
      return s[key].get<int64_t>();
    };
    ASSIGN_OR_RETURN(int64_t min, len("minLength", 0));
    ASSIGN_OR_RETURN(int64_t max, len("maxLength", -1));
    auto chars = g_.Repeat({char_}, min, max, name + "-chars");
    if (!chars.ok()) return Refuse(path, chars.status().message());
    return g_.Choice({{g_.Byte('"'), *chars, g_.Byte('"')}}, name + "-string");
  }

  StatusOr<GrammarSymbol> NumberSchema(const Json& s, const std::string& path, bool integer) {
    if (s.contains("multipleOf") && !(integer && s["multipleOf"] == 1))
      return Refuse(path, "keyword 'multipleOf' is not supported");
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
    auto bound = [&](const char* key, std::optional<double>& out, bool& excl, bool exclusive,
                     bool lower) -> Status {
      if (!s.contains(key)) return Status::Ok();
      const Json& v = s[key];
      if (v.is_boolean()) {  // draft 4: exclusiveMinimum: true modifies minimum
        if (v.get<bool>()) excl = true;
        return Status::Ok();
      }
      if (!v.is_number()) return Refuse(path, fmt::format("{} must be a number", key));
      const double d = v.get<double>();
      if (!out || (lower ? d >= *out : d <= *out)) {
        if (out && d == *out) {
          excl = excl || exclusive;
        } else {
          out = d;
          excl = exclusive;
        }
      }
      return Status::Ok();
    };
    RETURN_IF_ERROR(bound("minimum", lo, lo_excl, false, true));
    RETURN_IF_ERROR(bound("exclusiveMinimum", lo, lo_excl, true, true));
    RETURN_IF_ERROR(bound("maximum", hi, hi_excl, false, false));
    RETURN_IF_ERROR(bound("exclusiveMaximum", hi, hi_excl, true, false));
    if (!lo && !hi) return Number(integer);
    const std::string name = RuleName(path);
    if (!integer && lo && !hi && *lo == 0.0) {
      // x >= 0 or x > 0: no sign; for x > 0 some digit is non-zero.
      Grammar& g = g_;
      ByteSet nz, d;
      nz.AddRange('1', '9');
      d.AddRange('0', '9');
      ASSIGN_OR_RETURN(GrammarSymbol digits, g.Repeat({g.Bytes(d)}, 0, -1, name + "-digits"));
      const GrammarSymbol pos_int = g.Choice({{g.Bytes(nz), digits}}, name + "-posint");
      const GrammarSymbol frac = g.Choice({{}, {g.Byte('.'), g.Bytes(d), digits}}, name + "-frac");
      std::vector<GrammarSequence> alts = {{pos_int, frac},
                                           {g.Byte('0'), g.Byte('.'), digits, g.Bytes(nz), digits}};
      if (!lo_excl) alts.push_back({g.Byte('0'), frac});
      return g.Choice(std::move(alts), name + "-nonneg");
    }
    // Integers within the bounds (for numbers: a valid subset).
    std::optional<int64_t> ilo, ihi;
    constexpr double kBig = 1e18;
    if (lo) {
      double v = std::max(*lo, -kBig);
      double c = std::ceil(v);
      if (lo_excl && c == v) c += 1;
      ilo = static_cast<int64_t>(c);
    }
    if (hi) {
      double v = std::min(*hi, kBig);
      double f = std::floor(v);
      if (hi_excl && f == v) f -= 1;
      ihi = static_cast<int64_t>(f);
    }
    auto range = IntegerRange(g_, ilo, ihi, name + "-range");
    if (!range.ok())
      return Refuse(path, integer ? range.status().message()
                                  : "number bounds that admit no integer cannot be expressed");
    return range;
  }

  const Json& root_;
  const JsonGrammarOptions& options_;
  Grammar g_;
  GrammarSymbol ws_{};
  GrammarSymbol char_{};
  GrammarSymbol any_string_{GrammarSymbol::Kind::kRule, -1};
  GrammarSymbol integer_{GrammarSymbol::Kind::kRule, -1};
  GrammarSymbol number_{GrammarSymbol::Kind::kRule, -1};
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_text,
                                      const JsonGrammarOptions& options) {
  const Json schema = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgumentError("json schema: not valid JSON");
  return SchemaConverter(schema, options).Convert();
}

StatusOr<Grammar> JsonObjectGrammar(const JsonGrammarOptions& options) {
  const Json empty = Json::object();
  return SchemaConverter(empty, options).ConvertAnyObject();
}

}  // namespace pagellm
