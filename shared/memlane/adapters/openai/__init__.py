"""OpenAI-compatible HTTP adapters (OpenAI, Ollama, vLLM, ...): embeddings and chat completions."""
