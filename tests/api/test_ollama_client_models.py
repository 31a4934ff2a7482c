"""The official ollama Python client manages models on a real cllm server (uvicorn in a thread)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import gguf
import httpx
import ollama
import pytest
import sentencepiece
from fakehub import FakeHub
from harness.child_server import cllm_serve
from serving import serve_in_thread

from cllm_ollama.app import create_app
from cllm_ollama.config import Settings
from cllm_ollama.store.modelfile import adapter_files, model_folder_files
from cllm_ollama.testing.audio import wav
from cllm_ollama.testing.ggufs import write_qwen3
from cllm_ollama.testing.hf_folders import (
    LORA_BASES,
    write_hf_bert,
    write_hf_command_r,
    write_hf_deepseek2,
    write_hf_embeddinggemma,
    write_hf_gemma,
    write_hf_gemma2,
    write_hf_gemma3,
    write_hf_gemma3_vision,
    write_hf_gemma3n,
    write_hf_gemma4,
    write_hf_gemma4_vision,
    write_hf_glm4,
    write_hf_glm4v,
    write_hf_glmocr,
    write_hf_gptoss,
    write_hf_laguna,
    write_hf_lfm2,
    write_hf_lfm2_vision,
    write_hf_lfm2moe,
    write_hf_llama,
    write_hf_llama4,
    write_hf_lora,
    write_hf_ministral3,
    write_hf_mistral,
    write_hf_mistral3_vision,
    write_hf_mixtral,
    write_hf_nemotron_h,
    write_hf_nemotron_omni,
    write_hf_olmo3,
    write_hf_phi3,
    write_hf_qwen3,
    write_hf_qwen3moe,
    write_hf_qwen3next,
    write_hf_qwen3vl_vision,
    write_hf_qwen25vl_vision,
    write_hf_qwen35,
    write_hf_qwen35_vision,
    write_hf_qwen35moe,
)
from cllm_ollama.testing.images import png


def write_hf_phi3_longrope(folder: Path) -> tuple[Path, Path]:
    return write_hf_phi3(folder, longrope=True)


def write_hf_gemma4_moe(folder: Path) -> tuple[Path, Path]:
    return write_hf_gemma4(folder, moe=True)


def write_hf_deepseek_v3(folder: Path) -> tuple[Path, Path]:
    return write_hf_deepseek2(folder, glm=False)


def write_hf_deepseek_v2(folder: Path) -> tuple[Path, Path]:
    return write_hf_deepseek2(folder, v2=True)


def write_hf_gemma3n_release(folder: Path) -> tuple[Path, Path]:
    return write_hf_gemma3n(folder, sees=True)


def write_hf_nemotron3_nano(folder: Path) -> tuple[Path, Path]:
    return write_hf_nemotron_h(folder, shape="nano3", transformers_5=True)


@pytest.fixture
def client(store_settings: Settings) -> Iterator[ollama.Client]:
    with serve_in_thread(create_app(store_settings)) as url:
        yield ollama.Client(host=url)


def test_create_list_show_copy_delete(client: ollama.Client, tiny_gguf: Path) -> None:
    digest = client.create_blob(tiny_gguf)
    assert digest.startswith("sha256:")
    progress = client.create(
        "tiny",
        files={"tiny.gguf": digest},
        system="You are terse.",
        parameters={"temperature": 0.6, "stop": ["<|im_end|>"]},
    )
    assert progress.status == "success"
    template = "{{ .System }}{{ .Prompt }}"
    streamed = [p.status for p in client.create("tiny2", from_="tiny", template=template, stream=True)]
    assert streamed[-2:] == ["writing manifest", "success"]

    listed = {m.model: m for m in client.list().models}
    assert set(listed) == {"tiny:latest", "tiny2:latest"}
    tiny = listed["tiny:latest"]
    assert tiny.details is not None and tiny.details.family == "qwen3" and tiny.details.format == "gguf"
    assert tiny.size and tiny.digest and tiny.modified_at is not None

    show = client.show("tiny")
    assert show.modelinfo is not None and show.modelinfo["general.architecture"] == "qwen3"
    assert show.capabilities == ["completion", "tools", "thinking"]
    assert show.parameters is not None and 'stop                           "<|im_end|>"' in show.parameters
    assert show.details is not None and show.details.parameter_size == "99K"
    assert client.show("tiny2").template == template

    assert client.copy("tiny", "me/tiny:copy").status == "success"
    assert client.delete("tiny").status == "success"
    assert {m.model for m in client.list().models} == {"tiny2:latest", "me/tiny:copy"}
    with pytest.raises(ollama.ResponseError) as err:
        client.show("tiny")
    assert (err.value.status_code, err.value.error) == (404, "model 'tiny:latest' not found")
    with pytest.raises(ollama.ResponseError) as err:
        client.delete("tiny")
    assert err.value.status_code == 404


def test_pull(client: ollama.Client, fake_hub: FakeHub, tiny_gguf: Path) -> None:
    fake_hub.add("test/Tiny-GGUF", "tiny-Q4_K_M.gguf", tiny_gguf.read_bytes())
    statuses = [p.status for p in client.pull("hf.co/test/Tiny-GGUF", stream=True)]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    assert client.pull("hf.co/test/Tiny-GGUF:Q4_K_M").status == "success"
    assert {m.model for m in client.list().models} == {"hf.co/test/Tiny-GGUF:latest", "hf.co/test/Tiny-GGUF:Q4_K_M"}

    with pytest.raises(ollama.ResponseError, match="pull model manifest: file does not exist"):
        list(client.pull("hf.co/nobody/nothing", stream=True))
    with pytest.raises(ollama.ResponseError) as err:
        client.pull("hf.co/nobody/nothing")
    assert err.value.status_code == 500


@pytest.mark.model  # llama.cpp quantizes (in a child of the server) and serves what it wrote
def test_create_quantize_with_the_official_client(tmp_path: Path) -> None:
    """``ollama create -q`` as the Python client sends it, to a real ``cllm serve``: an F16 model
    stored as Q8_0, Ollama's progress on the way, and the result loads and answers."""
    f16 = write_qwen3(tmp_path / "f16.gguf", qtype=gguf.GGMLQuantizationType.F16)
    with cllm_serve(tmp_path / "models", {}, tmp_path / "serve.log") as (_, url):
        client = ollama.Client(host=url)
        digest = client.create_blob(f16)
        progress = list(client.create("small", files={"f16.gguf": digest}, quantize="q8_0", stream=True))
        quantizing = [p for p in progress if p.status == "quantizing F16 model to Q8_0"]
        assert quantizing[-1].completed == quantizing[-1].total == f16.stat().st_size
        assert [p.status for p in progress][-2:] == ["writing manifest", "success"]
        show = client.show("small")
        assert show.details is not None and show.details.quantization_level == "Q8_0"
        reply = client.generate("small", "Hello", options={"num_predict": 4, "temperature": 0})
        assert reply.done and 0 < (reply.eval_count or 0) <= 4
        with pytest.raises(ollama.ResponseError) as err:
            client.create("bad", files={"f16.gguf": digest}, quantize="q2_K")
        assert (err.value.status_code, err.value.error) == (
            400,
            "unsupported quantization type Q2_K - supported types are F32, F16, Q4_K_S, Q4_K_M, Q8_0",
        )
        assert [m.model for m in client.list().models] == ["small:latest"]


@pytest.mark.model  # both models load through llama.cpp and answer greedily
def test_create_from_a_checkpoint_answers_as_its_twin(tmp_path: Path) -> None:
    """A Hugging Face folder uploaded as ``ollama create`` uploads it, to a real ``cllm serve``:
    converted, it answers word for word as the GGUF it was exported from (a Llama's Q and K rows
    reordered on the way, Gemma's norms shifted, a Qwen3's kept, a mixture's experts stacked, Qwen
    3.5's delta nets as llama.cpp keeps them, gpt-oss's MXFP4 experts repacked, Gemma 4's per-layer
    embeddings and shared KV, DeepSeek V3's latent attention split as llama.cpp computes it, Nemotron-H's Mamba-2
    layers), and
    a SentencePiece vocabulary
    splits text as the sentencepiece package does."""
    with cllm_serve(tmp_path / "models", {}, tmp_path / "serve.log") as (_, url):
        client = ollama.Client(host=url)
        for write in (
            write_hf_qwen3,
            write_hf_llama,
            write_hf_gemma3,
            write_hf_gemma2,
            write_hf_phi3,
            write_hf_phi3_longrope,
            write_hf_qwen3moe,
            write_hf_mixtral,
            write_hf_qwen35,
            write_hf_qwen35moe,
            write_hf_qwen3next,
            write_hf_gptoss,
            write_hf_lfm2,
            write_hf_lfm2moe,
            write_hf_olmo3,
            write_hf_ministral3,
            write_hf_command_r,
            write_hf_gemma,
            write_hf_gemma4,
            write_hf_gemma4_moe,
            write_hf_deepseek2,  # GLM-4.7-Flash's parts
            write_hf_deepseek_v3,
            write_hf_deepseek_v2,
            write_hf_nemotron_h,  # Nemotron Nano 2's parts: Mamba-2, attention, ReLU² MLP
            write_hf_nemotron3_nano,
            write_hf_laguna,
            write_hf_gemma3n_release,  # its towers left out
            write_hf_glm4,
            write_hf_mistral,  # last: its SentencePiece vocabulary is checked below
        ):
            folder, twin = write(tmp_path / write.__name__)
            files = {name: client.create_blob(path) for name, path in model_folder_files(folder, str(folder)).items()}
            statuses = [p.status for p in client.create("converted", files=files, stream=True)]
            assert statuses[0] == "converting model" and statuses[-1] == "success"
            assert client.create("twin", files={"twin.gguf": client.create_blob(twin)}).status == "success"
            show = client.show("converted")
            level = "MXFP4_MOE" if write is write_hf_gptoss else "F16"  # its experts kept in MXFP4
            assert show.details is not None and show.details.quantization_level == level
            options = {"num_predict": 24, "temperature": 0, "seed": 1}
            answers = [
                client.generate(m, "The capital of France is", options=options).response for m in ("converted", "twin")
            ]
            assert answers[0] == answers[1] and answers[0], write.__name__
        sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        with httpx.Client(base_url=url) as http:
            for text in ("Hello, who are you?", "Größe 日本語 🙂 x", " two  spaces"):
                tokens = http.post("/api/tokenize", json={"model": "converted", "content": text}).json()["tokens"]
                assert tokens == sp.encode(text), text


@pytest.mark.model  # the adapted models load through llama.cpp and answer greedily
def test_create_with_an_adapter_folder_answers_as_its_twin(tmp_path: Path) -> None:
    """A PEFT adapter's files uploaded with the official client's ``adapters``, to a real ``cllm
    serve``: converted ("converting adapter") for its base, the model answers word for word as the
    base with the GGUF adapter it was exported from, and unlike the base alone; for each base
    architecture (a Llama's Q and K rows reordered, its embedding and output adapted too)."""
    with cllm_serve(tmp_path / "models", {}, tmp_path / "serve.log") as (_, url):
        client = ollama.Client(host=url)
        for arch in LORA_BASES:
            folder, base, twin = write_hf_lora(tmp_path / arch, base=arch)
            assert client.create("base", files={"base.gguf": client.create_blob(base)}).status == "success"
            adapters = {name: client.create_blob(path) for name, path in adapter_files(folder, str(folder)).items()}
            statuses = [p.status for p in client.create("tuned", from_="base", adapters=adapters, stream=True)]
            assert statuses[0] == "converting adapter" and statuses[-1] == "success"
            twin_adapter = {"adapter.gguf": client.create_blob(twin)}
            assert client.create("twin", from_="base", adapters=twin_adapter).status == "success"
            options = {"num_predict": 24, "temperature": 0, "seed": 1}
            answers = {
                m: client.generate(m, "The capital of France is", options=options).context
                for m in ("tuned", "twin", "base")
            }
            assert answers["tuned"] == answers["twin"], arch
            assert answers["tuned"] != answers["base"], arch


@pytest.mark.model  # the models that see load through llama.cpp and libmtmd and answer greedily
@pytest.mark.parametrize(
    "write",
    [
        write_hf_gemma3_vision,
        write_hf_mistral3_vision,
        write_hf_qwen25vl_vision,
        write_hf_qwen3vl_vision,
        functools.partial(write_hf_qwen3vl_vision, moe=True),
        write_hf_qwen35_vision,
        functools.partial(write_hf_qwen35_vision, moe=True),
        write_hf_gemma4_vision,
        write_hf_lfm2_vision,
        write_hf_glmocr,
        write_hf_glm4v,
        write_hf_nemotron_omni,
        write_hf_llama4,
    ],
    ids=[
        *("gemma3", "mistral3", "qwen2.5vl", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "gemma4", "lfm2"),
        *("glmocr", "glm4v", "nemotron-omni", "llama4"),
    ],
)
def test_a_folder_that_sees_answers_pictures_as_its_twin(
    tmp_path: Path, write: Callable[[Path], tuple[Path, Path, Path]]
) -> None:
    """A ``Gemma3ForConditionalGeneration``, ``Mistral3ForConditionalGeneration``,
    ``Qwen2_5_VLForConditionalGeneration``, ``Qwen3VLForConditionalGeneration`` (their mixtures and
    Qwen 3.5's), ``Gemma4ForConditionalGeneration``, ``Lfm2VlForConditionalGeneration``,
    ``GlmOcrForConditionalGeneration``, ``Glm4vForConditionalGeneration``,
    ``NemotronH_Nano_Omni_Reasoning_V3`` or ``Llama4ForConditionalGeneration`` folder uploaded
    as ``ollama create`` uploads it: its tower converted to a projector layer, the model sees, and
    answers about two pictures word for word as the text and projector GGUFs it was exported from;
    the pictures tell apart (in the odds of the first token)."""
    folder, text, mmproj = write(tmp_path)
    with cllm_serve(tmp_path / "models", {}, tmp_path / "serve.log") as (_, url):
        client = ollama.Client(host=url)
        files = {name: client.create_blob(path) for name, path in model_folder_files(folder, str(folder)).items()}
        assert client.create("converted", files=files).status == "success"
        twin_files = {"text.gguf": client.create_blob(text), "mmproj.gguf": client.create_blob(mmproj)}
        assert client.create("twin", files=twin_files).status == "success"
        assert "vision" in (client.show("converted").capabilities or [])
        options = {"num_predict": 16, "temperature": 0, "seed": 1}
        answers = {
            (m, seed): client.generate(
                m, "Describe it.", images=[png(64, 64, seed)], options=options, logprobs=True, top_logprobs=3
            )
            for m in ("converted", "twin")
            for seed in (1, 2)
        }
        for seed in (1, 2):
            assert answers["converted", seed].context == answers["twin", seed].context
        # The pictures tell apart in the first token's odds (a tiny model may answer both alike).
        odds = {
            seed: [(t.token, t.logprob) for t in answers["converted", seed].logprobs[0].top_logprobs] for seed in (1, 2)
        }
        assert odds[1] != odds[2]
        if "audio" in (client.show("twin").capabilities or []):  # Gemma 4's, Omni's: it hears as its twin too
            assert "audio" in (client.show("converted").capabilities or [])
            heard = [
                client.generate(m, "Hear it.", images=[wav(1.0, seed=4)], options=options).context
                for m in ("converted", "twin")
            ]
            assert heard[0] == heard[1] and heard[0]


@pytest.mark.model  # both embedding models load through llama.cpp
@pytest.mark.parametrize(
    "write",
    [write_hf_bert, functools.partial(write_hf_bert, nomic=True), write_hf_embeddinggemma],
    ids=["bert", "nomic-bert", "embeddinggemma"],
)
def test_a_sentence_transformers_folder_embeds_as_its_twin(
    tmp_path: Path, write: Callable[[Path], tuple[Path, Path]]
) -> None:
    """An embedding model's folder as sentence-transformers saves it (``1_Pooling/config.json``, and
    EmbeddingGemma's ``2_Dense/`` and ``3_Dense/`` weights, one folder down, uploaded as the ollama
    CLI uploads them): converted, an embedding model whose vectors are its twin's."""
    folder, twin = write(tmp_path)
    with cllm_serve(tmp_path / "models", {}, tmp_path / "serve.log") as (_, url):
        client = ollama.Client(host=url)
        files = {name: client.create_blob(path) for name, path in model_folder_files(folder, str(folder)).items()}
        assert "1_Pooling/config.json" in files
        assert client.create("converted", files=files).status == "success"
        assert client.create("twin", files={"twin.gguf": client.create_blob(twin)}).status == "success"
        assert client.show("converted").capabilities == ["embedding"]
        texts = ["The capital of France is Paris, and the capital of Italy is Rome.", "def add(a, b): return a + b"]
        converted, twin_vectors = (client.embed(m, texts).embeddings for m in ("converted", "twin"))
        assert converted == twin_vectors and len(converted) == 2 and converted[0] != converted[1]
