"""Group crashes by fingerprint: counts, where and when they happened, the message variants,
one example each, and deterministic crashers (one fingerprint on one shard across attempts or
workers). `cluster()` returns frozen `CrashGroup`s; `to_json()` is the `--dedupe --json` shape."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.fingerprint import Fingerprinter, Signature
from zephyr_debug.crashes.parse import Stats
from zephyr_debug.model import Crash, Evidence

SCHEMA_VERSION = 2  # of the `zdebug crashes --json` object (2: typed groups with variants, exit codes)
MAX_MEMBERS = 1_000  # member sources kept per group; the count goes on
MAX_VARIANTS = 100  # message templates kept per group; the rest are counted as one
OTHER_VARIANTS = "<other messages>"
MAX_EXAMPLE_LINES = 40
MAX_LINE_CHARS = 300


@dataclass(frozen=True)
class Deterministic:
    """A shard that hit the same crash on more than one attempt or worker: retrying will not help."""

    stage: str | None
    shard: int
    attempts: int  # runs of the shard that crashed so
    workers: tuple[str, ...]

    def to_json(self) -> dict:
        return {"stage": self.stage, "shard": self.shard, "attempts": self.attempts, "workers": list(self.workers)}


@dataclass(frozen=True)
class CrashGroup:
    """One bug: the crashes that share a fingerprint."""

    fingerprint: str
    count: int
    kind: str  # task | infra | oom | segv | exit
    exception: str  # root-cause exception type (or signal)
    message: str  # the most frequent message template
    raw_message: str  # a representative's message as printed (the kernel's kill line for an OOM kill)
    frames: tuple[str, ...]
    wrapper: str | None
    variants: tuple[tuple[str, int], ...]  # (message template, count), most frequent first
    exit_code: int | None
    signal: str | None
    shards: tuple[int, ...]
    workers: tuple[str, ...]
    attempts: tuple[int, ...]  # 0-based, as Zephyr counts them
    first_seen: float | None
    last_seen: float | None
    members: tuple[str, ...]  # sources (file, or file:line inside a log), the first MAX_MEMBERS
    example: str  # the representative's report, normalized and cut
    deterministic: tuple[Deterministic, ...]
    runs: tuple[tuple[str | None, int, int], ...]  # (stage, shard, crashed runs of it), by stage and shard

    def to_json(self) -> dict:
        return {
            "fingerprint": self.fingerprint,
            "count": self.count,
            "kind": self.kind,
            "exception": self.exception,
            "message": self.message,
            "raw_message": self.raw_message,
            "wrapper": self.wrapper,
            "frames": list(self.frames),
            "variants": [{"template": t, "count": n} for t, n in self.variants],
            "exit_code": self.exit_code,
            "signal": self.signal,
            "shards": list(self.shards),
            "workers": list(self.workers),
            "attempts": list(self.attempts),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "deterministic": [d.to_json() for d in self.deterministic],
            "members": list(self.members),
            "members_omitted": self.count - len(self.members),
            "example": self.example,
        }


@dataclass
class _Builder:
    """A group while crashes stream in."""

    signature: Signature
    first: Crash
    count: int = 0
    variants: Counter = field(default_factory=Counter)
    members: list[str] = field(default_factory=list)
    workers: set[str] = field(default_factory=set)
    attempts: set[int] = field(default_factory=set)
    first_seen: float | None = None
    last_seen: float | None = None
    runs: dict[tuple, set] = field(default_factory=dict)  # (stage, shard) -> {(attempt, worker)}

    def add(self, crash: Crash, sig: Signature) -> None:
        self.count += 1
        template = sig.message if sig.message in self.variants or len(self.variants) < MAX_VARIANTS else OTHER_VARIANTS
        self.variants[template] += 1
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

    def deterministic(self) -> tuple[Deterministic, ...]:
        out = []
        for (stage, shard), runs in sorted(self.runs.items(), key=_by_stage_shard):
            attempts = {a for a, _ in runs if a is not None}
            workers = {w for _, w in runs if w}
            if len(runs) > 1 and (len(attempts) > 1 or len(workers) > 1):
                out.append(Deterministic(stage, shard, len(runs), tuple(sorted(workers))))
        return tuple(out)

    def build(self, fp: Fingerprinter) -> CrashGroup:
        sig, text = self.signature, self.first.text
        kill = inputs.kill_line(text) if sig.kind == "oom" else None
        return CrashGroup(
            fingerprint=sig.fingerprint,
            count=self.count,
            kind=sig.kind,
            exception=sig.exception,
            message=self.variants.most_common(1)[0][0],
            raw_message=kill or sig.raw,
            frames=sig.frames,
            wrapper=sig.wrapper,
            variants=tuple(self.variants.most_common()),
            exit_code=sig.exit_code,
            signal=sig.signal,
            shards=tuple(sorted({shard for _, shard in self.runs})),
            workers=tuple(sorted(self.workers)),
            attempts=tuple(sorted(self.attempts)),
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            members=tuple(self.members),
            example=kill or example(text, fp),
            deterministic=self.deterministic(),
            runs=tuple(
                (stage, shard, len(runs)) for (stage, shard), runs in sorted(self.runs.items(), key=_by_stage_shard)
            ),
        )


def _by_stage_shard(item: tuple) -> tuple:
    (stage, shard), _ = item
    return str(stage), shard


def job_groups(ev: Evidence) -> list[CrashGroup]:
    """A job's crash groups with the default rules (diagnose, report)."""
    return cluster(inputs.job(ev, Stats()), Fingerprinter())


def cluster(crashes: Iterable[Crash], fp: Fingerprinter) -> list[CrashGroup]:
    """Groups, biggest first (ties: first seen first)."""
    groups: dict[str, _Builder] = {}
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        group = groups.get(sig.fingerprint)
        if group is None:
            group = groups[sig.fingerprint] = _Builder(sig, crash)
        group.add(crash, sig)
    return [g.build(fp) for g in sorted(groups.values(), key=lambda g: -g.count)]


def rows(crashes: Iterable[Crash], fp: Fingerprinter) -> Iterator[dict]:
    """One row per crash, with its signature and its message as printed."""
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        yield {
            "fingerprint": sig.fingerprint,
            "kind": sig.kind,
            "exception": sig.exception,
            "message": sig.message,
            "raw_message": sig.raw,
            "wrapper": sig.wrapper,
            "frames": list(sig.frames),
            "exit_code": sig.exit_code,
            "signal": sig.signal,
            "stage": crash.stage,
            "shard": crash.shard,
            "attempt": crash.attempt,
            "worker": crash.worker,
            "ts": crash.ts,
            "source": crash.location,
        }


def example(text: str, fp: Fingerprinter) -> str:
    """The normalized report, cut to a readable size (the Extension modules list elided)."""
    lines = fp.norm.report(text).splitlines()
    out = []
    for line in lines[:MAX_EXAMPLE_LINES]:
        if line.startswith("Extension modules:") and "(total:" in line:
            line = "Extension modules: … " + line[line.rindex("(total:") :]
        out.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …")
    if len(lines) > MAX_EXAMPLE_LINES:
        out.append(f"… ({len(lines) - MAX_EXAMPLE_LINES} more lines)")
    return "\n".join(out)
