"""Tests import the live-server helper from here; it lives in the package so that commands
(``python -m cllm_ollama.testing.codex``) serve the same way."""

from cllm_ollama.testing.serving import serve_in_thread

__all__ = ["serve_in_thread"]
