"""Helpers that write small real GGUF models, for the test suite and the benchmarks."""
