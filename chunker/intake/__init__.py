"""Intake: find the input files, fetch and check each one, normalise it to PDF and cut it into segments."""
