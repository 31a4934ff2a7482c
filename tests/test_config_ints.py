"""Integer settings: 0 is a value of its own (off, none) unless Ollama reads it as "unset"."""

from __future__ import annotations

import pytest

from cllm_ollama.config import (
    DEFAULT_CONTEXT_GROW,
    DEFAULT_CONTEXT_LENGTH,
    DEFAULT_MAX_QUEUE,
    ConfigError,
    Settings,
)


@pytest.mark.parametrize(("prefix", "zero"), [("OLLAMA_", "0"), ("CLLM_", "0"), ("CLLM_", "00"), ("OLLAMA_", "+0")])
def test_zero_turns_off_what_zero_means_off(prefix: str, zero: str) -> None:
    # Spelled "00" or "+0" too: the parser, not a string comparison at each caller, reads the 0.
    settings = Settings.from_env(
        {f"{prefix}CACHE_RAM": zero, f"{prefix}PREFILL_CHUNK": zero, f"{prefix}NUM_THREAD": zero}
    )
    assert (settings.cache_ram_mib, settings.prefill_chunk, settings.num_thread) == (0, 0, 0)


def test_zero_means_the_default_where_ollama_reads_it_as_unset() -> None:
    settings = Settings.from_env(
        {"OLLAMA_MAX_LOADED_MODELS": "0", "OLLAMA_MAX_QUEUE": "0", "OLLAMA_CONTEXT_LENGTH": "0"}
    )
    # 0 loaded models: the pool's per-GPU default (tests/engine/test_pool_limits.py).
    assert (settings.max_loaded_models, settings.max_queue, settings.context_length) == (
        0,
        DEFAULT_MAX_QUEUE,
        DEFAULT_CONTEXT_LENGTH,
    )


def test_values_are_clamped_to_their_minimum_and_kept_otherwise() -> None:
    settings = Settings.from_env(
        {"OLLAMA_NUM_PARALLEL": "0", "OLLAMA_NUM_BATCH": "-4", "CLLM_CACHE_RAM": "-3", "CLLM_PREFILL_CHUNK": "64"}
    )
    assert (settings.num_parallel, settings.num_batch, settings.cache_ram_mib, settings.prefill_chunk) == (1, 1, 0, 64)
    assert Settings.from_env({}).cache_ram_mib == Settings().cache_ram_mib


def test_a_value_that_is_no_integer_is_refused() -> None:
    with pytest.raises(ConfigError, match="invalid CACHE_RAM"):
        Settings.from_env({"OLLAMA_CACHE_RAM": "lots"})


@pytest.mark.parametrize(
    ("env", "grow"),
    [
        ({}, DEFAULT_CONTEXT_GROW),
        ({"OLLAMA_CONTEXT_LENGTH": "0"}, DEFAULT_CONTEXT_GROW),  # unset, as Ollama reads it
        ({"OLLAMA_CONTEXT_LENGTH": "8192"}, 0),  # the operator's context wins
        ({"OLLAMA_CONTEXT_LENGTH": "8192", "CLLM_CONTEXT_GROW": "32768"}, 32768),
        ({"CLLM_CONTEXT_GROW": "0"}, 0),
    ],
)
def test_a_too_long_prompt_grows_the_context_unless_one_was_set(env: dict[str, str], grow: int) -> None:
    assert Settings.from_env(env).context_grow == grow
    assert Settings().context_grow == 0  # settings built in code choose their contexts


def test_gpu_overhead_and_sched_spread_are_read_as_ollama_reads_them(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({"OLLAMA_GPU_OVERHEAD": "1073741824", "OLLAMA_SCHED_SPREAD": "1"})
    assert settings.gpu_overhead == 1 << 30 and settings.sched_spread
    assert Settings.from_env({}).gpu_overhead == 0 and not Settings.from_env({}).sched_spread
    # A value that is no unsigned integer: Ollama warns and uses 0.
    assert Settings.from_env({"OLLAMA_GPU_OVERHEAD": "1GB"}).gpu_overhead == 0
    assert "GPU_OVERHEAD" in caplog.text
    assert Settings.from_env({"CLLM_DETERMINISTIC": "true"}).deterministic
    assert not Settings.from_env({"CLLM_DETERMINISTIC": "0"}).deterministic


@pytest.mark.parametrize(
    "env",
    [
        {"OLLAMA_NUM_PARALLEL": "abc"},
        {"OLLAMA_CONTEXT_LENGTH": "8k"},
        {"OLLAMA_CONTEXT_LENGTH": "-1"},
        {"OLLAMA_MAX_QUEUE": "-1"},
        {"OLLAMA_MAX_LOADED_MODELS": "-1"},
        {"OLLAMA_KEEP_ALIVE": "1d"},
        {"OLLAMA_KEEP_ALIVE": "1.5"},  # neither a Go duration nor ParseInt's integer
        {"OLLAMA_KEEP_ALIVE": "1e3"},
        {"OLLAMA_KEEP_ALIVE": "nan"},
        {"OLLAMA_KEEP_ALIVE": "9" * 25},  # past ParseInt's int64
        {"OLLAMA_KEEP_ALIVE": "9" * 5000},
    ],
)
def test_an_ollama_variable_ollama_cannot_read_is_ignored_with_a_warning(
    env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Ollama's envconfig warns and takes the default (a negative count is no unsigned integer;
    a keep_alive that is neither a duration nor seconds is 5m): a deployment it ran starts here too."""
    with caplog.at_level("WARNING", logger="cllm.config"):
        settings = Settings.from_env(env)
    assert settings == Settings.from_env({})
    assert any("invalid environment variable" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("value", "debug"),
    [
        ("1", True),
        ("true", True),
        ("T", True),
        ("2", True),
        ("FALSE", False),
        ("f", False),
        ("no", False),
        ("0", False),
    ],
)
def test_ollama_debug_is_read_as_ollamas_log_level(value: str, debug: bool) -> None:
    """ParseBool first, then a non-zero integer (Ollama's 2 is trace); "no" or "FALSE" are info."""
    assert Settings.from_env({"OLLAMA_DEBUG": value}).debug is debug


def test_keep_alive_and_paths_as_ollama_reads_them() -> None:
    assert Settings.from_env({"OLLAMA_KEEP_ALIVE": "90"}).keep_alive == 90
    assert Settings.from_env({"OLLAMA_KEEP_ALIVE": "1h30m"}).keep_alive == 5400
    assert Settings.from_env({"OLLAMA_KEEP_ALIVE": "+7"}).keep_alive == 7
    # ~ of a user that does not exist stays as written (Ollama never expands it), not a traceback.
    assert str(Settings.from_env({"OLLAMA_MODELS": "~nosuchuser0/models"}).models_dir) == "~nosuchuser0/models"
