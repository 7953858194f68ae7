"""Indexing and search: embedding, the Milvus store and its bulk path, retrieval and query filters."""
