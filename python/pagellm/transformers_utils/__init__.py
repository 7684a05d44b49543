"""Tokenizer access (vLLM's vllm.transformers_utils)."""
