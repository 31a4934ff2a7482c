"""Open WebUI's picture chats, replayed against a real server and the tiny vision model (issue 35).

Open WebUI sets no ``num_ctx`` and sends its 36 tool definitions with every chat (~6.6k tokens):
the first picture message must grow the default 4,096-token context as a text one does, the
follow-up (the picture and the previous answer re-sent) and the first message after an unload
too. A picture conversation over a client's ``num_ctx`` loses its oldest turns with their images,
keeps the latest image, answers, and says how much it cut.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serving import create_from_files, serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import DEFAULT_CONTEXT_GROW, Settings
from cllm_ollama.testing.ggufs import write_vision
from cllm_ollama.testing.images import png

pytestmark = pytest.mark.model

GREEDY = {"temperature": 0, "seed": 1, "num_predict": 8}
# Tool names of the kind Open WebUI's built-in tools have (its native function calling).
TOOL_NAMES = [
    "search_web",
    "fetch_url",
    "get_current_timestamp",
    "calculate_timestamp",
    "search_notes",
    "view_note",
    "write_note",
    "replace_note_content",
    "search_chats",
    "view_chat",
    "search_knowledge_bases",
    "query_knowledge_bases",
    "search_knowledge_files",
    "query_knowledge_files",
    "view_knowledge_file",
    "list_knowledge_bases",
    "view_file",
    "generate_image",
    "edit_image",
    "execute_code",
    "search_memories",
    "add_memory",
    "replace_memory_content",
    "delete_memory",
    "list_memories",
    "get_user_info",
    "update_user_settings",
    "list_models",
    "list_tools",
    "view_skill",
    "list_skills",
    "create_channel_message",
    "search_channels",
    "view_channel",
    "search_files",
    "view_folder",
]


def openwebui_tools() -> list[dict[str, Any]]:
    """36 tool definitions of ~180 tokens each (the tiny model's tokenizer takes about a character
    a token): with the question, ~6.6k tokens, as Open WebUI's come to with a real model's."""
    tools = []
    for name in TOOL_NAMES:
        words = name.replace("_", " ")
        function = {
            "name": name,
            "description": f"Use this to {words}: it returns JSON.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": f"What to {words}."}},
                "required": ["query"],
            },
        }
        tools.append({"type": "function", "function": function})
    assert len(tools) == 36
    return tools


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's defaults: a 4,096-token context that prompts may grow (no OLLAMA_CONTEXT_LENGTH)."""
    root = tmp_path_factory.mktemp("picture-chats")
    settings = Settings(models_dir=root / "models", num_parallel=1, context_grow=DEFAULT_CONTEXT_GROW)
    assert settings.context_length == 4096
    with serve_in_thread(create_app(settings)) as url:
        create_from_files(url, "eyes", write_vision(root / "vision"))
        yield url


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def stream_chat(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    """POST /api/chat streaming, as Open WebUI does: the status, the final chunk and the text."""
    with httpx.stream("POST", f"{url}/api/chat", json=body | {"stream": True}, timeout=300) as r:
        if r.status_code != 200:
            return r.status_code, json.loads(r.read()), ""
        chunks = [json.loads(line) for line in r.iter_lines() if line]
    text = "".join(c["message"]["content"] for c in chunks if "message" in c)
    return 200, chunks[-1], text


def loaded_context(url: str) -> int:
    (model,) = httpx.get(f"{url}/api/ps").json()["models"]
    return int(model["context_length"])


def test_open_webuis_picture_flow_grows_the_context_across_follow_ups_and_unloads(server: str) -> None:
    picture = b64(png(32, 32, seed=1))
    first = [{"role": "user", "content": "What is in this picture?", "images": [picture]}]
    body = {"model": "eyes", "messages": first, "tools": openwebui_tools(), "options": GREEDY}
    status, done, answer = stream_chat(server, body)
    assert status == 200, done
    assert done["done"] and 6000 < done["prompt_eval_count"] < 7200 and "truncated_prompt_tokens" not in done
    assert loaded_context(server) > 4096
    # The follow-up re-sends the picture and the answer as text.
    follow = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "And its colours?"}]
    status, done, answer = stream_chat(server, body | {"messages": follow})
    assert status == 200, done
    assert "truncated_prompt_tokens" not in done
    # Open WebUI's unload (keep_alive 0); the next message loads the model at 4,096 and grows it again.
    assert httpx.post(f"{server}/api/chat", json={"model": "eyes", "messages": [], "keep_alive": 0}).status_code == 200
    assert httpx.get(f"{server}/api/ps").json()["models"] == []
    follow += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Anything else?"}]
    status, done, _ = stream_chat(server, body | {"messages": follow})
    assert status == 200, done
    assert "truncated_prompt_tokens" not in done and loaded_context(server) > 4096


LONG = "Tell me about the sea, the sky and the land, and about what lies between them. " * 12


def test_a_picture_chat_over_num_ctx_loses_its_oldest_turns_with_their_images(server: str) -> None:
    """Only the system prompt and the last turn fit 512 tokens: the answer is the one that pair
    alone gets, its latest image included, and the cut is reported."""
    system = {"role": "system", "content": "You describe pictures."}
    last = {"role": "user", "content": "And this one?", "images": [b64(png(32, 32, seed=4))]}
    messages: list[dict[str, Any]] = [system]
    for seed in (2, 3):
        messages.append({"role": "user", "content": LONG, "images": [b64(png(32, 32, seed=seed))]})
        messages.append({"role": "assistant", "content": LONG})
    options = GREEDY | {"num_ctx": 512}
    status, cut, text = stream_chat(server, {"model": "eyes", "messages": [*messages, last], "options": options})
    assert status == 200, cut
    assert cut["truncated_prompt_tokens"] > 0 and cut["prompt_eval_count"] < 512
    status, alone, alone_text = stream_chat(server, {"model": "eyes", "messages": [system, last], "options": options})
    assert status == 200 and "truncated_prompt_tokens" not in alone
    assert (cut["prompt_eval_count"], text) == (alone["prompt_eval_count"], alone_text)
    blind = {"model": "eyes", "messages": [system, last | {"images": []}], "options": options}
    status, no_image, _ = stream_chat(server, blind)
    assert status == 200 and no_image["prompt_eval_count"] < alone["prompt_eval_count"]  # the image was in it
    # If even the last turn with its image does not fit: Ollama's 400.
    tiny = {"model": "eyes", "messages": [system, last | {"content": LONG}], "options": options | {"num_ctx": 64}}
    status, error, _ = stream_chat(server, tiny)
    assert status == 400 and error["error"].startswith("the prompt is longer than the context length")
