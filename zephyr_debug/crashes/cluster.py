"""Group crashes by fingerprint: counts, where and when they happened (stage, shard, worker,
attempt, in time order), the message variants with a real example each, the first and the
latest event as printed, and deterministic crashers (one fingerprint on one shard across
attempts or workers). A report printed without its frames (a bare exception line) or without
source lines (a zipapp on 3.11/3.12) joins the group of its one full twin. `cluster()` returns
frozen `CrashGroup`s; `to_json()` is the `--dedupe --json` shape; `readable()` is a report as a
person reads it (library frames collapsed, in-app frames with their source line)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.fingerprint import Fingerprinter, Signature
from zephyr_debug.crashes.parse import Stats
from zephyr_debug.model import Crash, Evidence

# 3: groups name their job and stages, the first and latest events raw, the events in time
# order, variants with an example, a verdict (2: typed groups with variants, exit codes)
SCHEMA_VERSION = 3
MAX_MEMBERS = 1_000  # member sources (and events) kept per group; the count goes on
MAX_VARIANTS = 100  # message templates kept per group; the rest are counted as one
OTHER_VARIANTS = "<other messages>"
MAX_EXAMPLE_LINES = 40
MAX_LINE_CHARS = 300
MAX_RAW_LINES = 200  # lines of an event's raw report kept
MAX_PATH_CHARS = 40  # longer frame paths are shown by their last two parts in `readable`
FRAME_LINE = re.compile(r'^([ \t|+]*)File "([^"]*)", line \d+,? in (.*)$')
CARET_LINE = re.compile(r"^[ \t|+]*[\^~]+[\^~ ]*$")


@dataclass(frozen=True)
class Deterministic:
    """A shard that hit the same crash on more than one attempt or worker: retrying will not help."""

    stage: str | None
    shard: int
    attempts: int  # runs of the shard that crashed so
    workers: tuple[str, ...]

    def to_json(self) -> dict:
        return {"stage": self.stage, "shard": self.shard, "attempts": self.attempts, "workers": list(self.workers)}


class Event(NamedTuple):
    """One crash of a group: when and where it happened."""

    ts: float | None
    stage: str | None
    shard: int | None
    attempt: int | None  # 0-based, as Zephyr counts
    worker: str | None
    source: str

    def to_json(self) -> dict:
        return self._asdict()


class Variant(NamedTuple):
    template: str  # the message masked: the grouping view
    n: int  # crashes with it
    example: str  # one message of it as printed

    def to_json(self) -> dict:
        return {"template": self.template, "count": self.n, "example": self.example}


@dataclass(frozen=True)
class CrashGroup:
    """One bug: the crashes that share a fingerprint."""

    fingerprint: str
    count: int
    kind: str  # task | infra | oom | segv | exit
    exception: str  # root-cause exception type (or signal)
    message: str  # the most frequent message template
    raw_message: str  # the latest event's message as printed (the kernel's kill line for an OOM kill)
    frames: tuple[str, ...]
    wrapper: str | None
    variants: tuple[Variant, ...]  # most frequent first
    exit_code: int | None
    signal: str | None
    shards: tuple[int, ...]
    workers: tuple[str, ...]
    attempts: tuple[int, ...]  # 0-based, as Zephyr counts them
    first_seen: float | None
    last_seen: float | None
    members: tuple[str, ...]  # sources (file, or file:line inside a log), the first MAX_MEMBERS
    example: str  # a report, normalized and cut (the grouping view)
    deterministic: tuple[Deterministic, ...]
    runs: tuple[tuple[str | None, int, int], ...]  # (stage, shard, crashed runs of it), by stage and shard
    stages: tuple[str, ...] = ()  # in order of first crash
    job: str | None = None
    first: str = ""  # the first event's report as printed
    latest: str = ""  # the latest event's report as printed
    events: tuple[Event, ...] = ()  # in time order (undated ones last), the first MAX_MEMBERS
    joined: int = 0  # reports without frames or source lines that joined this group as its twin
    first_at: Event | None = None  # where and when the first and the latest event happened
    latest_at: Event | None = None
    history: str | None = None  # vs earlier runs of the pipeline: new | recurring | regressed (`history`)
    last_seen_in: str | None = None  # the newest earlier run (job id) that had it

    def verdict(self) -> tuple[str, str]:
        """(verdict, reason): deterministic from the runs alone, no guess."""
        if self.deterministic:
            d = self.deterministic[0]
            where = f"shard {d.shard}" + (f" of {d.stage}" if d.stage else "")
            more = f" (and {len(self.deterministic) - 1} more shard(s))" if len(self.deterministic) > 1 else ""
            return (
                "deterministic",
                f"{where}{more} crashed this way on {d.attempts} runs on {len(d.workers)} worker(s): "
                "retrying will not help",
            )
        runs = [n for _, _, n in self.runs]
        if not runs:
            return "unknown", "no shard is known for these crashes"
        if self.kind in ("oom", "infra"):
            return "not shown deterministic", f"{self.kind}: each of {len(runs)} shard(s) crashed once; may be load"
        return "not shown deterministic", f"each of {len(runs)} shard(s) crashed once: no shard repeated it"

    def playbook_cause(self) -> str:
        """The finding cause whose playbook answers this group (`zdebug playbook`)."""
        if self.kind == "oom":
            return "oom"
        if self.deterministic:
            return "crash-loop"
        return "infra-crash" if self.kind in ("segv", "infra", "exit") else "crash-group"

    def to_json(self, whole: bool = False) -> dict:
        """The `--dedupe --json` shape; `whole` (`--group`) adds every event in time order."""
        verdict, reason = self.verdict()
        out = {
            "fingerprint": self.fingerprint,
            "count": self.count,
            "kind": self.kind,
            "job": self.job,
            "stages": list(self.stages),
            "exception": self.exception,
            "message": self.message,
            "raw_message": self.raw_message,
            "wrapper": self.wrapper,
            "frames": list(self.frames),
            "variants": [v.to_json() for v in self.variants],
            "exit_code": self.exit_code,
            "signal": self.signal,
            "shards": list(self.shards),
            "workers": list(self.workers),
            "attempts": list(self.attempts),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "deterministic": [d.to_json() for d in self.deterministic],
            "verdict": verdict,
            "verdict_reason": reason,
            "members": list(self.members),
            "members_omitted": self.count - len(self.members),
            "joined": self.joined,
            "history": self.history,
            "last_seen_in": self.last_seen_in,
            "example": self.example,
            "first": self.first,
            "latest": self.latest,
            "first_at": self.first_at.to_json() if self.first_at else None,
            "latest_at": self.latest_at.to_json() if self.latest_at else None,
        }
        if whole:
            out["events"] = [e.to_json() for e in self.events]
        return out


def _later(a: Crash | None, b: Crash) -> bool:
    """Is `b` later than `a`? A dated crash is later than an undated one; undated ones go in order."""
    if a is None:
        return True
    if a.ts is None or b.ts is None:
        return b.ts is not None or a.ts is None
    return b.ts >= a.ts


@dataclass
class _Builder:
    """A group while crashes stream in."""

    signature: Signature
    first: Crash
    latest: Crash | None = None
    count: int = 0
    variants: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)  # template -> a message as printed
    members: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    stages: dict[str, None] = field(default_factory=dict)
    workers: set[str] = field(default_factory=set)
    attempts: set[int] = field(default_factory=set)
    first_seen: float | None = None
    last_seen: float | None = None
    runs: dict[tuple, set] = field(default_factory=dict)  # (stage, shard) -> {(attempt, worker)}
    joined: int = 0

    def add(self, crash: Crash, sig: Signature) -> None:
        self.count += 1
        template = sig.message if sig.message in self.variants or len(self.variants) < MAX_VARIANTS else OTHER_VARIANTS
        self.variants[template] += 1
        self.examples.setdefault(template, sig.raw)
        if len(self.members) < MAX_MEMBERS:
            self.members.append(crash.location)
            self.events.append(_event(crash))
        if crash.stage:
            self.stages.setdefault(crash.stage)
        if crash.worker:
            self.workers.add(crash.worker)
        if crash.attempt is not None:
            self.attempts.add(crash.attempt)
        if crash.ts is not None:
            if self.first_seen is None or crash.ts < self.first_seen:
                self.first_seen = crash.ts
                if self.first.ts is None or crash.ts < self.first.ts:
                    self.first = crash
            self.last_seen = crash.ts if self.last_seen is None else max(self.last_seen, crash.ts)
        if _later(self.latest, crash):
            self.latest = crash
        if crash.shard is not None:
            self.runs.setdefault((crash.stage, crash.shard), set()).add((crash.attempt, crash.worker))

    def absorb(self, other: _Builder) -> None:
        """Take in a partial twin's crashes (its events stay in their own order)."""
        self.count += other.count
        self.joined += other.count
        for template, n in other.variants.items():
            self.variants[template] += n
            self.examples.setdefault(template, other.examples[template])
        room = MAX_MEMBERS - len(self.members)
        self.members += other.members[:room]
        self.events += other.events[:room]
        for stage in other.stages:
            self.stages.setdefault(stage)
        self.workers |= other.workers
        self.attempts |= other.attempts
        for key, runs in other.runs.items():
            self.runs.setdefault(key, set()).update(runs)
        if other.latest is not None and _later(self.latest, other.latest):
            self.latest = other.latest
        if other.first.ts is not None and (self.first.ts is None or other.first.ts < self.first.ts):
            self.first = other.first
        seen = [t for t in (self.first_seen, other.first_seen) if t is not None]
        self.first_seen = min(seen) if seen else None
        seen = [t for t in (self.last_seen, other.last_seen) if t is not None]
        self.last_seen = max(seen) if seen else None

    def deterministic(self) -> tuple[Deterministic, ...]:
        out = []
        for (stage, shard), runs in sorted(self.runs.items(), key=_by_stage_shard):
            attempts = {a for a, _ in runs if a is not None}
            workers = {w for _, w in runs if w}
            if len(runs) > 1 and (len(attempts) > 1 or len(workers) > 1):
                out.append(Deterministic(stage, shard, len(runs), tuple(sorted(workers))))
        return tuple(out)

    def build(self, fp: Fingerprinter, job: str | None) -> CrashGroup:
        sig, text = self.signature, self.first.text
        latest = self.latest or self.first
        kill = inputs.kill_line(latest.text) if sig.kind == "oom" else None
        raw = kill or (
            fp.signature(latest.text, latest.kind, latest.stage).raw if latest is not self.first else sig.raw
        )
        return CrashGroup(
            fingerprint=sig.fingerprint,
            count=self.count,
            kind=sig.kind,
            exception=sig.exception,
            message=self.variants.most_common(1)[0][0],
            raw_message=raw,
            frames=sig.frames,
            wrapper=sig.wrapper,
            variants=tuple(Variant(t, n, self.examples.get(t, "")) for t, n in self.variants.most_common()),
            exit_code=sig.exit_code,
            signal=sig.signal,
            shards=tuple(sorted({shard for _, shard in self.runs})),
            workers=tuple(sorted(self.workers)),
            attempts=tuple(sorted(self.attempts)),
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            members=tuple(self.members),
            example=(inputs.kill_line(text) if sig.kind == "oom" else None) or example(text, fp),
            deterministic=self.deterministic(),
            runs=tuple(
                (stage, shard, len(runs)) for (stage, shard), runs in sorted(self.runs.items(), key=_by_stage_shard)
            ),
            stages=tuple(self.stages),
            job=job,
            first=_raw(self.first.text),
            latest=_raw(latest.text),
            events=tuple(sorted(self.events, key=_in_time)),
            first_at=_event(self.first),
            latest_at=_event(latest),
            joined=self.joined,
        )


def _event(crash: Crash) -> Event:
    return Event(crash.ts, crash.stage, crash.shard, crash.attempt, crash.worker, crash.location)


def _in_time(event: Event) -> tuple:
    return (event.ts is None, event.ts or 0.0)


def _by_stage_shard(item: tuple) -> tuple:
    (stage, shard), _ = item
    return str(stage), shard


def _raw(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_RAW_LINES:
        return text
    return "\n".join([*lines[:MAX_RAW_LINES], f"… ({len(lines) - MAX_RAW_LINES} more lines)"])


def job_groups(ev: Evidence) -> list[CrashGroup]:
    """A job's crash groups with the default rules (diagnose, report)."""
    return cluster(inputs.job(ev, Stats()), Fingerprinter(), job=ev.job)


def cluster(crashes: Iterable[Crash], fp: Fingerprinter, job: str | None = None) -> list[CrashGroup]:
    """Groups, biggest first (ties: first seen first)."""
    groups: dict[str, _Builder] = {}
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        group = groups.get(sig.fingerprint)
        if group is None:
            group = groups[sig.fingerprint] = _Builder(sig, crash)
        group.add(crash, sig)
    _join_twins(groups)
    return [g.build(fp, job) for g in sorted(groups.values(), key=lambda g: -g.count)]


def _join_twins(groups: dict[str, _Builder]) -> None:
    """A partial report joins the one full group it can be: same kind, type and in-app site for
    frames without source lines; same signal for a faulthandler dump cut before its in-app frames;
    same kind, type and message template for a bare exception line. With none or several
    candidates it stays a group of its own."""
    partial = [g for g in groups.values() if g.signature.partial]
    if not partial:
        return
    by_site: dict[tuple, set[str]] = {}
    by_message: dict[tuple, set[str]] = {}
    for fingerprint, g in groups.items():
        sig = g.signature
        if sig.partial:
            continue
        if sig.site:
            by_site.setdefault(sig.site, set()).add(fingerprint)
        for template in g.variants:
            by_message.setdefault((sig.kind, sig.exception, template), set()).add(fingerprint)
    for g in partial:
        sig = g.signature
        if sig.partial in ("no-source", "cut"):
            twins = by_site.get(sig.site, set())
        else:
            twins = set().union(*(by_message.get((sig.kind, sig.exception, t), set()) for t in g.variants))
        if len(twins) == 1:
            groups[next(iter(twins))].absorb(groups.pop(sig.fingerprint))


def rows(crashes: Iterable[Crash], fp: Fingerprinter) -> Iterator[dict]:
    """One row per crash, in time order (undated ones last, as found), with its signature and its
    message as printed."""
    found = []
    for crash in crashes:
        sig = fp.signature(crash.text, crash.kind, crash.stage)
        found.append(
            {
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
        )
    found.sort(key=lambda r: (r["ts"] is None, r["ts"] or 0.0))
    yield from found


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


def readable(text: str, fp: Fingerprinter, max_lines: int = 30) -> str:
    """A report as printed, for a person: runs of library frames collapsed to one line naming
    their packages, in-app frames kept with their source line, caret lines dropped, the
    Extension modules list elided, long paths shown by their last two parts; cut in the middle
    beyond `max_lines` (the exception line at the end stays)."""
    out: list[str] = []
    lines = text.splitlines()
    run: list[str] = []  # packages of the library frames being collapsed
    indent = ""

    def flush() -> None:
        if run:
            names = ", ".join(dict.fromkeys(run))
            out.append(f"{indent}… {len(run)} library frame{'s' if len(run) > 1 else ''} ({names})")
            run.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        m = FRAME_LINE.match(line)
        if m is None:
            i += 1
            if CARET_LINE.match(line):
                continue
            flush()
            if line.startswith("Extension modules:") and "(total:" in line:
                line = "Extension modules: … " + line[line.rindex("(total:") :]
            out.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …")
            continue
        frame = fp.frame(m.group(2), m.group(3).rstrip())
        source = lines[i + 1] if i + 1 < len(lines) and _is_source(lines[i + 1], m.group(1)) else None
        i += 2 if source is not None else 1
        if frame.in_app:
            flush()
            path = m.group(2)
            if len(path) > MAX_PATH_CHARS and path.count("/") > 2:
                line = line.replace(f'"{path}"', '"…/' + "/".join(path.rsplit("/", 2)[-2:]) + '"', 1)
            out.append(line)
            if source is not None:
                out.append(source)
        else:
            indent = m.group(1)
            run.append(frame.name.split(":", 1)[0].split(".", 1)[0])
    flush()
    if len(out) > max_lines:
        head, tail = max_lines * 2 // 3, max_lines - max_lines * 2 // 3 - 1
        out = [*out[:head], f"… ({len(out) - head - tail} more lines)", *out[len(out) - tail :]]
    return "\n".join(out)


def _is_source(line: str, frame_indent: str) -> bool:
    """Is `line` the source line printed under a frame line indented `frame_indent`?"""
    if FRAME_LINE.match(line) or CARET_LINE.match(line):
        return False
    return line.startswith(frame_indent + "  ") and bool(line.strip())
