"""What benchmarks and selector training both measure with: the corpora, quality checks, focus placements."""
