"""The benchmark machinery behind ``python -m jobs.benchmark``."""
