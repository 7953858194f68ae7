"""vision-chunker: PDF corpora to retrieval-ready chunks (the library; no Ray here)."""
