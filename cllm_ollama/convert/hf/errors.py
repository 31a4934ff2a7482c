"""What a checkpoint cllm cannot convert raises: its message is the client's 400."""

from __future__ import annotations


class ImportRefused(ValueError):
    """A Hugging Face folder cllm cannot convert, and why, in words a user can act on."""
