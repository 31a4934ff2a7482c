"""The on-disk model store (Ollama layout), names, pulls from Hugging Face, and model creation.

Never imports ``engine`` or ``api``.
"""
