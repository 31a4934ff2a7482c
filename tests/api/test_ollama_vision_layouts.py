"""Models that see, in Ollama's converter layout (one GGUF with the vision tower inside) that
llama.cpp cannot load as it is: a Mistral Small 3.1 with its Pixtral tower, a Qwen3-VL with
deepstack, a Llama 4, a Gemma 4 (its audio tower inside too), a Qwen 3.5. Created, they are split into a text
model and a projector, and answer an image exactly as the same weights written in llama.cpp's
layout do.

(The map itself, tensor for tensor, is in ``tests/store/test_layouts_vision.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ollama
import pytest
from polling import until
from serving import create_from_files, serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ollama_vision_ggufs import (
    write_ollama_gemma4,
    write_ollama_llama4_vision,
    write_ollama_mistral3_vision,
    write_ollama_qwen3vl_vision,
    write_ollama_qwen35_vision,
)
from cllm_ollama.testing.tower_ggufs import write_gemma4_vision, write_qwen35_vision
from cllm_ollama.testing.vision_ggufs import write_llama4_vision, write_mistral3_vision, write_qwen3vl_vision

pytestmark = pytest.mark.model

GREEDY = {"temperature": 0, "num_predict": 8, "seed": 1}
PAIRS = {
    "pixtral": (write_mistral3_vision, write_ollama_mistral3_vision),
    "qwen3vl": (write_qwen3vl_vision, write_ollama_qwen3vl_vision),
    "llama4": (write_llama4_vision, write_ollama_llama4_vision),
    "gemma4": (write_gemma4_vision, write_ollama_gemma4),
    "qwen35": (write_qwen35_vision, write_ollama_qwen35_vision),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """For each family, ``<family>`` from llama.cpp's two files and ``<family>-ollama`` from Ollama's one."""
    root = tmp_path_factory.mktemp("ollama-vision-layouts")
    settings = Settings(models_dir=root / "models", num_parallel=2, context_length=512)
    with serve_in_thread(create_app(settings)) as url:
        for family, (llama_cpp, ollama_layout) in PAIRS.items():
            create_from_files(url, family, llama_cpp(root / family))
            create_from_files(url, f"{family}-ollama", (ollama_layout(root / f"{family}-ollama.gguf"),))
        yield url


def ask(client: ollama.Client, model: str, messages: list[dict[str, Any]]) -> ollama.ChatResponse:
    """``model``'s answer, the model then unloaded: the map may write a text GGUF byte for byte the
    same as llama.cpp's, so the two models share a text blob; the pool keys by projector too
    (``tests/engine/test_pool.py``), and unloading keeps each answer from a fresh load regardless."""
    answer = client.chat(model=model, messages=messages, options=GREEDY, logprobs=True)
    client.generate(model=model, prompt="", keep_alive=0)
    until(lambda: all(m.name != f"{model}:latest" for m in client.ps().models))
    return answer


@pytest.mark.parametrize("family", sorted(PAIRS))
def test_a_vision_model_in_ollamas_layout_sees_as_llama_cpp_s_files_do(server: str, family: str) -> None:
    client = ollama.Client(server)
    assert "vision" in (client.show(f"{family}-ollama").capabilities or [])
    image = png(32, 32, seed=3)
    messages = [{"role": "user", "content": "What is in this picture?", "images": [image]}]
    answers = [ask(client, m, messages) for m in (family, f"{family}-ollama")]
    assert answers[0].message.content and answers[0].message.content == answers[1].message.content
    # The same numbers, not only the same greedy picks (up to the last bits that llama.cpp's
    # threaded kernels vary from run to run).
    got, want = ([t.logprob for t in a.logprobs or []] for a in (answers[1], answers[0]))
    assert want and got == pytest.approx(want, abs=1e-3)
    assert answers[0].prompt_eval_count == answers[1].prompt_eval_count
    text_only = [{"role": "user", "content": "What is in this picture?"}]
    plain = client.chat(model=f"{family}-ollama", messages=text_only, options=GREEDY)
    assert plain.prompt_eval_count is not None and answers[1].prompt_eval_count is not None
    assert answers[1].prompt_eval_count > plain.prompt_eval_count  # the image's tokens are counted
