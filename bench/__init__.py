"""iez benchmarks (`make bench`). Each `bench_*.py` module has `main()` and prints its figures
as ratios against a baseline measured in the same run."""
