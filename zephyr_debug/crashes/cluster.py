"""Group crashes by fingerprint: counts, where and when they happened, one example each, and
deterministic crashers (one fingerprint on one shard across attempts or workers)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.fingerprint import Fingerprinter, Signature
from zephyr_debug.crashes.parse import Stats
from zephyr_debug.model import Crash, Evidence

MAX_MEMBERS = 1_000  # member sources kept per group; the count goes on
MAX_EXAMPLE_LINES = 40
MAX_LINE_CHARS = 300


@dataclass
class Group:
    signature: Signature
    example: str
    count: int = 0
    members: list[str] = field(default_factory=list)
    workers: set[str] = field(default_factory=set)
    attempts: set[int] = field(default_factory=set)
    first_seen: float | None = None
    last_seen: float | None = None
    runs: dict[tuple, set] = field(default_factory=dict)  # (stage, shard) -> {(attempt, worker)}

    def add(self, crash: Crash) -> None:
        self.count += 1
        if len(self.members) < MAX_MEMBERS:
            self.members.append(crash.location)
        if crash.worker:
            self.workers.add(crash.worker)
        if crash.attempt is not None:
            self.attempts.add(crash.attempt)
        if crash.ts is not None:
            self.first_seen = crash.ts if self.first_seen is None else min(self.first_seen, crash.ts)
            self.last_seen = crash.ts if self.last_seen is None else max(self.last_seen, crash.ts)
        if crash.shard is not None:
            self.runs.setdefault((crash.stage, crash.shard), set()).add((crash.attempt, crash.worker))

    def deterministic(self) -> list[dict]:
        """Shards that hit this crash on more than one attempt or worker."""
        out = []
        for (stage, shard), runs in sorted(self.runs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            attempts = {a for a, _ in runs if a is not None}
            workers = {w for _, w in runs if w}
            if len(runs) > 1 and (len(attempts) > 1 or len(workers) > 1):
                out.append({"stage": stage, "shard": shard, "attempts": len(runs), "workers": sorted(workers)})
        return out

    def to_dict(self) -> dict:
        sig = self.signature
        return {"fingerprint": sig.fingerprint, "count": self.count, "kind": sig.kind, "exception": sig.exception,
                "message": sig.message, "wrapper": sig.wrapper, "frames": list(sig.frames),
                "shards": sorted({shard for _, shard in self.runs}), "workers": sorted(self.workers),
                "attempts": sorted(self.attempts), "first_seen": self.first_seen, "last_seen": self.last_seen,
                "deterministic": self.deterministic(), "members": self.members,
                "members_omitted": self.count - len(self.members), "example": self.example}


def job_groups(ev: Evidence) -> list[dict]:
    """A job's crash groups with the default rules, as `Group.to_dict()` (diagnose, report)."""
    return [g.to_dict() for g in cluster(inputs.job(ev, Stats()), Fingerprinter())]


def cluster(crashes: Iterable[Crash], fp: Fingerprinter) -> list[Group]:
    """Groups, biggest first (ties: first seen first)."""
    groups: dict[str, Group] = {}
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        group = groups.get(sig.fingerprint)
        if group is None:
            group = groups[sig.fingerprint] = Group(sig, example(crash.text, fp))
        group.add(crash)
    return sorted(groups.values(), key=lambda g: -g.count)


def rows(crashes: Iterable[Crash], fp: Fingerprinter) -> Iterator[dict]:
    """One row per crash, with its signature."""
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        yield {"fingerprint": sig.fingerprint, "kind": sig.kind, "exception": sig.exception,
               "message": sig.message, "wrapper": sig.wrapper, "frames": list(sig.frames), "stage": crash.stage,
               "shard": crash.shard, "attempt": crash.attempt, "worker": crash.worker, "ts": crash.ts,
               "source": crash.location}


def example(text: str, fp: Fingerprinter) -> str:
    """The normalized report, cut to a readable size (the Extension modules list elided)."""
    lines = fp.norm.report(text).splitlines()
    out = []
    for line in lines[:MAX_EXAMPLE_LINES]:
        if line.startswith("Extension modules:") and "(total:" in line:
            line = "Extension modules: … " + line[line.rindex("(total:"):]
        out.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …")
    if len(lines) > MAX_EXAMPLE_LINES:
        out.append(f"… ({len(lines) - MAX_EXAMPLE_LINES} more lines)")
    return "\n".join(out)
