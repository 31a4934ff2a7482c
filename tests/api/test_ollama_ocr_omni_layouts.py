"""DeepSeek-OCR, GLM-OCR and Nemotron Omni in Ollama's converter layout (one GGUF with the towers inside),
which llama.cpp cannot load as it is: pulled through a registry, each is split into a text model
and a projector, and answers an image exactly as the same weights written in llama.cpp's layout do;
Nemotron Omni a clip of audio too, through its Parakeet tower.

(The maps themselves, tensor for tensor, are in ``tests/store/test_layouts_ocr.py`` and
``tests/store/test_layouts_omni.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import pytest
from fakeregistry import fake_registry
from serving import create_from_files, serve_in_thread
from test_ollama_vision_layouts import GREEDY, ask

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store import manifests as mt
from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.glm4_ggufs import write_glmocr_vision, write_ollama_glmocr
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ocr_ggufs import write_deepseekocr_vision, write_ollama_deepseekocr
from cllm_ollama.testing.omni_ggufs import write_nemotron_omni_vision, write_ollama_nemotron_omni

pytestmark = pytest.mark.model

# family: (llama.cpp's two files, Ollama's one, the image's tokens at least)
PAIRS = {
    # DeepSeek-OCR's global view: 16 x 16 tokens, a newline after each row, the view separator.
    "deepseekocr": (write_deepseekocr_vision, write_ollama_deepseekocr, 16 * 17 + 1),
    "nemotron": (write_nemotron_omni_vision, write_ollama_nemotron_omni, 4),  # 4 x 4 patches merged 2 x 2
    "glmocr": (write_glmocr_vision, write_ollama_glmocr, 8),  # libmtmd's glm4v least: 8 tokens an image
}


def config(family: str) -> dict[str, object]:
    return {"model_format": "gguf", "model_family": family, "model_families": [family], "model_type": "1M"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """For each family, ``<family>`` created from llama.cpp's two files, ``<family>-ollama:tiny``
    pulled from a registry in Ollama's one."""
    root = tmp_path_factory.mktemp("ollama-ocr-omni-layouts")
    with fake_registry() as registry:
        for family, (_, ollama_layout, _) in PAIRS.items():
            data = ollama_layout(root / f"{family}-ollama.gguf").read_bytes()
            registry.add_model(f"library/{family}-ollama", "tiny", [(mt.MODEL, data)], config(family))
        settings = Settings(models_dir=root / "models", num_parallel=2, context_length=512, registry_url=registry.url)
        with serve_in_thread(create_app(settings)) as url:
            client = ollama.Client(url)
            for family, (llama_cpp, _, _) in PAIRS.items():
                create_from_files(url, family, llama_cpp(root / family))
                client.pull(f"{family}-ollama:tiny")
            yield url


def answered_alike(client: ollama.Client, family: str, media: bytes, question: str) -> int:
    """``family`` pulled in Ollama's layout answers ``media`` as the twin made from llama.cpp's files
    does: the same answer, logprobs and prompt. Returns how many tokens ``media`` took."""
    pulled = f"{family}-ollama:tiny"
    messages = [{"role": "user", "content": question, "images": [media]}]
    want, got = (ask(client, model, messages) for model in (family, pulled))
    assert want.message.content and got.message.content == want.message.content
    got_logprobs, want_logprobs = ([t.logprob for t in a.logprobs or []] for a in (got, want))
    assert want_logprobs and got_logprobs == pytest.approx(want_logprobs, abs=1e-3)
    assert got.prompt_eval_count == want.prompt_eval_count
    plain = client.chat(model=pulled, messages=[{"role": "user", "content": question}], options=GREEDY)
    assert plain.prompt_eval_count is not None and got.prompt_eval_count is not None
    return got.prompt_eval_count - plain.prompt_eval_count


@pytest.mark.parametrize("family", sorted(PAIRS))
def test_a_model_with_its_towers_inside_pulled_sees_as_llama_cpp_s_files_do(server: str, family: str) -> None:
    client = ollama.Client(server)
    assert "vision" in (client.show(f"{family}-ollama:tiny").capabilities or [])
    assert answered_alike(client, family, png(32, 32, seed=3), "What is in this picture?") >= PAIRS[family][2]


def test_a_nemotron_omni_pulled_hears_as_llama_cpp_s_files_do(server: str) -> None:
    """Its Parakeet tower, mapped at pull, lists ``audio`` and hears a clip as the twin's projector
    does (a second is 101 mel frames, 13 tokens after the 8-fold subsampling, and the space
    Nemotron 3's renderer puts after a media tag); another clip, another answer."""
    client = ollama.Client(server)
    pulled = "nemotron-ollama:tiny"
    assert {"vision", "audio"} <= set(client.show(pulled).capabilities or [])
    assert answered_alike(client, "nemotron", wav(1.0, seed=2), "What is said here?") == 13 + 1
    answers = [
        client.chat(
            model=pulled,
            messages=[{"role": "user", "content": "What is said here?", "images": [wav(1.0, seed=seed)]}],
            options=GREEDY,
            logprobs=True,
        )
        for seed in (2, 5)
    ]
    first, second = ([t.logprob for t in a.logprobs or []] for a in answers)
    assert first and first != second  # what it hears matters
