"""Subcommands: thin modules that parse options, load evidence, analyze and render."""
