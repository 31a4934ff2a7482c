"""The token-level batching policy, pure: no llama.cpp, no threads, no clock of its own.

Each step: every generating slot contributes its one pending token; prompt chunks of
admitted requests fill the rest of ``n_batch``; waiting requests are admitted into free
slots before the step is planned, so a slot freed by the last step is refilled in this one.
The runner decodes the plan, samples the rows marked for output, and hands the tokens
back to ``update``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .request import Event, FinishReason, Request
from .slot import Slot, SlotState, now_ns


@dataclass
class StepPlan:
    """One llama.cpp batch: parallel arrays, plus the work to do before and after decoding."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    seq_ids: list[int] = field(default_factory=list)
    # (slot, row in the batch) for every row whose logits are sampled after the decode.
    outputs: list[tuple[Slot, int]] = field(default_factory=list)
    # (slot, number of prompt tokens in this batch) for slots still prefilling.
    prefills: list[tuple[Slot, int]] = field(default_factory=list)
    # (seq_id, position): drop that sequence's KV from the position on, before decoding.
    trims: list[tuple[int, int]] = field(default_factory=list)
    # Slots that took a new request in this step (the runner sets up their samplers).
    admitted: list[Slot] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, slot: Slot, tokens: Sequence[int], output: bool) -> None:
        start = slot.n_past
        n = len(tokens)
        self.tokens.extend(tokens)
        self.positions.extend(range(start, start + n))
        self.seq_ids.extend([slot.seq_id] * n)
        if output:
            self.outputs.append((slot, len(self.tokens) - 1))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    a, b = tuple(a), tuple(b)  # a list slice never equals a tuple slice
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    # Bisect on slice equality: C-speed comparisons instead of a Python loop over long prompts.
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _by_prefix(scored: tuple[int, Slot]) -> tuple[int, int]:
    """The longest shared prefix wins; then the lowest id, which keeps active sequence ids dense."""
    return scored[0], -scored[1].seq_id


class Scheduler:
    """Admits, plans and advances requests over a fixed pool of slots.

    ``piece`` and ``is_eog`` come from the model's vocabulary; ``paused`` says whether a
    request's reader is too far behind (its slot then skips steps instead of blocking
    the engine).
    """

    def __init__(
        self,
        n_slots: int,
        n_ctx_slot: int,
        n_batch: int,
        piece: Callable[[int], bytes],
        is_eog: Callable[[int], bool],
        paused: Callable[[int], bool] = lambda request_id: False,
        clock: Callable[[], int] = now_ns,
    ) -> None:
        self.slots = [Slot(i, n_ctx_slot) for i in range(n_slots)]
        assert n_batch >= n_slots, "every generating slot needs room in each batch"
        self.n_batch = n_batch
        self.waiting: deque[Request] = deque()
        self._piece = piece
        self._is_eog = is_eog
        self._paused = paused
        self._clock = clock
        self._by_request: dict[int, Slot] = {}

    def has_work(self) -> bool:
        return bool(self.waiting) or bool(self._by_request)

    def running_ids(self) -> list[int]:
        return list(self._by_request)

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    def abort(self, request_ids: Iterable[int]) -> list[Event]:
        """Drop requests wherever they are; running ones free their slot now."""
        events: list[Event] = []
        ids = set(request_ids)
        if not ids:
            return events
        now = self._clock()
        for rid in ids:
            slot = self._by_request.pop(rid, None)
            if slot is not None:
                events.append(slot.abort(now))
        if any(r.id in ids for r in self.waiting):
            kept: deque[Request] = deque()
            for r in self.waiting:
                if r.id in ids:
                    events.append(Event(r.id, "", (), FinishReason.CANCELED))
                else:
                    kept.append(r)
            self.waiting = kept
        return events

    def fail_all(self, message: str) -> list[Event]:
        """End every running request with an error and forget every slot's cached prefix:
        the caller clears the KV cache, whose state after a failed decode is unknown."""
        now = self._clock()
        events = [slot.fail(message, now) for slot in self._by_request.values()]
        self._by_request.clear()
        for slot in self.slots:
            slot.cached = []
        return events

    def _admit(self, plan: StepPlan) -> None:
        now = self._clock()
        while self.waiting:
            idle = [s for s in self.slots if not s.busy]
            if not idle:
                return
            request = self.waiting.popleft()
            shared, best = max(((common_prefix(s.cached, request.prompt), s) for s in idle), key=_by_prefix)
            # At least one prompt token must be decoded to get logits to sample from.
            n_reuse = min(shared, len(request.prompt) - 1)
            # Always trim: cheap, and a failed decode may have left KV that ``cached`` forgot.
            plan.trims.append((best.seq_id, n_reuse))
            best.assign(request, n_reuse, now)
            self._by_request[request.id] = best
            plan.admitted.append(best)

    def schedule(self) -> StepPlan:
        plan = StepPlan()
        self._admit(plan)
        generating = [
            s
            for s in self.slots
            if s.state is SlotState.GENERATING and not self._paused(s.request.id)  # type: ignore[union-attr]
        ]
        for slot in generating:
            plan.add(slot, (slot.last_token,), output=True)
        budget = self.n_batch - len(plan)
        prefilling = sorted(
            (s for s in self.slots if s.state is SlotState.PREFILL),
            key=lambda s: s.request.arrival_ns,  # type: ignore[union-attr]
        )
        for slot in prefilling:
            if budget <= 0:
                break
            chunk = slot.prompt_chunk(budget)
            done = slot.n_past + len(chunk) == len(slot.request.prompt)  # type: ignore[union-attr]
            plan.add(slot, chunk, output=done)
            plan.prefills.append((slot, len(chunk)))
            budget -= len(chunk)
        return plan

    def update(self, plan: StepPlan, sampled: Sequence[int]) -> list[Event]:
        """Apply a decoded step: ``sampled[i]`` is the token drawn for ``plan.outputs[i]``."""
        now = self._clock()
        for slot, n in plan.prefills:
            slot.advance_prompt(n)
        events: list[Event] = []
        for (slot, _row), token in zip(plan.outputs, sampled, strict=True):
            request = slot.request
            if request is None:
                continue  # aborted while the step ran
            event = slot.accept_token(token, self._piece(token), self._is_eog(token), now)
            if event.finish is not None:
                del self._by_request[request.id]
            events.append(event)
        return events
