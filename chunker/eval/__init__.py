"""Evaluation: retrieval metrics, baselines, answer judging, and the generated sample and synthetic corpora."""
