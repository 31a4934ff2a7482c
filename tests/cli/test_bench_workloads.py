"""``cllm bench``'s prefix workloads: what they send (pure), what they report, and whole runs on a fake."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import pytest
from benchfake import CACHED, CHUNKS, EVAL_COUNT, FakeServer, answer_chunks, serving
from click.testing import CliRunner
from cllm_ollama.cli.bench import bench_command, plot_results
from cllm_ollama.cli.bench_client import Api, Target, request_body
from cllm_ollama.cli.bench_stats import RequestTiming, make_text, summarize
from cllm_ollama.cli.bench_workloads import (
    SHORT_PROMPTS,
    Kind,
    Workload,
    build_waves,
    groups,
    history,
    wave_in_flight,
)
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.create import import_gguf
from cllm_ollama.store.store import ModelStore
from cllm_ollama.testing.ggufs import write_qwen3

# ---------------------------------------------------------------- what is sent


def test_texts_are_deterministic_keyed_and_about_the_asked_length() -> None:
    assert make_text(50, "g0") == make_text(50, "g0")
    assert make_text(50, "g0") != make_text(50, "g0", seed=1)
    assert make_text(50, "g0").split()[0] == "g0:" and make_text(50, "g1").split()[0] == "g1:"
    assert 48 <= len(make_text(50, "g0").split()) <= 50
    assert len(make_text(6600, "pre").split()) > 6500


def test_chat_groups_share_one_system_prompt_each() -> None:
    w = Workload(Kind.CHAT, turns=3, system_tokens=40, users_per_system=2, user_tokens=8, stagger_s=0.5)
    (sessions,) = build_waves(w, 5, "L0")
    systems = [s.system for s in sessions]
    assert systems[0] == systems[1] != systems[2] == systems[3] != systems[4]
    assert len(set(systems)) == 3
    assert all(s is not None and 34 <= len(s.split()) <= 40 for s in systems)  # the key counts a token a character
    assert [s.start_s for s in sessions] == [0.0, 0.5, 1.0, 1.5, 2.0]
    for s in sessions:
        assert [phase for phase, _ in s.turns] == ["turn 1", "turn 2", "turn 3"]
    messages = [m for s in sessions for _, m in s.turns]
    assert len(set(messages)) == 15  # every user message differs
    # all users share one prompt by default; none without system tokens
    assert len({s.system for s in build_waves(Workload(Kind.CHAT, system_tokens=40), 4)[0]}) == 1
    assert {s.system for s in build_waves(Workload(Kind.CHAT), 4)[0]} == {None}


def test_levels_never_share_a_prefix() -> None:
    w = Workload(Kind.CHAT, system_tokens=40)
    assert build_waves(w, 2, "L0")[0][0].system != build_waves(w, 2, "L1")[0][0].system
    assert build_waves(w, 2, "L0")[0][0].system == build_waves(w, 2, "L0")[0][1].system


def test_burst_shares_the_prefix_and_sends_everything_at_once() -> None:
    w = Workload(Kind.BURST, system_tokens=100, user_tokens=10)
    (sessions,) = build_waves(w, 16, "L0")
    assert len(sessions) == 16 and len({s.system for s in sessions}) == 1
    assert len({s.turns[0][1] for s in sessions}) == 16
    assert {s.start_s for s in sessions} == {0.0} and wave_in_flight(w, 0) == 0
    assert groups(w) == {}


def test_preamble_then_short_questions_alone() -> None:
    w = Workload(Kind.PREAMBLE, system_tokens=300, user_tokens=10, in_flight=1)
    chats, short = build_waves(w, 4, "L0")
    assert [s.turns[0][0] for s in chats] == ["first chat", "later chats", "later chats", "later chats"]
    assert len({s.system for s in chats}) == 1 and chats[0].system is not None
    assert len(short) == SHORT_PROMPTS and {s.system for s in short} == {None}
    assert {s.turns[0][0] for s in short} == {"short prompt"}
    assert (wave_in_flight(w, 0), wave_in_flight(w, 1)) == (1, 1)
    assert wave_in_flight(Workload(Kind.PREAMBLE, in_flight=4), 0) == 4
    assert list(groups(w)) == ["first chat", "later chats", "short prompt"]


def test_chat_groups_turn_one_apart_from_the_later_turns() -> None:
    assert groups(Workload(Kind.CHAT, turns=1)) == {"turn 1": ("turn 1",)}
    assert groups(Workload(Kind.CHAT, turns=2)) == {"turn 1": ("turn 1",), "turns 2+": ("turn 2",)}
    assert list(groups(Workload(Kind.CHAT, turns=3))) == ["turn 1", "turns 2+", "turn 2", "turn 3"]
    assert groups(Workload(Kind.CHAT, turns=3))["turns 2+"] == ("turn 2", "turn 3")


def test_history_resends_every_earlier_answer() -> None:
    assert history("S", ["u1"], []) == [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"}]
    assert history(None, ["u1", "u2", "u3"], ["a1", "a2"]) == [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "u3"},
    ]
    with pytest.raises(ValueError, match="one user message more"):
        history(None, ["u1"], ["a1"])


def test_conversations_go_only_to_chat_apis() -> None:
    messages = history("S", ["u"], [])
    assert request_body(Target("http://x", Api.CHAT, "m"), messages)["messages"] == messages
    assert request_body(Target("http://x", Api.OPENAI_CHAT, "m"), messages)["messages"] == messages
    with pytest.raises(ValueError, match="needs a chat API"):
        request_body(Target("http://x", Api.GENERATE, "m"), messages)


# ---------------------------------------------------------------- what is reported


def test_summarize_reports_turn_one_apart_from_later_turns() -> None:
    def timing(phase: str, start: float, first: float, cached: int | None = None) -> RequestTiming:
        return RequestTiming(start, first + 0.2, [first, first + 0.1], tokens=2, phase=phase, cached_tokens=cached)

    timings = [
        timing("turn 1", 0.0, 1.0),
        timing("turn 1", 0.0, 3.0),
        timing("turn 2", 5.0, 5.2, cached=40),
        timing("turn 2", 5.0, 5.4, cached=60),
        timing("turn 3", 6.0, 6.3, cached=80),
        RequestTiming(7.0, 7.0, phase="turn 3", error="not sent: an earlier turn failed"),
    ]
    s = summarize(2, timings, groups(Workload(Kind.CHAT, turns=3)))
    assert (s.requests, s.ok, s.errors, s.generated_tokens) == (6, 5, 1, 10)
    assert s.tokens_per_s == pytest.approx(10 / 7.0)
    assert s.ttft_ms["p50"] == pytest.approx(400.0)
    turn1, later = s.phases["turn 1"], s.phases["turns 2+"]
    assert turn1["ttft_ms"]["p50"] == pytest.approx(2000.0) and turn1["requests"] == 2
    assert later["ttft_ms"]["p50"] == pytest.approx(300.0) and later["ttft_ms"]["mean"] == pytest.approx(300.0)
    assert (later["requests"], later["ok"], later["errors"]) == (4, 3, 1)
    assert later["cached_tokens_mean"] == pytest.approx(60.0) and turn1["cached_tokens_mean"] is None
    assert s.phases["turn 3"]["itl_ms"]["p50"] == pytest.approx(100.0)
    assert s.cached_tokens_mean == pytest.approx(60.0)
    assert s.to_dict()["phases"]["turn 2"]["requests"] == 2


# ---------------------------------------------------------------- whole runs against the fake server


@pytest.fixture
def fake() -> Iterator[tuple[FakeServer, str]]:
    server = FakeServer()
    with serving(server) as url:
        yield server, url


def _invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(bench_command, list(args))
    assert result.exit_code == code, result.output + repr(result.exception)
    return result


def _key(body: dict[str, Any]) -> str:
    """The user a request belongs to: the key of its first user message (``L0u3t1`` -> ``L0u3``)."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    return str(first["content"]).split(":", 1)[0].rsplit("t", 1)[0]


@pytest.mark.parametrize("api", ["chat", "openai-chat"])
def test_chat_resends_the_whole_history_with_the_actual_answers(
    fake: tuple[FakeServer, str], tmp_path: Path, api: str
) -> None:
    server, url = fake
    out = tmp_path / "chat.json"
    result = _invoke(
        "--url", url, "--model", "m", "--workload", "chat", "--api", api, "--users", "4", "--turns", "3",
        "--system-tokens", "30", "--users-per-system", "2", "--user-tokens", "8", "--max-tokens", "5",
        "--json", str(out),
    )  # fmt: skip
    bodies = server.bodies[1:]  # after the warm-up
    assert server.bodies[0]["messages"][0]["role"] == "user"  # the warm-up shares no prefix
    assert len(bodies) == 12
    by_user: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        by_user.setdefault(_key(body), []).append(body)
    assert sorted(by_user) == ["L0u0", "L0u1", "L0u2", "L0u3"]
    systems = {user: turns[0]["messages"][0]["content"] for user, turns in by_user.items()}
    assert systems["L0u0"] == systems["L0u1"] != systems["L0u2"] == systems["L0u3"]
    for turns in by_user.values():
        assert [len(b["messages"]) for b in turns] == [2, 4, 6]  # system + (user, answer) pairs + user
        for t, body in enumerate(turns):
            messages = body["messages"]
            if t:  # the previous request, then its answer, then the new user message
                assert messages[:-2] == turns[t - 1]["messages"]
            # every earlier answer is the one the server streamed for that earlier request
            for k in range(t):
                assert messages[2 + 2 * k] == {"role": "assistant", "content": "".join(answer_chunks(turns[k]))}
            assert body["options" if api == "chat" else "seed"] is not None
    if api == "chat":
        assert all(b["options"]["temperature"] == 0 and b["options"]["num_predict"] == 5 for b in bodies)
    else:
        assert all(b["temperature"] == 0 and b["max_tokens"] == 5 and "ignore_eos" not in b for b in bodies)
    doc = json.loads(out.read_text())
    assert doc["workload"] == {
        "name": "chat", "turns": 3, "system_tokens": 30, "users_per_system": 2, "user_tokens": 8,
        "stagger_s": 0.0, "in_flight": 0,
    }  # fmt: skip
    (level,) = doc["levels"]
    assert (level["concurrency"], level["requests"], level["ok"], level["errors"]) == (4, 12, 12, 0)
    assert level["generated_tokens"] == 12 * EVAL_COUNT
    assert list(level["phases"]) == ["turn 1", "turns 2+", "turn 2", "turn 3"]
    assert level["phases"]["turn 1"]["requests"] == 4 and level["phases"]["turns 2+"]["requests"] == 8
    assert level["cached_tokens_mean"] == (CACHED if api == "openai-chat" else None)
    lines = result.output.splitlines()
    assert lines[1].split()[0] == "users" and lines[1].split()[-1] == "cached"
    assert lines[2].split()[:4] == ["4", "12", "12", "0"]
    assert [line.split(":")[0].strip() for line in lines[3:7]] == ["turn 1", "turns 2+", "turn 2", "turn 3"]


def test_chat_users_run_at_once(fake: tuple[FakeServer, str]) -> None:
    server, url = fake
    _invoke("--url", url, "--model", "gate-3", "-w", "chat", "-u", "3", "--turns", "2", "--warmup", "0")
    assert server.peak == 3 and len(server.bodies) == 6


def test_a_failed_turn_ends_the_users_chat(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    server, url = fake
    out = tmp_path / "f.json"
    # conversations longer than 3 messages fail: turn 2 (system, u1, a1, u2) of every user
    _invoke("--url", url, "--model", "fail-over-3", "-w", "chat", "-u", "2", "--turns", "3", "--system-tokens",
            "10", "--warmup", "0", "--json", str(out))  # fmt: skip
    assert len(server.bodies) == 4  # turns 1 and 2 of each user; turn 3 never sent
    (level,) = json.loads(out.read_text())["levels"]
    assert (level["requests"], level["ok"], level["errors"]) == (6, 2, 4)
    assert level["phases"]["turn 1"]["errors"] == 0 and level["phases"]["turns 2+"]["errors"] == 4
    assert "not sent: an earlier turn failed" in level["error_samples"]


def test_burst_sends_every_request_at_once(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    server, url = fake
    out = tmp_path / "b.json"
    _invoke("--url", url, "--model", "gate-6", "-w", "shared-prefix-burst", "-u", "6", "--system-tokens", "50",
            "--warmup", "0", "--json", str(out))  # fmt: skip
    assert server.peak == 6
    assert len({b["messages"][0]["content"] for b in server.bodies}) == 1
    assert len({b["messages"][1]["content"] for b in server.bodies}) == 6
    (level,) = json.loads(out.read_text())["levels"]
    assert level["ok"] == 6 and level["phases"] == {}


def test_preamble_chats_one_at_a_time_then_short_prompts(fake: tuple[FakeServer, str], tmp_path: Path) -> None:
    server, url = fake
    out = tmp_path / "p.json"
    _invoke("--url", url, "--model", "m", "-w", "preamble", "-u", "3", "--system-tokens", "200", "--warmup", "0",
            "--json", str(out))  # fmt: skip
    assert server.peak == 1
    assert [len(b["messages"]) for b in server.bodies] == [2, 2, 2] + [1] * SHORT_PROMPTS
    assert len({b["messages"][0]["content"] for b in server.bodies[:3]}) == 1
    (level,) = json.loads(out.read_text())["levels"]
    phases = level["phases"]
    assert [phases[name]["requests"] for name in ("first chat", "later chats", "short prompt")] == [1, 2, 3]
    # in flight at once: two chats
    server.bodies.clear()
    _invoke("--url", url, "--model", "gate-2", "-w", "preamble", "-u", "2", "-c", "2", "--warmup", "0")
    assert server.peak == 2


def test_prefix_workload_usage_errors(fake: tuple[FakeServer, str]) -> None:
    _, url = fake
    out = _invoke("--url", url, "--model", "m", "-w", "chat", "--api", "generate", code=2).output
    assert "use --api chat or openai-chat" in out
    out = _invoke("--url", url, "--model", "m", "-w", "chat", "-c", "4", code=2).output
    assert "takes its levels from --users" in out
    out = _invoke("--url", url, "--model", "m", "-w", "preamble", "-c", "1,2", code=2).output
    assert "one number" in out
    out = _invoke("--url", url, "--model", "m", "-u", "4", code=2).output
    assert "distinct uses --concurrency" in out


def test_plot_draws_prefix_results_as_bars(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    phase = {"ttft_ms": {"p50": 5.0}}
    level = {"concurrency": 4, "tokens_per_s": 10.0, "ttft_ms": {"p50": 9.0}, "phases": {"turn 1": phase}}
    results = [{"label": name, "workload": {"name": "chat"}, "levels": [level]} for name in ("a", "b")]
    png = tmp_path / "p.png"
    plot_results(results, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(Exception, match="one plot per workload"):
        plot_results([*results, {"label": "c", "levels": [level]}], png)


def test_chunks_constant_matches_the_fake() -> None:
    assert len(answer_chunks({"messages": [{"role": "user", "content": "k: x"}]})) == CHUNKS


# ---------------------------------------------------------------- a live cllm server


@pytest.fixture(scope="module")
def live_cllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """cllm serving a tiny model that never ends an answer by itself (every answer is max-tokens long)."""
    folder = tmp_path_factory.mktemp("live-bench")
    gguf_path = write_qwen3(folder / "endless.gguf", qtype=gguf.GGMLQuantizationType.Q8_0, endless=True)
    import_gguf(ModelStore(folder / "models"), "endless", gguf_path)
    settings = Settings(models_dir=folder / "models", num_parallel=4, context_length=512, num_thread=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url


@pytest.mark.model
@pytest.mark.parametrize("api", ["chat", "openai-chat"])
def test_chat_against_a_live_server(live_cllm: str, tmp_path: Path, api: str) -> None:
    out = tmp_path / "live.json"
    _invoke("--url", live_cllm, "--model", "endless", "-w", "chat", "--api", api, "-u", "2", "--turns", "2",
            "--system-tokens", "40", "--user-tokens", "8", "--max-tokens", "4", "--json", str(out))  # fmt: skip
    (level,) = json.loads(out.read_text())["levels"]
    assert (level["requests"], level["ok"], level["errors"]) == (4, 4, 0), level["error_samples"]
    assert level["generated_tokens"] == 4 * 4
    turn1, later = level["phases"]["turn 1"], level["phases"]["turns 2+"]
    assert turn1["ttft_ms"]["p50"] > 0 and later["ttft_ms"]["p50"] > 0
    # the second turn carries the first turn's prompt, its answer and a new message: a longer prompt
    assert later["prompt_tokens_mean"] > turn1["prompt_tokens_mean"]


@pytest.mark.parametrize("api", ["chat", "openai-chat"])
def test_vision_users_resend_their_own_picture_every_turn(fake: tuple[FakeServer, str], api: str) -> None:
    """Each user's first message carries its picture on every turn (Ollama's ``images``, or an
    OpenAI ``image_url`` data URL); users' pictures differ; turn 1 is reported apart."""
    server, url = fake
    _invoke(
        "--url", url, "--model", "m", "--workload", "vision", "--api", api, "--users", "3", "--turns", "2",
        "--user-tokens", "8", "--max-tokens", "5",
    )  # fmt: skip
    bodies = server.bodies[1:]
    assert len(bodies) == 6

    def picture(body: dict[str, Any]) -> str:
        first = next(m for m in body["messages"] if m["role"] == "user")
        if api == "chat":
            (image,) = first["images"]
            return str(image)
        text, part = first["content"]
        assert text["type"] == "text" and part["type"] == "image_url"
        return str(part["image_url"]["url"]).removeprefix("data:image/png;base64,")

    by_user: dict[str, set[str]] = {}
    for body in bodies:
        assert sum(1 for m in body["messages"] if "images" in m or isinstance(m["content"], list)) == 1
        first = next(m for m in body["messages"] if m["role"] == "user")
        text = first["content"] if api == "chat" else first["content"][0]["text"]
        by_user.setdefault(text.split(":", 1)[0].rsplit("t", 1)[0], set()).add(picture(body))
    assert sorted(by_user) == ["L0u0", "L0u1", "L0u2"]
    assert all(len(images) == 1 for images in by_user.values())
    assert len(set().union(*by_user.values())) == 3
    assert base64.b64decode(next(iter(by_user["L0u0"])))[:8] == b"\x89PNG\r\n\x1a\n"
