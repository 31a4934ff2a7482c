"""What admission costs the engine thread at long contexts (issue 21): the pure scheduler, no model.

    python bench/admission.py [--slots 32] [--tokens 32768] [--reps 5]

Every generating slot waits on the engine thread while it admits, so an admission's cost is
added to that step's inter-token latency for every running stream. Three cases, each timed
around the scheduler call the runner makes once per step (``admit``), medians over ``--reps``:

- ``follow-ups``: every slot idle, holding a conversation of ``--tokens`` tokens (all sharing a
  2k-token system prompt, as agents' tool preambles do); one follow-up per conversation arrives
  at once, in shuffled order, and one ``admit`` places them all (per admission: total / slots).
- ``one-free``: all slots generate but one, which holds an old conversation; 8 long requests
  wait; one ``admit`` places one of them (the steady state of a busy server).
- ``waiting``: 8 identical long prompts arrive at once; one slot computes the prefix, the
  others wait for it (a named slot state): the cost of one step's ``admit`` while they wait.
- ``steps``: what running streams see. All slots generate; every 10th step one stream ends
  and a new long request takes its slot. The engine thread's scheduling time per step
  (``admit`` + ``plan`` + ``update``, no decode), the median of the steps that admit and of
  those that do not, over 200 steps: their difference is what an admission (and its first
  prompt chunk of up to 8192 tokens) adds to every running stream's inter-token latency.

A prompt's block keys are hashed once, when it is submitted, on the submitting thread (as
``Runner.submit`` does); ``keys`` times that alone for one prompt of ``--tokens`` tokens.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from cllm_ollama.engine.prompt_cache import PromptCache
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.scheduler import Scheduler

SYSTEM = 2048
VOCAB = 150_000


def make(slots: int, tokens: int) -> Scheduler:
    return Scheduler(
        slots,
        tokens + 1024,
        max(slots, min(8192, tokens // 4)),  # a long prompt takes several steps
        lambda t: b"x",
        lambda t: False,
        cache=PromptCache(1 << 40),
    )


def req(prompt: list[int], num_predict: int = 1) -> Request:
    request = Request(tuple(prompt), SamplingParams(temperature=0), num_predict=num_predict)
    if hasattr(Request, "prefix_keys"):
        request.prefix_keys  # noqa: B018 (as Runner.submit does, on the submitting thread)
    return request


def drain(s: Scheduler) -> None:
    while s.has_work():
        plan = s.schedule()
        s.update(plan, [1] * len(plan.outputs))


def conversations(rng: random.Random, slots: int, tokens: int) -> list[list[int]]:
    system = [rng.randrange(1, VOCAB) for _ in range(SYSTEM)]
    return [system + [rng.randrange(1, VOCAB) for _ in range(tokens - SYSTEM)] for _ in range(slots)]


def timed_admit(s: Scheduler) -> float:
    t0 = time.perf_counter_ns()
    s.admit()
    return (time.perf_counter_ns() - t0) / 1e6


def follow_ups(slots: int, tokens: int, rng: random.Random) -> float:
    s = make(slots, tokens)
    convs = conversations(rng, slots, tokens)
    for c in convs:
        s.add(req(c))
    drain(s)
    order = list(range(slots))
    rng.shuffle(order)
    for i in order:
        s.add(req([*convs[i], 1, *(rng.randrange(1, VOCAB) for _ in range(63))]))
    return timed_admit(s) / slots


def all_generating(slots: int, tokens: int, convs: list[list[int]]) -> Scheduler:
    """A scheduler whose every slot generates after one of ``convs`` (the first ``slots``)."""
    s = make(slots, tokens)
    for c in convs[:slots]:
        s.add(req(c, num_predict=10**6))
    while s.waiting or any(slot.state.value in ("prefill", "waiting") for slot in s.slots):
        plan = s.schedule()
        s.update(plan, [1] * len(plan.outputs))
    return s


def one_free(slots: int, tokens: int, rng: random.Random) -> float:
    convs = conversations(rng, slots + 8, tokens)
    s = all_generating(slots, tokens, convs)
    s.abort([s.slots[0].request.id])  # type: ignore[union-attr]
    for c in convs[slots:]:
        s.add(req(c))
    return timed_admit(s)


def waiting(slots: int, tokens: int, rng: random.Random) -> float:
    s = make(slots, tokens)
    prompt = conversations(rng, 1, tokens)[0]
    for _ in range(min(8, slots)):
        s.add(req(prompt))
    plan = s.schedule()  # the first chunk: one slot computes, the others wait
    s.update(plan, [1] * len(plan.outputs))
    return timed_admit(s)


def steps(slots: int, tokens: int, rng: random.Random) -> tuple[float, float]:
    """Median scheduling time of the steps that admit, and of the others (ms)."""
    convs = conversations(rng, slots + 20, tokens)
    s = all_generating(slots, tokens, convs)
    fresh = iter(convs[slots:])
    ms: list[float] = []
    admitting: list[float] = []
    for i in range(200):
        if i % 10 == 0:
            s.abort([s.slots[i // 10 % slots].request.id])  # type: ignore[union-attr]
            s.add(req(next(fresh), num_predict=10**6))
        t0 = time.perf_counter_ns()
        plan = s.admit()
        plan = s.plan()
        s.update(plan, [1] * len(plan.outputs))
        (admitting if i % 10 == 0 else ms).append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(admitting), statistics.median(ms)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(0)
    if hasattr(Request, "prefix_keys"):
        prompt = tuple(conversations(rng, 1, args.tokens)[0])
        ms = []
        for _ in range(args.reps):
            t0 = time.perf_counter_ns()
            Request(prompt).prefix_keys  # noqa: B018
            ms.append((time.perf_counter_ns() - t0) / 1e6)
        print(f"keys       one prompt of {args.tokens} tokens: {statistics.median(ms):9.3f} ms (submitting thread)")
    for name, case in (("follow-ups", follow_ups), ("one-free", one_free), ("waiting", waiting)):
        ms = [case(args.slots, args.tokens, rng) for _ in range(args.reps)]
        print(f"{name:10s} {args.slots} slots x {args.tokens} tokens: {statistics.median(ms):9.3f} ms per admission")
    with_admission, without = steps(args.slots, args.tokens, rng)
    print(
        f"steps      {args.slots} slots x {args.tokens} tokens: {with_admission:9.3f} ms a step that admits, "
        f"{without:.3f} ms one that does not (medians)"
    )


if __name__ == "__main__":
    main()
