"""Ray entrypoints: ``python -m jobs.X`` locally or ``ray job submit -- python -m jobs.X`` on a cluster."""
