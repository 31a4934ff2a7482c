"""A cache venv in which llama-cpp-python's own server runs on the project's llama_cpp binding.

The server's extra dependencies (fastapi, sse-starlette, ...) go into this venv, never into
the project's; a ``.pth`` line then appends the project's site-packages, so the binding is
the one cllm runs and nothing is compiled twice.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path


def server_requirements(sdist_root: Path) -> list[str]:
    """The ``server`` extra of the sdist's pyproject.toml."""
    project = tomllib.loads((sdist_root / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["server"])


def server_python(cache: Path, sdist_root: Path) -> Path:
    """The venv's interpreter, made (and its requirements installed) on first use."""
    venv = cache / "venv-llama-cpp-server"
    python = venv / "bin" / "python"
    ready = venv / ".installed"
    if not ready.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", *server_requirements(sdist_root)], check=True)
        ready.touch()
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    project_site = sysconfig.get_paths()["purelib"]
    # addsitedir (unlike a plain path line) also runs the project's own .pth files.
    Path(purelib, "cllm-project.pth").write_text(f"import site; site.addsitedir({project_site!r})\n")
    return python


def llama_cpp_server_version(python: Path) -> str:
    """Versions of the pieces that answer HTTP in that venv."""
    out = subprocess.run(
        [str(python), "-c", "import llama_cpp, fastapi, uvicorn; "
         "print(llama_cpp.__version__, fastapi.__version__, uvicorn.__version__)"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return f"llama-cpp-python {out[0]} (fastapi {out[1]}, uvicorn {out[2]})"
