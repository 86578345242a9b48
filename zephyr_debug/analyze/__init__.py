"""Analyzers: pure functions over `Evidence` returning plain dicts (the JSON contracts)."""
