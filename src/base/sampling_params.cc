// SamplingParams::Validate: vLLM's request checks, with vLLM's wording so that clients that
// match on error text (and our compatibility tests) see the same messages.
#include "pagellm/sampling_params.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace pagellm {
namespace {

// Formats a float the way Python's repr() prints the same value ("-1.0", "0.5", "1e-05",
// "1e+16", "nan", "inf"), because vLLM's messages are f-strings over Python floats. Uses the
// shortest digits that round-trip the float, so a value the client sent as 0.1 prints as 0.1.
std::string PyFloat(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.25e+03"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exp10 = std::atoi(sci.c_str() + e + 1);
  // Python's repr switches to exponent notation outside [1e-4, 1e16).
  if (exp10 >= -4 && exp10 < 16) {
    std::string out;
    if (exp10 < 0) {
      out = "0." + std::string(-exp10 - 1, '0') + digits;
    } else if (static_cast<size_t>(exp10) + 1 >= digits.size()) {
      out = digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  std::string exp_str = std::to_string(std::abs(exp10));
  if (exp_str.size() < 2) exp_str = "0" + exp_str;
  return sign + mant + "e" + (exp10 < 0 ? "-" : "+") + exp_str;
}

// Python's str(list) for the out-of-vocabulary id lists: "[5, 7]".
std::string PyList(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

// Comparisons are written as !(in range) so that NaN is rejected too.
bool InClosed(float v, float lo, float hi) {
  return v >= lo && v <= hi;
}

}  // namespace

Status SamplingParams::Validate(int32_t vocab_size, int max_logprobs) const {
  // Same order as vLLM's _verify_args, so the first error reported matches.
  if (n < 1) return InvalidArgumentError("n must be at least 1, got " + std::to_string(n) + ".");
  if (!InClosed(presence_penalty, -2.0f, 2.0f)) {
    return InvalidArgumentError("presence_penalty must be in [-2, 2], got " +
                                PyFloat(presence_penalty) + ".");
  }
  if (!InClosed(frequency_penalty, -2.0f, 2.0f)) {
    return InvalidArgumentError("frequency_penalty must be in [-2, 2], got " +
                                PyFloat(frequency_penalty) + ".");
  }
  if (!(repetition_penalty > 0.0f)) {
    return InvalidArgumentError("repetition_penalty must be greater than zero, got " +
                                PyFloat(repetition_penalty) + ".");
  }
  if (!(temperature >= 0.0f)) {
    return InvalidArgumentError("temperature must be non-negative, got " + PyFloat(temperature) +
                                ".");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return InvalidArgumentError("top_p must be in (0, 1], got " + PyFloat(top_p) + ".");
  }
  // vLLM quietly accepts -1 as "disabled" but documents 0.
  if (top_k < -1) {
    return InvalidArgumentError("top_k must be 0 (disable), or at least 1, got " +
                                std::to_string(top_k) + ".");
  }
  if (!InClosed(min_p, 0.0f, 1.0f)) {
    return InvalidArgumentError("min_p must be in [0, 1], got " + PyFloat(min_p) + ".");
  }
  if (max_tokens.has_value() && *max_tokens < 1) {
    return InvalidArgumentError("max_tokens must be at least 1, got " +
                                std::to_string(*max_tokens) + ".");
  }
  if (min_tokens < 0) {
    return InvalidArgumentError("min_tokens must be greater than or equal to 0, got " +
                                std::to_string(min_tokens) + ".");
  }
  if (max_tokens.has_value() && min_tokens > *max_tokens) {
    return InvalidArgumentError(
        "min_tokens must be less than or equal to max_tokens=" + std::to_string(*max_tokens) +
        ", got " + std::to_string(min_tokens) + ".");
  }
  if (logprobs.has_value() && *logprobs < -1) {
    return InvalidArgumentError("logprobs must be non-negative or -1, got " +
                                std::to_string(*logprobs) + ".");
  }
  if (prompt_logprobs.has_value() && *prompt_logprobs < -1) {
    return InvalidArgumentError("prompt_logprobs must be non-negative or -1, got " +
                                std::to_string(*prompt_logprobs) + ".");
  }
  for (const std::string& s : stop) {
    if (s.empty()) return InvalidArgumentError("stop cannot contain an empty string.");
  }

  // The V1 input processor's checks, which need the model: max logprobs and vocabulary.
  const int64_t limit = max_logprobs == -1 ? vocab_size : max_logprobs;
  if (logprobs.has_value()) {
    int64_t requested = *logprobs == -1 ? vocab_size : *logprobs;
    if (requested > limit) {
      return InvalidArgumentError("Requested sample logprobs of " + std::to_string(requested) +
                                  ", which is greater than max allowed: " + std::to_string(limit));
    }
  }
  if (prompt_logprobs.has_value()) {
    int64_t requested = *prompt_logprobs == -1 ? vocab_size : *prompt_logprobs;
    if (requested > limit) {
      return InvalidArgumentError("Requested prompt logprobs of " + std::to_string(requested) +
                                  ", which is greater than max allowed: " + std::to_string(limit));
    }
  }
  std::vector<int64_t> bad_ids;
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) bad_ids.push_back(id);
  }
  if (!bad_ids.empty()) {
    return InvalidArgumentError("token_id(s) " + PyList(bad_ids) +
                                " in stop_token_ids contain out-of-vocab token ids. "
                                "Vocabulary size: " +
                                std::to_string(vocab_size));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) bad_ids.push_back(id);
  }
  if (!bad_ids.empty()) {
    return InvalidArgumentError("token_id(s) " + PyList(bad_ids) +
                                " in logit_bias contain out-of-vocab token ids. "
                                "Vocabulary size: " +
                                std::to_string(vocab_size));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (!InClosed(bias, -100.0f, 100.0f)) {
      return InvalidArgumentError("logit_bias value for token_id " + std::to_string(id) +
                                  " must be in [-100, 100], got " + PyFloat(bias) + ".");
    }
  }
  return Status::Ok();
}

}  // namespace pagellm
