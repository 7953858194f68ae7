"""Model backends behind one small interface (:mod:`chunker.backends.base`); heavy imports stay inside each."""
