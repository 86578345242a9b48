"""Output: rich tables on a TTY, JSON with `--json`. Reporters never parse arguments."""
