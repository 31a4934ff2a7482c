"""Defaults per device (``engine.tuning``): the settings left unset take GPU values when the model
is wholly on fake GPUs, as many slots as keep it there, and the CPU values otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cllm_ollama.config import DEFAULT_GAP_FILL, DEFAULT_NUM_PARALLEL, Settings
from cllm_ollama.engine.frontdoor import LoadSpec
from cllm_ollama.engine.loaded import LoadedModel
from cllm_ollama.engine.offload import DEVICE_RESERVE, Device, kv_bytes_per_token, model_sizes
from cllm_ollama.engine.tuning import GPU_BATCH, GPU_GAP_FILL, SHALLOW_SLOT, as_set, choose, pinned, raised
from cllm_ollama.testing.ggufs import Shape, write_qwen3

GIB = 1 << 30
CTX = 4096  # long enough that the KV cache, not the tiny weights, decides how many slots fit


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Eight layers, so that a GPU can hold part of them (the fitting wants room for two at least).
    return write_qwen3(tmp_path_factory.mktemp("tuning") / "m.gguf", shape=Shape(n_layer=8))


def unset_spec(path: Path, **env: str) -> LoadSpec:
    """The server's defaults as ``cllm serve`` reads them from ``env`` (nothing set: all tunable)."""
    return replace(LoadSpec.from_settings(Settings.from_env(env)), path=path, n_ctx_slot=CTX)


def whole(path: Path, slots: int, share: float = 1.0, ctx: int = CTX) -> int:
    """Bytes a GPU needs to hold ``share`` of the model's layers with ``slots`` slots of ``ctx``
    (engine/offload.py's sums: the device's reserve and the graph, then each layer and its KV)."""
    sizes = model_sizes(path, slots * ctx, kv_bytes_per_token(path), 512)
    parts = sum(sizes.layers) + sizes.kv_per_layer * sizes.n_layers + sizes.output
    return DEVICE_RESERVE + sizes.graph + int(parts * share)


def test_every_unset_setting_is_tunable_and_a_set_one_is_not() -> None:
    unset = LoadSpec.from_settings(Settings.from_env({}))
    assert dict(unset.tunable) == {
        "n_slots": DEFAULT_NUM_PARALLEL,
        "n_batch": 512,
        "gap_fill": DEFAULT_GAP_FILL,
        "flash_attention": None,
    }
    chosen = LoadSpec.from_settings(
        Settings.from_env(
            {
                "OLLAMA_NUM_PARALLEL": "4",
                "CLLM_PREFILL_CHUNK": "64",
                "CLLM_GAP_FILL": "0",
                "OLLAMA_FLASH_ATTENTION": "1",
            }
        )
    )
    assert dict(chosen.tunable) == {"n_batch": 512} and chosen.gap_fill == 0
    assert LoadSpec.from_settings(Settings()).tunable == ()  # settings made directly mean what they say


def test_without_a_gpu_the_cpu_defaults_stay(model: Path) -> None:
    spec, placement = choose(unset_spec(model), [])
    assert placement is None
    assert (spec.n_slots, spec.n_batch, spec.max_prefill) == (DEFAULT_NUM_PARALLEL, 512, 0)
    assert spec.gap_fill == DEFAULT_GAP_FILL
    assert spec.flash_attention is False  # its CPU kernel decodes slower than the matrix products


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OLLAMA_FLASH_ATTENTION": "1"}, True),  # the operator's word holds
        ({"OLLAMA_FLASH_ATTENTION": "0"}, False),
        ({"OLLAMA_KV_CACHE_TYPE": "q8_0"}, None),  # a quantized V cache needs it: llama.cpp's auto
        ({"CLLM_DETERMINISTIC": "1"}, None),  # the mode's invariance was measured with it
    ],
)
def test_flash_attention_on_the_cpu_is_off_only_where_nothing_needs_it(
    model: Path, env: dict[str, str], expected: bool | None
) -> None:
    spec, _ = choose(unset_spec(model, **env), [])
    assert spec.flash_attention is expected


def test_a_slot_too_small_to_go_deep_keeps_flash_attention_on_the_cpu(model: Path) -> None:
    """Without it the products cover at least 256 cells a sequence, where its kernel skips the empty ones."""
    shallow, _ = choose(replace(unset_spec(model), n_ctx_slot=SHALLOW_SLOT), [])
    assert shallow.flash_attention is None
    deeper, _ = choose(replace(unset_spec(model), n_ctx_slot=2 * SHALLOW_SLOT), [])
    assert deeper.flash_attention is False
    # A reload for a grown context chooses again from the loaded spec; and back.
    grown, _ = choose(replace(shallow, n_ctx_slot=CTX), [])
    assert grown.flash_attention is False
    again, _ = choose(replace(grown, n_ctx_slot=SHALLOW_SLOT), [])
    assert again.flash_attention is None
    beside_a_gpu, _ = choose(
        pinned(replace(unset_spec(model), n_ctx_slot=SHALLOW_SLOT), n_gpu_layers=0), [Device("GPU0", 80 * GIB)]
    )
    assert beside_a_gpu.flash_attention is None


def test_slots_are_cut_to_the_trained_context_before_anything_is_chosen(tmp_path: Path) -> None:
    """A model trained on 256 tokens gets 256-token slots however long the server's default: its KV
    is fitted, and flash attention chosen, for the context the load will have."""
    short = write_qwen3(tmp_path / "short.gguf", shape=Shape(n_layer=8, context_length=SHALLOW_SLOT // 2))
    spec, _ = choose(unset_spec(short), [])
    assert (spec.n_ctx_slot, spec.flash_attention) == (SHALLOW_SLOT // 2, None)
    beside_a_gpu, _ = choose(pinned(unset_spec(short), n_gpu_layers=0), [Device("GPU0", 80 * GIB)])
    assert beside_a_gpu.n_ctx_slot == SHALLOW_SLOT // 2
    # The KV cache is fitted at the cut length: 32 such slots fit where 8 of CTX would not.
    room = whole(short, 32, ctx=SHALLOW_SLOT // 2)
    assert room < whole(short, DEFAULT_NUM_PARALLEL)
    fitted, placement = choose(unset_spec(short), [Device("GPU0", room)])
    assert placement is not None and placement.cpu_bytes == 0 and fitted.n_slots == 32


def test_embeddings_keep_flash_attention_as_set(model: Path) -> None:
    """An embedding input is one micro-batch: its scores without flash attention grow with its square."""
    spec, _ = choose(replace(unset_spec(model), embedding_only=True), [])
    assert spec.flash_attention is None
    generating, _ = choose(unset_spec(model), [])
    assert generating.flash_attention is False and as_set(generating, "flash_attention") is None
    assert as_set(generating, "n_slots") == DEFAULT_NUM_PARALLEL


def test_a_model_wholly_on_a_gpu_gets_the_gpu_defaults(model: Path) -> None:
    spec, placement = choose(unset_spec(model), [Device("GPU0", 80 * GIB)])
    assert placement is not None and placement.processor() == "100% GPU"
    assert (spec.n_slots, spec.n_batch, spec.max_prefill) == (32, GPU_BATCH, 0)  # prompt rows: the step budget's
    assert spec.gap_fill == GPU_GAP_FILL  # a pass over the weights costs many rows there
    assert spec.flash_attention is None  # llama.cpp's auto: on wherever the device has the kernel


def test_slots_are_as_many_as_keep_the_model_on_the_gpu(model: Path) -> None:
    assert whole(model, 16) < whole(model, 32)
    spec, placement = choose(unset_spec(model), [Device("GPU0", whole(model, 16))])
    assert placement is not None and placement.cpu_bytes == 0
    assert (spec.n_slots, spec.n_batch) == (16, GPU_BATCH)


def test_a_model_partly_on_the_cpu_keeps_the_cpu_defaults(model: Path) -> None:
    spec, placement = choose(unset_spec(model), [Device("GPU0", whole(model, DEFAULT_NUM_PARALLEL, 0.6))])
    assert placement is not None and placement.cpu_bytes > 0 and placement.n_gpu_layers > 0
    assert (spec.n_slots, spec.n_batch, spec.max_prefill) == (DEFAULT_NUM_PARALLEL, 512, 0)
    assert spec.gap_fill == DEFAULT_GAP_FILL
    assert spec.flash_attention is None  # its GPU layers want it: llama.cpp's auto


def test_num_gpu_0_beside_a_gpu_is_a_model_on_the_cpu(model: Path) -> None:
    spec, placement = choose(pinned(unset_spec(model), n_gpu_layers=0), [Device("GPU0", 80 * GIB)])
    assert placement is not None and placement.n_gpu_layers == 0
    assert spec.flash_attention is False


def test_num_gpu_short_of_the_whole_model_keeps_the_cpu_defaults(model: Path) -> None:
    spec, placement = choose(pinned(unset_spec(model), n_gpu_layers=1), [Device("GPU0", 80 * GIB)])
    assert placement is not None and placement.n_gpu_layers == 1
    assert spec.n_slots == DEFAULT_NUM_PARALLEL and spec.n_batch == 512


def test_what_the_operator_set_holds_on_a_gpu(model: Path) -> None:
    env = {"CLLM_NUM_PARALLEL": "3", "OLLAMA_NUM_BATCH": "256", "CLLM_PREFILL_CHUNK": "128"}
    spec, _ = choose(unset_spec(model, **env), [Device("GPU0", 80 * GIB)])
    assert (spec.n_slots, spec.n_batch, spec.max_prefill) == (3, 256, 128)
    some, _ = choose(unset_spec(model, CLLM_NUM_PARALLEL="3"), [Device("GPU0", 80 * GIB)])
    assert (some.n_slots, some.n_batch, some.max_prefill) == (3, GPU_BATCH, 0)


def test_a_request_pins_slots_and_raises_the_batch_floor(model: Path) -> None:
    gpu = [Device("GPU0", 80 * GIB)]
    spec, _ = choose(pinned(unset_spec(model), n_slots=2), gpu)
    assert spec.n_slots == 2 and spec.n_batch == GPU_BATCH
    bigger, _ = choose(raised(unset_spec(model), "n_batch", 4096), gpu)
    assert bigger.n_batch == 4096
    smaller, _ = choose(raised(unset_spec(model), "n_batch", GPU_BATCH // 2), gpu)
    assert smaller.n_batch == GPU_BATCH  # a request's num_batch is a floor, not a cap
    on_cpu, _ = choose(raised(unset_spec(model), "n_batch", 1024), [])
    assert on_cpu.n_batch == 1024


def test_a_reload_chooses_again_from_the_cpu_values(model: Path) -> None:
    # The pool reloads from the loaded spec (GPU values in it): without a GPU the CPU ones come back.
    on_gpu, _ = choose(unset_spec(model), [Device("GPU0", 80 * GIB)])
    again, _ = choose(on_gpu, [])
    assert (again.n_slots, again.n_batch, again.max_prefill) == (DEFAULT_NUM_PARALLEL, 512, 0)
    assert again.flash_attention is False
    back, _ = choose(again, [Device("GPU0", 80 * GIB)])
    assert back.flash_attention is None


@pytest.mark.model
def test_a_load_shown_a_large_gpu_runs_the_gpu_slots(tmp_path: Path) -> None:
    # A CPU build runs it on the CPU whatever it is told; the slots the load chose are real.
    path = write_qwen3(tmp_path / "m.gguf")
    spec = LoadSpec(path=path, n_slots=2, n_ctx_slot=64, tunable=(("n_slots", 2), ("n_batch", 512)))
    loaded = LoadedModel(spec, 4, devices=lambda: [("GPU0", 64 * GIB, 80 * GIB)])
    try:
        assert loaded.n_slots == 32 and loaded.spec.n_batch == GPU_BATCH and loaded.runner is not None
    finally:
        loaded.close()


def test_a_header_past_reading_leaves_the_slots_to_the_load(tmp_path: Path) -> None:
    """The load, not the cap, says what llama.cpp makes of a file this reader cannot parse."""
    odd = tmp_path / "odd.gguf"
    odd.write_bytes(b"GGUF" + (9).to_bytes(4, "little"))  # a version no reader here knows
    spec, _ = choose(replace(unset_spec(odd), n_ctx_slot=CTX), [])
    assert spec.n_ctx_slot == CTX
