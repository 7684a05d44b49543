"""Engine arguments (vLLM's vllm.engine.arg_utils)."""
