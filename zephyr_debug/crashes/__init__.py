"""Crash triage: split text into crash reports (`parse`), mask what varies (`normalize`),
fingerprint them Sentry-style (`fingerprint`) and group them (`cluster`); `inputs` finds
the crashes of a job, a log, stdin or a directory of crash files."""
