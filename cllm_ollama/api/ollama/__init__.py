"""Ollama's own API (``/api/*``): generation, chat, embeddings, model management, running models."""
