"""The real-weight model the benchmarks run on, fetched by the test harness (tests/harness/real_model.py),
which stays out of the wheel: this puts tests/ on the path so that bench/'s scripts import it as ``real_model``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness.real_model import SHA256, RealModelUnavailable, install, real_model_path

__all__ = ["SHA256", "RealModelUnavailable", "install", "real_model_path"]
