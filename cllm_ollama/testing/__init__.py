"""Models for the test suite and the benchmarks: small real GGUFs written here, and a real-weight one fetched."""
