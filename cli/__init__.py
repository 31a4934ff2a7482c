"""The ``cllm`` command line (installed as ``cllm_ollama.cli``)."""
