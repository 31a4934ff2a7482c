from __future__ import annotations

import pytest

from cllm_ollama.api.options import RequestOptions, resolve_options
from cllm_ollama.api.request_fields import parse_keep_alive_field, parse_think
from cllm_ollama.config import FOREVER
from cllm_ollama.engine.request import SamplingParams
from cllm_ollama.errors import CllmError, InvalidRequest


def test_defaults_are_ollamas() -> None:
    opts = resolve_options(None, None)
    assert opts == RequestOptions(sampling=SamplingParams())
    assert opts.sampling == SamplingParams(
        temperature=0.8,
        top_k=40,
        top_p=0.9,
        min_p=0.0,
        typical_p=1.0,
        repeat_last_n=64,
        repeat_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        seed=-1,
        grammar=None,
    )
    assert (opts.num_predict, opts.stop, opts.num_keep) == (-1, (), 4)
    assert (opts.num_ctx, opts.num_batch, opts.num_gpu, opts.num_thread) == (None, None, None, None)
    assert resolve_options({}, {}) == opts


def test_request_over_model_params_over_defaults() -> None:
    model = {"temperature": 0.2, "top_k": 20, "stop": ["<|im_end|>"], "num_ctx": 8192, "num_thread": 2}
    request = {"temperature": 0.5, "num_ctx": None, "num_batch": 256, "seed": 42, "num_predict": 100}
    opts = resolve_options(request, model)
    assert opts.sampling == SamplingParams(temperature=0.5, top_k=20, seed=42)
    assert opts.stop == ("<|im_end|>",)
    # null in the request leaves the Modelfile's value.
    assert (opts.num_ctx, opts.num_batch, opts.num_gpu, opts.num_thread) == (8192, 256, None, 2)
    assert opts.num_predict == 100


def test_numbers_convert_like_go() -> None:
    opts = resolve_options({"top_k": 10.9, "num_predict": -1.5, "num_keep": 0, "top_p": 1, "min_p": 0}, None)
    assert opts.sampling.top_k == 10 and type(opts.sampling.top_k) is int
    assert opts.num_predict == -1
    assert opts.num_keep == 0
    assert opts.sampling.top_p == 1.0 and type(opts.sampling.top_p) is float
    assert type(opts.sampling.min_p) is float


def test_stop_forms() -> None:
    assert resolve_options({"stop": ["a", "b"]}, None).stop == ("a", "b")
    assert resolve_options({"stop": "END"}, None).stop == ("END",)
    assert resolve_options({"stop": []}, {"stop": ["x"]}).stop == ()


def test_unknown_and_removed_options_are_ignored() -> None:
    removed = {
        "mirostat": 2,
        "mirostat_tau": 5.0,
        "mirostat_eta": 0.1,
        "tfs_z": 1.0,
        "penalize_newline": True,
        "numa": False,
        "low_vram": False,
        "f16_kv": True,
        "logits_all": False,
        "vocab_only": False,
        "use_mlock": False,
        "no_such_option": "whatever",
    }
    assert resolve_options(removed, removed) == resolve_options(None, None)
    # Load options Ollama still declares, typed, for the load.
    loads = resolve_options({"use_mmap": False, "main_gpu": 0}, None)
    assert (loads.use_mmap, loads.main_gpu) == (False, 0) and resolve_options(None, None).use_mmap is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_ctx": "8192"}, 'option "num_ctx" must be of type integer'),
        ({"seed": True}, 'option "seed" must be of type integer'),
        ({"num_gpu": [1]}, 'option "num_gpu" must be of type integer'),
        ({"temperature": "hot"}, 'option "temperature" must be of type float32'),
        ({"top_p": False}, 'option "top_p" must be of type float32'),
        ({"stop": 5}, 'option "stop" must be of type array'),
        ({"stop": {"a": 1}}, 'option "stop" must be of type array'),
        ({"stop": ["a", 1]}, 'option "stop" must be of an array of strings'),
        ({"use_mmap": "yes"}, 'option "use_mmap" must be of type boolean'),
        ({"draft_num_predict": "4"}, 'option "draft_num_predict" must be of type integer'),
    ],
)
def test_wrong_types_are_500_with_ollamas_text(options: dict[str, object], message: str) -> None:
    with pytest.raises(CllmError) as info:
        resolve_options(options, None)
    assert type(info.value) is CllmError
    assert (info.value.message, info.value.status_code) == (message, 500)


def test_bad_model_param_is_reported_too() -> None:
    with pytest.raises(CllmError, match='option "top_k" must be of type integer'):
        resolve_options(None, {"top_k": "40"})


def test_options_must_be_an_object() -> None:
    with pytest.raises(InvalidRequest) as info:
        resolve_options("fast", None)
    assert info.value.message == (
        "json: cannot unmarshal string into Go struct field GenerateRequest.options of type map[string]interface {}"
    )
    with pytest.raises(InvalidRequest) as info:
        resolve_options([1], None, request_type="ChatRequest")
    assert info.value.message == (
        "json: cannot unmarshal array into Go struct field ChatRequest.options of type map[string]interface {}"
    )
    assert info.value.status_code == 400


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (False, False),
        ("low", True),
        ("medium", True),
        ("high", True),
        ("max", True),
    ],
)
def test_parse_think(value: object, expected: bool | None) -> None:
    assert parse_think(value) is expected


def test_parse_think_rejects_other_values() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_think("extreme")
    assert info.value.message == (
        'invalid think value: "extreme" (must be "high", "medium", "low", "max", true, or false)'
    )
    with pytest.raises(InvalidRequest) as info:
        parse_think('a"b\n')
    assert info.value.message.startswith('invalid think value: "a\\"b\\n" (must be')
    with pytest.raises(InvalidRequest) as info:
        parse_think(1)
    assert info.value.message == ('think must be a boolean or string ("high", "medium", "low", "max", true, or false)')


def test_parse_keep_alive_field() -> None:
    assert parse_keep_alive_field(None) is None
    assert parse_keep_alive_field("5m") == 300.0
    assert parse_keep_alive_field(0) == 0.0
    assert parse_keep_alive_field(-1) == FOREVER
    assert parse_keep_alive_field("-1m") == FOREVER
    with pytest.raises(InvalidRequest) as info:
        parse_keep_alive_field("3600")
    assert (info.value.message, info.value.status_code) == ('time: missing unit in duration "3600"', 400)
    with pytest.raises(InvalidRequest, match="Unsupported type: 'bool'"):
        parse_keep_alive_field(True)


@pytest.mark.parametrize(
    ("value", "n_ctx", "expected"),
    [(2**31 - 1, 4096, 4096), (4097, 4096, 4096), (4096, 4096, 4096), (64, 4096, 64), (0, 256, 0), (-1, 256, 256)],
)
def test_repeat_last_n_never_exceeds_the_context(value: int, n_ctx: int, expected: int) -> None:
    """llama.cpp allocates the penalty window up front: 2^31-1 was 8 GB per request."""
    opts = resolve_options({"repeat_last_n": value, "repeat_penalty": 1.1}, None)
    sampling = opts.sampling_within(n_ctx)
    assert sampling.repeat_last_n == expected
    assert sampling == SamplingParams(repeat_last_n=expected, repeat_penalty=1.1)


def test_repeat_last_n_below_minus_one_is_refused() -> None:
    with pytest.raises(InvalidRequest, match=r"^repeat_last_n must be >= -1$"):
        resolve_options({"repeat_last_n": -2}, None)
    with pytest.raises(InvalidRequest):
        resolve_options(None, {"repeat_last_n": -100})


def test_grammar_dry_and_xtc_options() -> None:
    """llama-server's names and defaults; a Modelfile's values under the request's."""
    defaults = resolve_options(None, None)
    assert defaults.grammar is None
    assert not defaults.sampling.dry and defaults.sampling.xtc_probability == 0.0
    assert defaults.sampling.dry_sequence_breakers == ("\n", ":", '"', "*")
    opts = resolve_options(
        {"grammar": 'root ::= "a"', "dry_multiplier": 0.8, "dry_sequence_breakers": ["\n"], "xtc_probability": 0.5},
        {"dry_base": 2.0, "dry_multiplier": 0.1, "xtc_threshold": 0.2},
    )
    assert opts.grammar == 'root ::= "a"'
    s = opts.sampling
    assert (s.dry_multiplier, s.dry_base, s.dry_sequence_breakers) == (0.8, 2.0, ("\n",))
    assert (s.xtc_probability, s.xtc_threshold) == (0.5, 0.2)
    assert s.dry and not SamplingParams(temperature=0, dry_multiplier=0.8).greedy
    # DRY's window of -1 is the context, as repeat_last_n's; untouched while DRY is off.
    assert opts.sampling_within(512).dry_penalty_last_n == 512
    assert defaults.sampling_within(512).dry_penalty_last_n == -1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dry_multiplier": -0.1}, "dry_multiplier must be >= 0"),
        ({"dry_base": 0.99}, "dry_base must be >= 1"),
        ({"dry_allowed_length": -1}, "dry_allowed_length must be >= 0"),
        ({"dry_penalty_last_n": -2}, "dry_penalty_last_n must be >= -1"),
        ({"dry_sequence_breakers": []}, "dry_sequence_breakers must be a non-empty array of strings"),
        ({"xtc_probability": 1.01}, "xtc_probability must be between 0 and 1"),
        ({"xtc_threshold": float("nan")}, "xtc_threshold must be between 0 and 1"),
    ],
)
def test_sampler_values_out_of_range_are_400s(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        resolve_options(options, None)
    assert info.value.message == message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"grammar": 5}, 'option "grammar" must be of type string'),
        ({"dry_multiplier": "x"}, 'option "dry_multiplier" must be of type float32'),
        ({"dry_sequence_breakers": [1]}, 'option "dry_sequence_breakers" must be of an array of strings'),
    ],
)
def test_sampler_values_of_the_wrong_type_are_refused_as_ollama_refuses_options(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(CllmError) as info:
        resolve_options(options, None)
    assert info.value.message == message
