"""The OpenAI-compatible server."""
