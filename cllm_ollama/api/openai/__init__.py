"""OpenAI's API (``/v1/*``): chat completions, completions, embeddings, models and responses, each
translated to the Ollama request it amounts to, as Ollama's OpenAI middleware does."""
