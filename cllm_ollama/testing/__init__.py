"""Small real GGUFs (and the images and audio they take) written for the test suite and the
benchmarks: ``python -m cllm_ollama.testing.ggufs KIND DIR``. The tests' own harness (the
real-weight model's fetcher, the Codex runner, a server in a thread) lives in tests/harness."""
