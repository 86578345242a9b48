"""Profiling: py-spy driving, speedscope files, the verdict, thread dumps."""
