"""cllm: a drop-in Ollama server with continuous batching over llama.cpp."""

__version__ = "0.1.0"
# The Ollama API version we speak; clients such as the ollama CLI compare against it.
OLLAMA_COMPAT_VERSION = "0.33.0"
