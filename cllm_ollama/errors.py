"""The exception tree every layer raises; ``api/errors.py`` is the one place that turns it into HTTP.

    CllmError                  (500 unless a subclass says otherwise)
    ├── InvalidRequest         400  bad input a client can fix
    │   ├── MediaError         400  an image or a clip the projector cannot read
    │   ├── MediaTooLarge      400  media past a size limit (named in the message)
    │   └── ContextOverflow    400  prompt longer than num_ctx with truncate:false
    ├── NotFound               404  model, blob or file that does not exist
    ├── QueueFull              503  beyond OLLAMA_MAX_QUEUE
    ├── RequestCanceled        499  the client left while waiting
    ├── PullError              500  the hub or the network failed a pull
    ├── StorageFull            500  the model store's disk is full (Go's words for the write)
    └── EngineError            500  llama.cpp failed to load or decode
        └── InsufficientMemory 500  the KV cache (and weights) would not fit

Messages are Ollama's exact strings where Ollama has one: clients match on them.
"""

from __future__ import annotations


class CllmError(Exception):
    """Base of every error cllm reports to a client."""

    status_code: int = 500

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code


class InvalidRequest(CllmError):
    status_code = 400


class MediaError(InvalidRequest):
    """Bytes sent as an image or audio that the model's projector cannot read as either."""

    def __init__(self, detail: str) -> None:
        # llama-server's words, which Ollama passes on; ``detail`` says what was wrong.
        super().__init__("Failed to load image or audio file")
        self.detail = detail


class MediaTooLarge(InvalidRequest):
    """Media past one of the server's size limits: the message names the item, its size and the
    limit (its setting), so that a client knows what to shrink; nothing of it was decoded."""


class ContextOverflow(InvalidRequest):
    def __init__(self) -> None:
        super().__init__(
            "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with a "
            "longer context length"
        )


class NotFound(CllmError):
    status_code = 404


class QueueFull(CllmError):
    status_code = 503

    def __init__(self) -> None:
        # NOTE: two spaces, as Ollama writes it.
        super().__init__("server busy, please try again.  maximum pending requests exceeded")


class RequestCanceled(CllmError):
    status_code = 499

    def __init__(self) -> None:
        super().__init__("request canceled")


class PullError(CllmError):
    status_code = 500


class StorageFull(CllmError):
    """A write to the store ran out of disk: Ollama answers with Go's error for the write."""

    status_code = 500

    def __init__(self, path: object) -> None:
        super().__init__(f"write {path}: no space left on device")


class EngineError(CllmError):
    status_code = 500


class InsufficientMemory(EngineError):
    """A load whose KV cache (and weights) would not fit in the memory it needs.

    ``fits`` is the largest slot count (the asked one halved, down to 1) that would fit, or None
    when even one slot does not: the pool evicts idle models, then retries with that many slots.
    """

    def __init__(self, message: str, fits: int | None = None) -> None:
        super().__init__(message)
        self.fits = fits
