"""The NPC protocol, service side: the step machine, prompts, rulesets, and signed outcomes."""
