// Python semantics of Jinja values: str()/repr(), equality and ordering, arithmetic, len(),
// iteration, membership and subscripts, each failing with Python's message where Python
// raises. jinja2 evaluates template expressions with exactly these Python operators.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/jinja_value.h"
#include "pagellm/status.h"

namespace pagellm::jinja {

// Ceilings that keep hostile templates from exhausting memory: Python would happily build a
// gigabyte string from 'a' * 10**9; a chat template never needs one.
inline constexpr size_t kMaxStringBytes = size_t{32} << 20;
inline constexpr size_t kMaxSequenceItems = size_t{1} << 22;

// The error raised when an undefined value is used (its hint, or a generic message).
Status UndefinedError(const Value& undefined);

std::string PyStr(const Value& v);
std::string PyRepr(const Value& v);

bool PyEquals(const Value& a, const Value& b);

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe };
StatusOr<bool> PyCompare(CompareOp op, const Value& a, const Value& b);

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
StatusOr<Value> PyBinary(BinaryOp op, const Value& a, const Value& b);
StatusOr<Value> PyNegate(const Value& v);
StatusOr<Value> PyPositive(const Value& v);

// len(); Undefined has length 0 as in jinja2.
StatusOr<int64_t> PyLen(const Value& v);
// Materialized iteration: list/tuple items, dict keys, string code points; Undefined is empty.
StatusOr<std::vector<Value>> PyIterate(const Value& v);
// `item in container`.
StatusOr<bool> PyContains(const Value& container, const Value& item);

// obj[key] for the built-in types. nullopt stands for the TypeError / LookupError that
// jinja2's getitem catches (it then tries an attribute, then yields Undefined); other
// failures (an undefined obj) are errors.
StatusOr<std::optional<Value>> PyGetItem(const Value& obj, const Value& key);
// obj[start:stop:step]; unset bounds are Python's None. jinja2 compiles slices to plain
// Python subscripts, so unlike PyGetItem every failure is an error.
StatusOr<Value> PySlice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// printf-style `fmt % args` (args: a tuple for several values, else one value).
StatusOr<std::string> PyPercentFormat(const std::string& fmt, const Value& args);

// Python int(x) / float(x) of a string, as the int/float filters parse them.
std::optional<int64_t> ParsePyInt(const std::string& text, int base);
std::optional<double> ParsePyFloat(const std::string& text);

}  // namespace pagellm::jinja
