"""pagellm: vLLM's Python API over pagellm's C++ inference engine.

    from pagellm import LLM, SamplingParams
    llm = LLM(model="path/to/model")
    outputs = llm.generate(["Hello, my name is"], SamplingParams(temperature=0.8, top_p=0.95))
"""

from pagellm import _pagellm
from pagellm.engine.arg_utils import AsyncEngineArgs, EngineArgs
from pagellm.entrypoints.llm import LLM
from pagellm.outputs import CompletionOutput, Logprob, RequestOutput
from pagellm.sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams
from pagellm.transformers_utils.tokenizer import Tokenizer, get_tokenizer
from pagellm.v1.engine.async_llm import AsyncLLM

__version__ = _pagellm.__version__

__all__ = [
    "LLM", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput", "CompletionOutput", "Logprob", "AsyncLLM",
    "EngineArgs", "AsyncEngineArgs", "Tokenizer", "get_tokenizer", "__version__",
]
