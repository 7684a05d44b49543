// Conversions between the Python package's objects and the engine's C++ types: the pure-Python
// SamplingParams (python/pagellm/sampling_params.py) in, RequestOutput / EngineOutput parts out
// as plain tuples that python/pagellm/outputs.py turns into vLLM's classes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine_output.h"
#include "pagellm/outputs.h"
#include "pagellm/sampling_params.h"
#include "pybind11/pybind11.h"
#include "tokenizer/tokenizer.h"

namespace pagellm::python {

// Reads a pagellm.SamplingParams (its attributes, already checked by its __post_init__).
// Throws TypeError / ValueError (pybind11 exceptions) for a value of the wrong type or range.
SamplingParams ToSamplingParams(pybind11::handle obj);

// UTF-8 bytes -> str; invalid sequences become U+FFFD instead of raising.
pybind11::str Utf8ToStr(const std::string& text);

// One position's logprobs: (token_id, logprob, rank, decoded_token, [(id, logprob, decoded)]),
// the alternatives best first. Token text as the server writes it (bytes of the piece, special
// tokens spelled out).
pybind11::tuple LogprobEntryToPython(const TokenLogprobEntry& entry, const Tokenizer& tokenizer);
// [None, entry, entry, ...] for prompt_logprobs.
pybind11::list PromptLogprobsToPython(const std::vector<std::optional<TokenLogprobEntry>>& entries,
                                      const Tokenizer& tokenizer);

// (request_id, prompt, prompt_token_ids, prompt_logprobs or None, num_cached_tokens,
//  [(index, text, token_ids, logprobs or None, finish_reason or None, stop_reason)]).
// `with_logprobs` says whether the request asked for sample logprobs; `stop_strings` are its
// stop strings (a stop_reason that is one of them is a str, otherwise a stop token id, an int).
pybind11::tuple RequestOutputToPython(const RequestOutput& output, bool with_logprobs,
                                      const Tokenizer& tokenizer,
                                      const std::vector<std::string>& stop_strings);

// One step's output of one request (AsyncLLM): (request_id, new_token_ids, new_text,
// new_logprobs, prompt_logprobs or None, finished, finish_reason or None, stop_reason,
// num_cached_tokens, error).
pybind11::tuple EngineOutputToPython(const EngineOutput& output, const Tokenizer& tokenizer,
                                     const std::vector<std::string>& stop_strings);

}  // namespace pagellm::python
