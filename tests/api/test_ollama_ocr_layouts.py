"""DeepSeek-OCR in Ollama's converter layout (one GGUF with its SAM and CLIP towers inside), which
llama.cpp cannot load as it is: pulled through a registry, it is split into a ``deepseek2-ocr`` text
model and a ``deepseekocr`` projector, and answers an image exactly as the same weights written in
llama.cpp's layout do.

(The map itself, tensor for tensor, is in ``tests/store/test_layouts_ocr.py``.)
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
from cllm_ollama.testing.images import png
from cllm_ollama.testing.ocr_ggufs import write_deepseekocr_vision, write_ollama_deepseekocr

pytestmark = pytest.mark.model

CONFIG = {"model_format": "gguf", "model_family": "deepseekocr", "model_families": ["deepseekocr"], "model_type": "3B"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``ocr`` created from llama.cpp's two files, ``deepseek-ocr:tiny`` pulled in Ollama's one."""
    root = tmp_path_factory.mktemp("ollama-ocr-layouts")
    data = write_ollama_deepseekocr(root / "ollama.gguf").read_bytes()
    with fake_registry() as registry:
        registry.add_model("library/deepseek-ocr", "tiny", [(mt.MODEL, data)], CONFIG)
        settings = Settings(models_dir=root / "models", num_parallel=2, context_length=512, registry_url=registry.url)
        with serve_in_thread(create_app(settings)) as url:
            create_from_files(url, "ocr", write_deepseekocr_vision(root / "llama.cpp"))
            ollama.Client(url).pull("deepseek-ocr:tiny")
            yield url


def test_an_ollama_deepseekocr_pulled_reads_an_image_as_llama_cpp_s_files_do(server: str) -> None:
    client = ollama.Client(server)
    assert "vision" in (client.show("deepseek-ocr:tiny").capabilities or [])
    messages = [{"role": "user", "content": "Free OCR.", "images": [png(32, 32, seed=3)]}]
    want, got = (ask(client, model, messages) for model in ("ocr", "deepseek-ocr:tiny"))
    assert want.message.content and got.message.content == want.message.content
    got_logprobs, want_logprobs = ([t.logprob for t in a.logprobs or []] for a in (got, want))
    assert want_logprobs and got_logprobs == pytest.approx(want_logprobs, abs=1e-3)
    assert got.prompt_eval_count == want.prompt_eval_count
    plain = client.chat(model="deepseek-ocr:tiny", messages=[{"role": "user", "content": "Free OCR."}], options=GREEDY)
    assert plain.prompt_eval_count is not None and got.prompt_eval_count is not None
    # The global view's 16 x 16 tokens, a newline after each row and the view separator.
    assert got.prompt_eval_count - plain.prompt_eval_count >= 16 * 17 + 1
