"""Anthropic's Messages API (``/v1/messages``), translated to an Ollama chat."""
