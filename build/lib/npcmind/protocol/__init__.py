"""Wire types of the protocols: what crosses HTTP, defined once."""
