"""A step's sampling: each output row's token, and the log-probabilities asked for.

Requests with a native sampler chain (``binding.Sampler``) keep it from their submit to their
end: primed with the prompt when admitted, sampled from each step, closed when they finish.
Greedy requests have none: their tokens are argmaxes over the logits, without per-token
Python work when the whole step is greedy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .binding import Context, Sampler
from .request import TokenLogprob
from .scheduler import StepPlan
from .slot import Slot


class Sampling:
    """The samplers of the requests the engine knows, by request id (engine thread only)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.samplers: dict[int, Sampler] = {}

    def add(self, request_id: int, sampler: Sampler | None) -> None:
        if sampler is not None:
            self.samplers[request_id] = sampler

    def release(self, request_id: int) -> None:
        """The request ended: its chain is freed."""
        sampler = self.samplers.pop(request_id, None)
        if sampler is not None:
            sampler.close()

    def prime(self, admitted: Iterable[Slot]) -> None:
        """Feed each newly admitted request's prompt (its penalty window) to its chain."""
        for slot in admitted:
            request = slot.request
            assert request is not None
            sampler = self.samplers.get(request.id)
            if sampler is not None:
                window = request.sampling.prime_window
                prompt = request.prompt[-window:] if window > 0 else request.prompt
                # A media item's cells are no tokens: they take no part in penalties.
                sampler.prime([t for t in prompt if t >= 0] if request.media is not None else prompt)

    def sample(self, plan: StepPlan, rows: Sequence[int], picks: Sequence[int], n_logits: int) -> Sequence[int]:
        """A token for each of ``plan.outputs``: ``rows[j]`` is its row in the decoded batch,
        ``picks[j]`` its logits row among ``n_logits`` (they differ in the deterministic mode)."""
        outputs = plan.outputs
        if not outputs:
            return ()
        chains = [self.samplers.get(slot.request.id) for slot, _ in outputs]  # type: ignore[union-attr]
        if not any(chains):
            # All greedy: one argmax over the logits rows, no per-vocabulary Python work.
            best = np.argmax(self.ctx.logits(n_logits), axis=1)
            return best.tolist() if n_logits == len(outputs) else best[list(picks)].tolist()  # type: ignore[no-any-return]
        logits: np.ndarray | None = None
        tokens: list[int] = []
        for j, sampler in enumerate(chains):
            if sampler is not None:
                tokens.append(sampler.sample(self.ctx, rows[j]))
            else:
                if logits is None:
                    logits = self.ctx.logits(n_logits)
                tokens.append(int(logits[picks[j]].argmax()))
        return tokens

    def logprobs(
        self, plan: StepPlan, sampled: Sequence[int], picks: Sequence[int], n_logits: int
    ) -> dict[int, TokenLogprob]:
        """Log-softmax of the raw logits, only for the requests that asked for it (``picks[j]``: the
        logits row of ``plan.outputs[j]`` among ``n_logits``)."""
        out: dict[int, TokenLogprob] = {}
        logits: np.ndarray | None = None
        for j, ((slot, _row), token) in enumerate(zip(plan.outputs, sampled, strict=True)):
            request = slot.request
            if request is None or request.logprobs < 0:
                continue
            if logits is None:
                logits = self.ctx.logits(n_logits)
            row = logits[picks[j]].astype(np.float64)
            peak = row.max()
            log_z = peak + np.log(np.exp(row - peak).sum())
            top: tuple[tuple[int, float], ...] = ()
            if request.logprobs > 0:
                best = np.argpartition(row, -request.logprobs)[-request.logprobs :]
                best = best[np.argsort(-row[best])]
                top = tuple((int(t), float(row[t] - log_z)) for t in best)
            out[request.id] = TokenLogprob(int(token), float(row[token] - log_z), top)
        return out
