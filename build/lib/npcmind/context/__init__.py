"""Context: what a session builds up (telemetry, space, groups, memory) and the situation the prompt gets."""
