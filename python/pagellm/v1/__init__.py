"""vLLM V1's engine layout (vllm.v1.engine.async_llm.AsyncLLM)."""
