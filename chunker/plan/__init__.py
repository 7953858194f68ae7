"""Chunk planning over element IDs: the deterministic and LLM planners, their repairs and report."""
