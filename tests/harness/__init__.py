"""Harness for the tests, the benchmarks and compat/agents, kept out of the wheel: it means nothing
installed (it reads this checkout's compat/js, pip-downloads a model at run time, serves an app in
a thread). Tests import it as ``harness`` (tests/ is on their path); bench/ and compat/ put tests/
on theirs. Run its commands from the checkout as ``PYTHONPATH=tests python -m harness.real_model``."""
