// EngineConfig from the keyword dict that python/pagellm/engine/arg_utils.py builds out of
// vLLM's engine arguments (already type-checked there; None = the engine's default).
#pragma once

#include "engine/engine_config.h"
#include "pybind11/pybind11.h"

namespace pagellm::python {

// Throws ValueError with vLLM's / the CLI's wording for a value the engine rejects.
EngineConfig EngineConfigFromDict(const pybind11::dict& args);

}  // namespace pagellm::python
