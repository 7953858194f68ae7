"""Converters: a document segment's pages in, ordered :class:`~chunker.types.ConvertedBatch` rows out."""
