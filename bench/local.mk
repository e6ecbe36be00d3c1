# Benchmarks are built by `make` but never run by `make check`.
include bench/pool.mk
