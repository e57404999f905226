"""The decide pipeline: from a validated request to one decision per entity."""
