"""What ``cllm bench`` sends in its prefix workloads: chats and shared prompts, as plain data.

The distinct workload (one prompt per request, nothing shared) lives in ``bench_client.run_level``.
The others are written here as *sessions*: a user who sends turns one after another, each turn
re-sending the whole conversation so far (as chat clients do), starting at a planned offset.

- ``chat``: users in groups; a group shares one system prompt (SGLang's "generated-shared-prefix"),
  every user has several turns.
- ``shared-prefix-burst``: K one-turn requests sharing a P-token system prompt, all sent at once.
- ``preamble``: N one-turn chats with the same long system preamble (a front end's tool
  definitions) and a short distinct question, a few at a time; then, as a yardstick, a few short
  questions with no preamble, one at a time.
- ``vision`` (issue 17): users each in a multi-turn chat about their own picture; the image is in
  the first user message, so every turn re-sends it (as Open WebUI does).
- ``agent`` (issue 18): a coding agent's session: a ~16k-token preamble (tool definitions and
  instructions), then turns that each add a tool result to the history; its first turn again
  while the model is loaded (warm), then after the model is unloaded (``unload_before``), and,
  run with ``resume`` on a restarted server, after a restart.

No I/O here, so what is sent can be checked without a server.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cllm_ollama.testing.images import png

from .bench_stats import make_text


class Kind(StrEnum):
    DISTINCT = "distinct"
    CHAT = "chat"
    BURST = "shared-prefix-burst"
    PREAMBLE = "preamble"
    AGENT = "agent"
    VISION = "vision"


# Per kind: default levels, max tokens, system (prefix) tokens and user-message tokens.
DEFAULTS: dict[Kind, dict[str, object]] = {
    Kind.DISTINCT: {"levels": "1,4,8,16,32", "max_tokens": 64},
    Kind.CHAT: {"levels": "12", "max_tokens": 128, "system_tokens": 450, "user_tokens": 32},
    Kind.BURST: {"levels": "16", "max_tokens": 32, "system_tokens": 1000, "user_tokens": 16},
    Kind.PREAMBLE: {"levels": "8", "max_tokens": 32, "system_tokens": 6600, "user_tokens": 16},
    Kind.AGENT: {"levels": "1", "max_tokens": 32, "system_tokens": 16000, "user_tokens": 200, "turns": 10},
    Kind.VISION: {"levels": "6", "max_tokens": 64, "system_tokens": 0, "user_tokens": 16, "turns": 3},
}
VISION_IMAGE_PX = 448  # each user's picture: a random-pixel PNG this wide and high (~600 KB)

FIRST_CHAT, LATER_CHATS, SHORT_PROMPT = "first chat", "later chats", "short prompt"
SHORT_PROMPTS = 3  # preamble: short questions without the preamble, the yardstick for "close to a short prompt"
# The agent's first turn (its known preamble) as measured at each point of the model's life.
COLD, WARM, AFTER_UNLOAD, AFTER_RESTART = "cold", "warm", "after unload", "after restart"


@dataclass(frozen=True)
class Workload:
    """The shape of one prefix workload; the number of users is the level, given per run."""

    kind: Kind
    turns: int = 1  # chat only; the others have one turn per session
    system_tokens: int = 0  # 0: no system message
    users_per_system: int = 0  # chat: users sharing one system prompt; 0 = all of them
    user_tokens: int = 32
    stagger_s: float = 0.0  # delay between the starts of consecutive users (0: all at once)
    in_flight: int = 0  # sessions running at once; 0 = all (preamble: 1 = one chat after another)
    resume: bool = False  # agent: only the first turn, on a server restarted since the full run
    # agent, on a server that cannot unload (llama-server): distinct prompts sent at once in the
    # unload's stead, as many as it has slots, so the session's KV leaves them (for its RAM cache)
    evict: int = 1

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "name": self.kind.value,
                "turns": self.turns,
                "system_tokens": self.system_tokens,
                "users_per_system": self.users_per_system,
                "user_tokens": self.user_tokens,
                "stagger_s": self.stagger_s,
                "in_flight": self.in_flight,
            }
            | ({"resume": True} if self.resume else {})
            | ({"evict": self.evict} if self.evict != 1 else {})
        )


@dataclass(frozen=True)
class Session:
    """One user: a system prompt (or none) and the user messages of its turns, each tagged with a phase."""

    user: int
    start_s: float
    system: str | None
    turns: tuple[tuple[str, str], ...]  # (phase, user message)
    image: bytes | None = None  # vision: sent with the first user message, on every turn
    # agent: every turn after the first is a tool's result, for a call the previous answer made
    tools: bool = False


def turn_phase(turn: int) -> str:
    return f"turn {turn}"


def build_waves(workload: Workload, users: int, level_key: str = "", seed: int = 0) -> list[list[Session]]:
    """The sessions of one level, in waves run one after another.

    ``level_key`` goes into every text, so no prompt of one level shares a prefix with another
    level's (nor with another run's, when it differs): each level starts cold.
    """
    build = _WAVES.get(workload.kind)
    if build is None:
        raise ValueError(f"{workload.kind.value} is not a session workload")
    return build(workload, users, level_key, seed)


def _user_turns(w: Workload, level_key: str, user: int, seed: int) -> tuple[tuple[str, str], ...]:
    """A chatting user's messages, one per turn, each tagged with its turn."""
    return tuple(
        (turn_phase(t), make_text(w.user_tokens, f"{level_key}u{user}t{t}", seed)) for t in range(1, w.turns + 1)
    )


def _chat_waves(w: Workload, users: int, level_key: str, seed: int) -> list[list[Session]]:
    size = w.users_per_system or users
    return [
        [
            Session(
                user=u,
                start_s=u * w.stagger_s,
                system=_system(w, level_key, group=u // size, seed=seed),
                turns=_user_turns(w, level_key, u, seed),
            )
            for u in range(users)
        ]
    ]


def _vision_waves(w: Workload, users: int, level_key: str, seed: int) -> list[list[Session]]:
    return [
        [
            Session(
                user=u,
                start_s=u * w.stagger_s,
                system=_system(w, level_key, group=0, seed=seed),
                turns=_user_turns(w, level_key, u, seed),
                # Distinct per user, level and seed: no level finds another's picture in a cache.
                image=png(VISION_IMAGE_PX, VISION_IMAGE_PX, seed=zlib.crc32(f"{level_key}u{u}s{seed}".encode())),
            )
            for u in range(users)
        ]
    ]


def _burst_waves(w: Workload, users: int, level_key: str, seed: int) -> list[list[Session]]:
    system = _system(w, level_key, group=0, seed=seed)
    return [
        [
            Session(u, u * w.stagger_s, system, (("burst", make_text(w.user_tokens, f"{level_key}q{u}", seed)),))
            for u in range(users)
        ]
    ]


def _preamble_waves(w: Workload, users: int, level_key: str, seed: int) -> list[list[Session]]:
    system = _system(w, level_key, group=0, seed=seed)
    chats = [
        Session(
            u,
            u * w.stagger_s,
            system,
            ((FIRST_CHAT if u == 0 else LATER_CHATS, make_text(w.user_tokens, f"{level_key}q{u}", seed)),),
        )
        for u in range(users)
    ]
    short = [
        Session(users + i, 0.0, None, ((SHORT_PROMPT, make_text(w.user_tokens, f"{level_key}s{i}", seed)),))
        for i in range(SHORT_PROMPTS)
    ]
    return [chats, short]


def _agent_waves(w: Workload, users: int, level_key: str, seed: int) -> list[list[Session]]:
    """One agent per level: its texts depend on the level key and seed only, so a resumed run
    (a restarted server) sends the very preamble and first tool result of the full run."""
    system = _system(w, level_key, group=0, seed=seed)
    first = make_text(w.user_tokens, f"{level_key}r1", seed)
    if w.resume:
        return [[Session(0, 0.0, system, ((AFTER_RESTART, first),), tools=True)]]
    turns = [(COLD, first)] + [
        (turn_phase(t), make_text(w.user_tokens, f"{level_key}r{t}", seed)) for t in range(2, w.turns + 1)
    ]
    return [
        [Session(0, 0.0, system, tuple(turns), tools=True)],
        [Session(0, 0.0, system, ((WARM, first),), tools=True)],
        [Session(0, 0.0, system, ((AFTER_UNLOAD, first),), tools=True)],
    ]


_WAVES: dict[Kind, Callable[[Workload, int, str, int], list[list[Session]]]] = {
    Kind.CHAT: _chat_waves,
    Kind.VISION: _vision_waves,
    Kind.BURST: _burst_waves,
    Kind.PREAMBLE: _preamble_waves,
    Kind.AGENT: _agent_waves,
}


def unload_before(workload: Workload, wave: int) -> bool:
    """Whether the model is unloaded before this wave (the agent's "after unload" turn)."""
    return workload.kind is Kind.AGENT and not workload.resume and wave == 2


def wave_in_flight(workload: Workload, wave: int) -> int:
    """How many sessions of a wave may run at once (0: all); the preamble's yardstick runs alone."""
    if workload.kind is Kind.PREAMBLE and wave > 0:
        return 1
    return workload.in_flight


def _system(w: Workload, level_key: str, group: int, seed: int) -> str | None:
    if w.system_tokens <= 0:
        return None
    # The group number leads, so two groups' prompts differ from their first tokens on.
    return make_text(w.system_tokens, f"{level_key}g{group}", seed)


def groups(workload: Workload) -> dict[str, tuple[str, ...]]:
    """Report rows beyond the whole level: name -> the phases it pools."""
    w = workload
    if w.kind in (Kind.CHAT, Kind.VISION):
        later = tuple(turn_phase(t) for t in range(2, w.turns + 1))
        rows: dict[str, tuple[str, ...]] = {turn_phase(1): (turn_phase(1),)}
        if later:
            rows["turns 2+"] = later
        if w.turns > 2:
            rows |= {turn_phase(t): (turn_phase(t),) for t in range(2, w.turns + 1)}
        return rows
    if w.kind is Kind.PREAMBLE:
        return {FIRST_CHAT: (FIRST_CHAT,), LATER_CHATS: (LATER_CHATS,), SHORT_PROMPT: (SHORT_PROMPT,)}
    if w.kind is Kind.AGENT:
        if w.resume:
            return {AFTER_RESTART: (AFTER_RESTART,)}
        turns = {turn_phase(t): (turn_phase(t),) for t in range(2, w.turns + 1)}
        return {COLD: (COLD,), **turns, WARM: (WARM,), AFTER_UNLOAD: (AFTER_UNLOAD,)}
    return {}


TOOL = "read_file"  # the tool an agent's answers call, each on a file of its own


def history(
    system: str | None,
    turns: Sequence[str],
    answers: Sequence[str],
    image: bytes | None = None,
    tools: bool = False,
) -> list[dict[str, Any]]:
    """The messages a chat client sends for the turn after ``answers``: system, then user/assistant pairs.

    ``turns`` holds the user messages so far (one more than ``answers``); ``image`` goes with the
    first of them, base64 in Ollama's ``images`` (``bench_client`` rewrites it for OpenAI's API).
    With ``tools`` (an agent) every answer also calls TOOL (``tool_call_id`` and ``tool_name`` on the
    assistant message) and every later turn is that call's result (role ``tool``); each API spells
    them its own way (``bench_client.dialect_messages``).
    """
    if len(turns) != len(answers) + 1:
        raise ValueError("one user message more than answers")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system is not None else []
    for n, (user, answer) in enumerate(zip(turns, [*answers, None], strict=True)):
        if tools and n > 0:
            messages.append({"role": "tool", "content": user, "tool_call_id": f"call_{n}"})
        else:
            messages.append({"role": "user", "content": user})
        if answer is not None:
            call = {"tool_call_id": f"call_{n + 1}", "tool_name": TOOL} if tools else {}
            messages.append({"role": "assistant", "content": answer, **call})
    if image is not None:
        first = next(m for m in messages if m["role"] == "user")
        first["images"] = [base64.b64encode(image).decode()]
    return messages
