"""The catalog of known model names, as data (installed as ``cllm_ollama.catalog``)."""
