"""The async engine client (AsyncLLM)."""
