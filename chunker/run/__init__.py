"""The document lifecycle and the run folder, Ray-free (see docs/internals.md, \"The document lifecycle\")."""
