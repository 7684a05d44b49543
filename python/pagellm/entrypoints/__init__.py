"""Entry points: the offline LLM class and the OpenAI-compatible server launcher."""
