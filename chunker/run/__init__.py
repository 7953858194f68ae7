"""The document lifecycle and the run folder, Ray-free (see the README section \"How a document flows\")."""
