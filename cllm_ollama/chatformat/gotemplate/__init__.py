"""Go's ``text/template``, as Ollama's prompt templates use it."""
