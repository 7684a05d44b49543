// jinja2's sequence filters: sorting, de-duplication, aggregation, map/select/reject,
// grouping and batching. Lazy ones return single-use generators as jinja2's do.
#include <algorithm>
#include <string>

#include "chat/jinja_filter_util.h"

namespace pagellm::jinja::filters {

// Sorts by key with Python's `<`, stably; the first comparison error wins.
Status SortByKeys(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  Status status = Status::Ok();
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    if (!status.ok()) return false;
    auto less = reverse ? PyCompare(CompareOp::kLt, b.first, a.first)
                        : PyCompare(CompareOp::kLt, a.first, b.first);
    if (!less.ok()) {
      status = less.status();
      return false;
    }
    return *less;
  });
  return status;
}

StatusOr<Value> Sort(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("sort", a, {"reverse", "case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  const bool ignore_case = !Flag(b[1], false);
  // Several comma-separated attributes sort by a tuple of keys.
  std::vector<AttrGetter> getters;
  if (b[2] && b[2]->is_string() && b[2]->str().find(',') != std::string::npos) {
    for (const std::string& part : PySplit(b[2]->str(), std::string(","), -1)) {
      getters.emplace_back(interp, Value::String(part), ignore_case);
    }
  } else {
    getters.emplace_back(interp, b[2], ignore_case);
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    std::vector<Value> key;
    for (const AttrGetter& g : getters) {
      ASSIGN_OR_RETURN(Value k, g(item));
      key.push_back(std::move(k));
    }
    keyed.emplace_back(Value::List(std::move(key)), std::move(item));
  }
  RETURN_IF_ERROR(SortByKeys(&keyed, Flag(b[0], false)));
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

StatusOr<Value> DictSort(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("dictsort", a, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return InvalidArgumentError("dictsort expects a mapping");
  std::string by = b[1] ? PyStr(*b[1]) : "key";
  if (by != "key" && by != "value") {
    return InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [key, value] : v.dict().entries()) {
    Value k = by == "key" ? key : value;
    if (!Flag(b[0], false)) k = IgnoreCase(k);
    keyed.emplace_back(k, Value::Tuple({key, value}));
  }
  RETURN_IF_ERROR(SortByKeys(&keyed, Flag(b[2], false)));
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

StatusOr<Value> Unique(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("unique", a, {"case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  AttrGetter get(interp, b[1], !Flag(b[0], false));
  ValueDict seen;
  std::vector<Value> out;
  for (Value& item : items) {
    ASSIGN_OR_RETURN(Value key, get(item));
    ASSIGN_OR_RETURN(const Value* found, seen.Find(key));
    if (found) continue;
    RETURN_IF_ERROR(seen.Set(key, Value::None()));
    out.push_back(std::move(item));
  }
  return Gen(std::move(out));
}

static StatusOr<Value> MinMax(Interpreter& interp, const Value& v, const CallArgs& a, bool max) {
  ASSIGN_OR_RETURN(Args b, BindArgs(max ? "max" : "min", a, {"case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  AttrGetter get(interp, b[1], !Flag(b[0], false));
  size_t best = 0;
  ASSIGN_OR_RETURN(Value best_key, get(items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(Value key, get(items[i]));
    ASSIGN_OR_RETURN(bool better, PyCompare(max ? CompareOp::kGt : CompareOp::kLt, key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}
StatusOr<Value> Max(Interpreter& i, const Value& v, const CallArgs& a) {
  return MinMax(i, v, a, true);
}
StatusOr<Value> Min(Interpreter& i, const Value& v, const CallArgs& a) {
  return MinMax(i, v, a, false);
}

StatusOr<Value> Sum(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("sum", a, {"attribute", "start"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  AttrGetter get(interp, b[0], false);
  Value total = b[1] ? *b[1] : Value::Int(0);
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value x, get(item));
    ASSIGN_OR_RETURN(total, PyBinary(BinaryOp::kAdd, total, x));
  }
  return total;
}

StatusOr<Value> Batch(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("batch", a, {"linecount", "fill_with"}));
  ASSIGN_OR_RETURN(int64_t n, IntParam(b[0], 0, "linecount"));
  if (n <= 0) return InvalidArgumentError("batch linecount must be positive");
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  std::vector<Value> out, row;
  for (Value& item : items) {
    if (static_cast<int64_t>(row.size()) == n) {
      out.push_back(Value::List(std::move(row)));
      row.clear();
    }
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (b[1] && !b[1]->is_none()) {
      while (static_cast<int64_t>(row.size()) < n) row.push_back(*b[1]);
    }
    out.push_back(Value::List(std::move(row)));
  }
  return Gen(std::move(out));
}

// slice(n): n nearly equal columns, the first len % n one longer; fill_with pads the others.
StatusOr<Value> Slice(Interpreter&, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("slice", a, {"slices", "fill_with"}));
  ASSIGN_OR_RETURN(int64_t slices, IntParam(b[0], 0, "slices"));
  if (slices <= 0 || slices > static_cast<int64_t>(kMaxSequenceItems)) {
    return InvalidArgumentError("slice count must be positive");
  }
  ASSIGN_OR_RETURN(std::vector<Value> seq, PyIterate(v));
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t per_slice = length / slices, with_extra = length % slices;
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per_slice;
    if (k < with_extra) ++offset;
    const int64_t end = offset + (k + 1) * per_slice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (b[1] && !b[1]->is_none() && k >= with_extra) part.push_back(*b[1]);
    out.push_back(Value::List(std::move(part)));
  }
  return Gen(std::move(out));
}

StatusOr<Value> Map(Interpreter& interp, const Value& v, const CallArgs& a) {
  // jinja2 only iterates a truthy input: map over None or false yields nothing.
  if (!v.Truthy()) return Gen({});
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  std::vector<Value> out;
  const Value* attribute = a.Keyword("attribute");
  if (a.positional.empty() && attribute) {
    std::optional<Value> fallback;
    for (const auto& [key, value] : a.keyword) {
      if (key == "default") {
        fallback = value;
      } else if (key != "attribute") {
        return InvalidArgumentError("Unexpected keyword argument '" + key + "'");
      }
    }
    AttrGetter get(interp, *attribute, false, fallback);
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value x, get(item));
      out.push_back(std::move(x));
    }
    return Gen(std::move(out));
  }
  if (a.positional.empty()) return InvalidArgumentError("map requires a filter argument");
  const std::string name = PyStr(a.positional[0]);
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value x, CallFilter(interp, name, item, rest));
    out.push_back(std::move(x));
  }
  return Gen(std::move(out));
}

// select / reject / selectattr / rejectattr.
static StatusOr<Value> SelectOrReject(Interpreter& interp, const Value& v, const CallArgs& a,
                                      bool select, bool lookup_attr) {
  if (!v.Truthy()) return Gen({});
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  size_t off = 0;
  std::optional<AttrGetter> get;
  if (lookup_attr) {
    if (a.positional.empty()) return InvalidArgumentError("Missing parameter for attribute name");
    get.emplace(interp, a.positional[0], false);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (a.positional.size() > off) {
    test = PyStr(a.positional[off]);
    test_args.positional.assign(a.positional.begin() + off + 1, a.positional.end());
  }
  test_args.keyword = a.keyword;
  std::vector<Value> out;
  for (Value& item : items) {
    Value x = item;
    if (get) {
      ASSIGN_OR_RETURN(x, (*get)(item));
    }
    bool pass = x.Truthy();
    if (test) {
      ASSIGN_OR_RETURN(pass, CallTest(interp, *test, x, test_args));
    }
    if (pass == select) out.push_back(std::move(item));
  }
  return Gen(std::move(out));
}
StatusOr<Value> Select(Interpreter& i, const Value& v, const CallArgs& a) {
  return SelectOrReject(i, v, a, true, false);
}
StatusOr<Value> Reject(Interpreter& i, const Value& v, const CallArgs& a) {
  return SelectOrReject(i, v, a, false, false);
}
StatusOr<Value> SelectAttr(Interpreter& i, const Value& v, const CallArgs& a) {
  return SelectOrReject(i, v, a, true, true);
}
StatusOr<Value> RejectAttr(Interpreter& i, const Value& v, const CallArgs& a) {
  return SelectOrReject(i, v, a, false, true);
}

// Python getattr only: unlike `obj.name`, attr() never falls back to dict items.
StatusOr<Value> Attr(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("attr", a, {"name"}));
  if (!b[0]) return InvalidArgumentError("attr() missing 1 required argument");
  const std::string name = PyStr(*b[0]);
  if (v.is_dict()) {
    bool unsafe = false;
    if (!HasMethod(v, name, &unsafe)) {
      return Value::Undefined("'dict object' has no attribute '" + name + "'");
    }
  }
  return interp.GetAttr(v, name);
}

// What groupby yields: a (grouper, list) pair whose fields are also attributes.
class GroupTuple : public Object {
 public:
  GroupTuple(Value grouper, Value list) : grouper_(std::move(grouper)), list_(std::move(list)) {}
  std::string TypeName() const override { return "tuple"; }
  std::string Repr() const override { return "(" + PyRepr(grouper_) + ", " + PyRepr(list_) + ")"; }
  std::optional<Value> GetAttr(std::string_view name) const override {
    if (name == "grouper") return grouper_;
    if (name == "list") return list_;
    return std::nullopt;
  }
  std::optional<std::vector<Value>> Iterate() const override {
    return std::vector<Value>{grouper_, list_};
  }

 private:
  Value grouper_;
  Value list_;
};

StatusOr<Value> GroupBy(Interpreter& interp, const Value& v, const CallArgs& a) {
  ASSIGN_OR_RETURN(Args b, BindArgs("groupby", a, {"attribute", "default", "case_sensitive"}));
  if (!b[0]) return InvalidArgumentError("groupby() missing 1 required argument: 'attribute'");
  const bool ignore_case = !Flag(b[2], false);
  AttrGetter key_of(interp, b[0], ignore_case, b[1]);
  AttrGetter output_key(interp, b[0], false, b[1]);
  ASSIGN_OR_RETURN(std::vector<Value> items, PyIterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    ASSIGN_OR_RETURN(Value key, key_of(item));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  RETURN_IF_ERROR(SortByKeys(&keyed, false));
  std::vector<Value> out;
  size_t i = 0;
  while (i < keyed.size()) {
    size_t j = i;
    std::vector<Value> group;
    while (j < keyed.size() && PyEquals(keyed[j].first, keyed[i].first)) {
      group.push_back(keyed[j].second);
      ++j;
    }
    // With case folding the group is named by its first member's real key.
    Value grouper = keyed[i].first;
    if (ignore_case) {
      ASSIGN_OR_RETURN(grouper, output_key(group.front()));
    }
    out.push_back(Value::FromObject(
        std::make_shared<GroupTuple>(std::move(grouper), Value::List(std::move(group)))));
    i = j;
  }
  return Value::List(std::move(out));
}

}  // namespace pagellm::jinja::filters
