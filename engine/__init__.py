"""copy-as-decode engine: edit programs, their resolver and the copy/gen decoder."""
