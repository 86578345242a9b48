"""Time to diagnosis (issue 28): the evidence of a job replayed in log time, analyzed at each cut.

For every generated fault scenario (`benchmarks/prodjobs`, seed 0; the `full` and `coord`
variants: `full+status` cut in time is `full`, since its get_status / list-tasks are end-of-job
snapshots a live job does not have yet) and every real capture (`tests/data/realcaptures`, its
coordinator.log only), the log is cut at successive moments of log time (a line belongs to the
cut when its Python-logging / glog prefix time has passed, an untimed line goes with the line
before it) and each cut is loaded and analyzed as `watch` would (`sources.load` +
`analysis.analyze`, nothing else in the dir). Cuts: an even grid over the job, then for each
expected finding a bisection down to one status interval (5 s) between the last grid cut without it
and the first with it, so the first moment it appears is measured at Zephyr's own resolution.

Per fault (each expected (stage, shard, cause) of truth.json, scored like `benchmarks/score.py`):
its onset (first failure of a crash loop, the tail start of a straggler, the freeze of a stuck
shard, the pool's death) and the moment the targets name (`due`), the first cut it is named at,
and Zephyr's own signal: the abort line when the job aborted, else the 45 min stall alert when the
job's progress stopped that long (else Zephyr never says anything). Per job: every warning/error
finding at any cut that truth.json does not hold (target: none on a healthy job).

Targets (held here, not in tests): a crash loop named by its 2nd failure; `stuck` within
`stuck_heartbeats` status periods of being alone in flight with frozen items; `data-skew` /
`slow-worker` / `undetermined` once the stage's tail starts (within the straggler rules' own
allowance: 2 typical runs of the stage); `all-workers-dead` by the no-workers abort; 0 wrong
warnings/errors at any cut of any healthy job. `--quick`: 6 scenarios, 10 grid cuts, coord only
for some. Run: `python -m benchmarks early`.
"""

from __future__ import annotations

import calendar
import json
import multiprocessing
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.prodjobs import BY_NAME, SCENARIOS
from benchmarks.prodjobs.scenarios import COORD, FULL, Scenario
from benchmarks.prodjobs.simulate import STATUS_EVERY_S, Run, simulate
from benchmarks.prodjobs.truth import held_up, resolve, truth
from benchmarks.prodjobs.write import write
from zephyr_debug.analyze.thresholds import Thresholds
from zephyr_debug.findings import INFO
from zephyr_debug.model import NO_WORKERS_TIMEOUT_S, STALL_THRESHOLD_S

CAPTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "realcaptures"
LOG_NAMES = ("job.log", "coordinator.log")  # the log of a job dir; every other file is an end-of-job snapshot
GRID_CUTS, QUICK_GRID_CUTS = 24, 10
HEALTHY_GRID_CUTS = 40  # a healthy job is only cut on the grid: more cuts, more chances to cry wolf
RESOLUTION_S = STATUS_EVERY_S  # bisection stops at one status interval
QUICK = {  # scenario -> variants in --quick (few, small, one of each fault family)
    "healthy-50": (FULL, COORD),
    "recovered-transient": (COORD,),
    "task-crash": (COORD,),
    "size-skew": (COORD,),
    "stuck": (COORD,),
    "all-dead": (COORD,),
}
QUICK_CAPTURES = ("crashloop", "healthy")
CHECK_AFTER_S = 60.0  # the held-out check: a crash loop cut this long after its 3rd loss
CRASHES = ("infra-crash", "crash", "oom", "bug")
STRAGGLERS = ("size-skew", "cost-skew", "slow-worker", "dead-holder")
TH = Thresholds()
STRAGGLER_CAUSES = ("stuck", "data-skew", "slow-worker", "undetermined", "dead-holder")
# Python logging `2026-12-02 21:59:16,743`, glog `I20261202 21:59:16`, somewhere in the line's first bytes
TIME_RE = re.compile(
    rb"(?:(\d{4})-(\d\d)-(\d\d)[ T]|[IWEFD](\d{4})(\d\d)(\d\d) )(\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?"
)
ABORT_RE = re.compile(rb"aborting pipeline|No alive workers for|Coordinator aborted|failed \d+ times \(max")


@dataclass
class Fault:
    """One expected finding of a job and the moments that judge it."""

    key: tuple  # (stage, shard, cause) or ("job", kind): as score.py counts it
    family: str  # crash-loop | stuck | straggler | all-workers-dead | other
    onset: float  # the fault is there (unix s)
    due: float | None  # the target moment (None: report only)
    signal: float | None  # Zephyr's own signal: abort, else the 45 min stall alert; None: never
    signal_kind: str = ""
    named: float | None = None  # first cut it is named at
    flaps: bool = False  # named, then missing at a later cut
    check_at: float | None = None  # the held-out check: a crash loop 60 s after its 3rd loss ...
    check: tuple[str, ...] = ()  # ... and every warning/error key there (want: its crash-loop, no straggler cause)


@dataclass
class Job:
    name: str
    variant: str
    log_name: str
    log: Path
    truth: dict
    faults: list[Fault]
    grid: int
    wrong: list[tuple[float, str]] = field(default_factory=list)  # (cut - start, finding) not in truth
    cuts: int = 0
    start: float = 0.0
    end: float = 0.0
    secs: float = 0.0


# -- the log, cut in time ---------------------------------------------------------------------


class TimedLog:
    """A log's bytes with the offset and (running max of the) time of every timed line."""

    def __init__(self, data: bytes):
        self.data = data
        offsets, times = [], []
        pos = 0
        for line in data.splitlines(keepends=True):
            m = TIME_RE.search(line, 0, 160)
            if m:
                offsets.append(pos)
                times.append(_unix(m))
            pos += len(line)
        self.offsets = np.array(offsets + [len(data)], dtype=np.int64)
        self.times = np.maximum.accumulate(np.array(times, dtype=float)) if times else np.zeros(0)

    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    def cut(self, t: float) -> bytes:
        """The log as it stood at log time `t`: every line up to the first whose time passed `t`."""
        return self.data[: self.offsets[int(np.searchsorted(self.times, t, side="right"))]]

    def time_at(self, pos: int) -> float:
        """Log time of the byte at `pos` (an untimed line has its timed predecessor's time)."""
        i = int(np.searchsorted(self.offsets, pos, side="right")) - 1
        return float(self.times[min(max(i, 0), len(self.times) - 1)])

    def first(self, rx: re.Pattern) -> float | None:
        """Time of the first line matching `rx`."""
        m = rx.search(self.data)
        return None if m is None else self.time_at(m.start())


def _unix(m: re.Match) -> float:
    y, mo, d = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5), m.group(6))
    frac = m.group(10)
    secs = calendar.timegm((int(y), int(mo), int(d), int(m.group(7)), int(m.group(8)), int(m.group(9))))
    return secs + (int(frac) / 10 ** len(frac) if frac else 0.0)


def analyze_cut(log: TimedLog, t: float, log_name: str, tmp: Path) -> list | None:
    """The findings of the one analysis on the log cut at `t` (None: nothing loadable yet)."""
    from zephyr_debug.analyze.analysis import analyze
    from zephyr_debug.errors import ZdebugError
    from zephyr_debug.sources import load

    cut = tmp / f"cut-{t:.3f}"
    cut.mkdir()
    try:
        (cut / log_name).write_bytes(log.cut(t))
        try:
            return list(analyze(load(str(cut))).findings)
        except ZdebugError:
            return None
    finally:
        shutil.rmtree(cut, ignore_errors=True)


def keys(findings, job_expected: set[str]) -> dict[tuple, str]:
    """What `score.score` counts of `findings` (warning/error only), each with its finding's title."""
    out: dict[tuple, str] = {}
    for f in findings:
        if f.severity == INFO:
            continue
        label = f"{f.severity} {f.kind}: {f.title}"
        if dict(f.metrics).get("aborted_pipeline"):
            out[("job", "aborted")] = label
        shards = f.shards or ((f.shard,) if f.shard is not None else ())
        if not shards:
            out[("job", next((k for k in (f.kind, *f.causes) if k in job_expected), f.kind))] = label
            continue
        for shard in shards:
            for cause in f.causes or (f.kind,):
                out[(f.stage, int(shard), cause)] = label
    return out


def expected(truth_: dict) -> tuple[set[tuple], set[str]]:
    job = set(truth_["job"]) | {e["cause"] for e in truth_["expect"] if e["shard"] is None}
    return {(e["stage"], e["shard"], e["cause"]) for e in truth_["expect"] if e["shard"] is not None} | {
        ("job", k) for k in job
    }, job


# -- one job ----------------------------------------------------------------------------------


def replay(job: Job) -> Job:
    """Cuts `job`'s log on a grid, then bisects each fault's first appearance; fills the job in."""
    t0 = time.perf_counter()
    log = TimedLog(job.log.read_bytes())
    job.start, job.end = log.start, log.end
    want, job_expected = expected(job.truth)
    seen: dict[float, dict[tuple, str]] = {}
    with tempfile.TemporaryDirectory(prefix="zdebug-early-") as tmp:

        def at(t: float) -> dict[tuple, str]:
            if t not in seen:
                found = analyze_cut(log, t, job.log_name, Path(tmp))
                seen[t] = keys(found or [], job_expected)
                for k, label in seen[t].items():
                    if k not in want:
                        job.wrong.append((t - log.start, label))
            return seen[t]

        grid = [float(x) for x in np.linspace(log.start, log.end, job.grid + 1)[1:]]
        for t in grid:
            at(t)
        for fault in job.faults:
            if fault.due is not None and log.start < fault.due < log.end:
                at(fault.due)  # the target moment itself is always one of the cuts
            hits = [t for t in sorted(seen) if fault.key in seen[t]]
            if not hits:
                continue
            hi = hits[0]
            lo = max([t for t in seen if t < hi] + [log.start])
            while hi - lo > RESOLUTION_S:
                mid = (lo + hi) / 2
                if fault.key in at(mid):
                    hi = mid
                else:
                    lo = mid
            fault.named = hi
            fault.flaps = any(fault.key not in seen[t] for t in seen if t > hi)
        for fault in job.faults:
            if fault.check_at is not None and fault.check_at < log.end:
                fault.check = tuple(sorted(" ".join(map(str, k)) for k in at(fault.check_at)))
    job.cuts = len(seen)
    job.wrong = sorted(set(job.wrong))
    job.secs = time.perf_counter() - t0
    return job


# -- the faults' moments ----------------------------------------------------------------------


def _stall_alert(progress: list[float], t: float) -> float | None:
    """When Zephyr's 45 min stall alert fires for the stop of progress at or before `t`, or None
    (progress resumed first). `progress`: sorted times of stage starts and shard completions."""
    before = [p for p in progress if p <= t]
    last = before[-1] if before else t
    after = [p for p in progress if p > t]
    return last + STALL_THRESHOLD_S if not after or after[0] > last + STALL_THRESHOLD_S else None


def _signal(abort: float | None, progress: list[float], t: float) -> tuple[float | None, str]:
    if abort is not None:
        return abort, "abort"
    alert = _stall_alert(progress, t)
    return (alert, "stall alert") if alert is not None else (None, "none")


def generated_faults(run: Run, truth_: dict) -> list[Fault]:
    """Each expected finding of a generated job with its onset, due moment and Zephyr's signal."""
    want, _ = expected(truth_)
    sc = run.scenario
    abort = run.abort["ts"] if run.abort else None
    progress = sorted([s.start for s in run.stages] + [a.end for a in run.attempts if a.outcome == "done" and a.end])
    out: list[Fault] = []
    for f in sc.faults:
        if f.stage >= len(run.stages):
            continue
        stage = run.stages[f.stage]
        mine = [k for k in want if k[0] == stage.name or k[0] == "job"]
        attempts = [a for a in run.attempts if a.stage == f.stage]
        if f.kind in CRASHES:
            for shard in f.shards or (f.shard,):
                fails = sorted(a.end for a in attempts if a.shard == shard and a.outcome in ("task", "infra") and a.end)
                if not fails:
                    continue
                due = fails[1] if len(fails) > 1 else abort
                for k in [k for k in mine if k[1] == shard]:
                    fault = Fault(k, "crash-loop", fails[0], due, *_signal(abort, progress, fails[0]))
                    fault.check_at = fails[2] + CHECK_AFTER_S if len(fails) > 2 else None
                    out.append(fault)
        elif f.kind == "stuck":
            frozen = next(a for a in attempts if a.shard == f.shard and a.frozen_at is not None)
            others = max(a.end for a in attempts if a.shard != f.shard and a.outcome == "done" and a.end)
            onset = max(frozen.frozen_at or others, others)  # frozen items show once it is alone in flight
            due = onset + (TH.stuck_heartbeats + 1) * STATUS_EVERY_S
            for k in [k for k in mine if (k[0] == "job" or k[1] == f.shard) and k[-1] in ("stuck", "undetermined")]:
                out.append(Fault(k, "stuck", onset, due, *_signal(abort, progress, onset)))
        elif f.kind in STRAGGLERS:
            held = {s for s, late in held_up(run, f.stage).items() if late}
            faulty = set(held) | ({f.shard} if f.shard is not None else set())
            ends = [a.end for a in attempts if a.outcome == "done" and a.end and a.shard not in faulty]
            onset = max(ends) if ends else stage.start  # the stage would have ended here: its tail starts
            median = statistics.median(b for b in stage.base) if stage.base else sc.median_s
            due = None if f.kind == "dead-holder" else onset + TH.alone_shards * median + STATUS_EVERY_S
            for k in mine:
                if (k[1] in held or k[0] == "job") and k[-1] != "aborted" and k != ("job", "recovered"):
                    out.append(Fault(k, "straggler", onset, due, *_signal(abort, progress, onset)))
        elif f.kind == "all-dead" and run.all_dead_ts is not None:
            died = [w.died[-1] for w in run.workers if w.died and w.died[-1] <= run.all_dead_ts]
            onset = max(died) if died else run.all_dead_ts
            due = run.all_dead_ts + NO_WORKERS_TIMEOUT_S + STATUS_EVERY_S
            out.append(
                Fault(("job", "all-workers-dead"), "all-workers-dead", onset, due, *_signal(abort, progress, onset))
            )
    return list({(f.key, f.family): f for f in out}.values())


def capture_faults(log: TimedLog, truth_: dict) -> list[Fault]:
    """A real capture's expected findings, their moments read from its own log."""
    from zephyr_debug.sources import load

    ev = load(str(CAPTURES / truth_["scenario"] / "coordinator.log"))
    abort = log.first(ABORT_RE)
    status = ev.status.sort_values("ts")
    changed = (status["completed"].diff() != 0) | (status["stage"] != status["stage"].shift())
    progress = sorted([float(t) for t in status["ts"][changed]] + [log.end])  # it ended: no stall alert past it
    out = []
    for e in truth_["expect"]:
        stage, shard, cause = e["stage"], e["shard"], e["cause"]
        key = (stage, shard, cause)
        if cause in ("crash-loop", "oom"):
            rx = re.compile(rb"Shard %d (?:failed on worker|requeued from worker)" % shard)
            fails = sorted(log.time_at(m.start()) for m in rx.finditer(log.data))
            onset = fails[0] if fails else log.start
            due = fails[1] if len(fails) > 1 else abort
            out.append(Fault(key, "crash-loop", onset, due, *_signal(abort, progress, onset)))
        else:  # a straggler / stuck shard: its tail starts when it is alone in flight with nothing queued
            mine = status[(status["stage"] == stage) & (status["in_flight"] == 1) & (status["queue_depth"] == 0)]
            onset = float(mine["ts"].iloc[0]) if len(mine) else log.start
            family = "stuck" if cause == "stuck" else "straggler"
            out.append(Fault(key, family, onset, None, *_signal(abort, progress, onset)))
    if "all-workers-dead" in truth_["job"]:
        dead = status[status["alive"] == 0]
        onset = float(dead["ts"].iloc[-1]) if len(dead) else log.start
        first_dead = status[(status["alive"] == 0) & (status["ts"] > status["ts"][status["alive"] > 0].max())]
        onset = float(first_dead["ts"].iloc[0]) if len(first_dead) else onset
        out.append(
            Fault(
                ("job", "all-workers-dead"),
                "all-workers-dead",
                onset,
                onset + NO_WORKERS_TIMEOUT_S + STATUS_EVERY_S,
                *_signal(abort, progress, onset),
            )
        )
    return out


# -- the jobs ---------------------------------------------------------------------------------


def generated_jobs(outdir: Path, quick: bool) -> list[Job]:
    jobs = []
    scenarios: list[Scenario] = [BY_NAME[n] for n in QUICK] if quick else list(SCENARIOS)
    for sc in scenarios:
        run = resolve(sc, 0, simulate)
        for variant in QUICK.get(sc.name, ()) if quick else (FULL, COORD):
            evidence = outdir / f"{sc.name}.{variant}" / "evidence"
            write(run, variant, evidence)
            log_name = next(n for n in LOG_NAMES if (evidence / n).is_file())
            t = truth(run, variant)
            grid = QUICK_GRID_CUTS if quick else HEALTHY_GRID_CUTS if t["healthy"] else GRID_CUTS
            jobs.append(Job(sc.name, variant, log_name, evidence / log_name, t, generated_faults(run, t), grid))
    return jobs


def capture_jobs(quick: bool) -> list[Job]:
    jobs = []
    for d in sorted(p.parent for p in CAPTURES.glob("*/truth.json")):
        if quick and d.name not in QUICK_CAPTURES:
            continue
        t = json.loads((d / "truth.json").read_text(encoding="utf-8"))
        log = TimedLog((d / "coordinator.log").read_bytes())
        grid = QUICK_GRID_CUTS if quick else HEALTHY_GRID_CUTS if t["healthy"] else GRID_CUTS
        jobs.append(Job(d.name, "capture", "coordinator.log", d / "coordinator.log", t, capture_faults(log, t), grid))
    return jobs


def measure(quick: bool = False) -> list[Job]:
    with tempfile.TemporaryDirectory(prefix="zdebug-early-gen-") as tmp:
        jobs = generated_jobs(Path(tmp), quick) + capture_jobs(quick)
        jobs.sort(key=lambda j: -j.log.stat().st_size)  # the biggest first: the pool ends together
        if quick:
            return [replay(j) for j in jobs]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            return pool.map(replay, jobs, chunksize=1)


# -- the report -------------------------------------------------------------------------------


def _met(f: Fault) -> bool:
    return f.named is not None and (f.due is None or f.named <= f.due)


def _hms(secs: float | None) -> str:
    if secs is None:
        return "never"
    secs = max(secs, 0.0)
    return f"{secs / 3600:.1f} h" if secs >= 5400 else f"{secs / 60:.1f} min" if secs >= 90 else f"{secs:.0f} s"


def rows(jobs: list[Job]) -> list[dict]:
    """One row per fault: job, key, family, seconds from onset to named / due / Zephyr's signal, multiple."""
    out = []
    for j in jobs:
        for f in j.faults:
            named = None if f.named is None else max(f.named - f.onset, 0.0)  # before its onset: at it
            signal = None if f.signal is None else f.signal - f.onset
            out.append(
                {
                    "job": f"{j.name}.{j.variant}",
                    "scenario": f"{j.name} (real capture)" if j.variant == "capture" else j.name,
                    "key": f.key,
                    "family": f.family,
                    "named_s": named,
                    "due_s": None if f.due is None else f.due - f.onset,
                    "signal_s": signal,
                    "signal_kind": f.signal_kind,
                    "multiple": named / signal if named is not None and signal else None,
                    "met": _met(f),
                    "flaps": f.flaps,
                }
            )
    return out


def _print(jobs: list[Job], fault_rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=140)
    table = Table(title="time to diagnosis: first cut of log time that names the fault (from its onset)")
    for col in ("job", "finding", "named after", "target", "Zephyr's signal", "x signal", "met"):
        table.add_column(col)
    for r in fault_rows:
        k = r["key"]
        table.add_row(
            r["job"],
            f"{k[-1]} {'job' if k[0] == 'job' else f'shard {k[1]}'}",
            _hms(r["named_s"]) + (" (flaps)" if r["flaps"] else ""),
            "report" if r["due_s"] is None else f"<= {_hms(r['due_s'])}",
            f"{r['signal_kind']} {_hms(r['signal_s'])}" if r["signal_s"] is not None else "none",
            "n/a" if r["multiple"] is None else f"{r['multiple']:.3f}",
            "yes" if r["met"] else "NO",
        )
    con.print(table)
    for title, by in (("per scenario", "scenario"), ("per fault family", "family")):
        con.print(_summary(f"{title} (median over faults)", by, fault_rows))
    for j in jobs:
        for f in j.faults:
            if f.check:
                ok = _check_ok(f)
                con.print(
                    f"held-out check {j.name}.{j.variant} {f.key[-1]} shard {f.key[1]}, 60 s after its 3rd loss: "
                    f"{'ok' if ok else 'FAILS'}: {', '.join(f.check)}"
                )
    for j in jobs:
        for t, label in j.wrong:
            tag = "[red]WRONG on a healthy job[/]" if j.truth["healthy"] else "not in truth.json"
            con.print(f"{tag} {j.name}.{j.variant} at +{t:.0f} s of log time: {label}")
    cuts = sum(j.cuts for j in jobs)
    con.print(f"{len(jobs)} jobs, {cuts} cuts analyzed, {sum(j.secs for j in jobs):.0f} s of replay")


def _summary(title: str, by: str, fault_rows: list[dict]):
    from rich.table import Table

    summary = Table(title=title)
    for col in (by, "faults", "named", "targets met", "median named after", "median Zephyr", "median x signal"):
        summary.add_column(col)
    for name, mine in _groups(fault_rows, by).items():
        named = [r["named_s"] for r in mine if r["named_s"] is not None]
        sig = [r["signal_s"] for r in mine if r["signal_s"] is not None]
        mult = [r["multiple"] for r in mine if r["multiple"] is not None]
        summary.add_row(
            name,
            str(len(mine)),
            str(len(named)),
            str(sum(r["met"] for r in mine)),
            _hms(statistics.median(named)) if named else "never",
            _hms(statistics.median(sig)) if sig else "never",
            f"{statistics.median(mult):.3f}" if mult else "n/a",
        )
    return summary


def _check_ok(f: Fault) -> bool:
    return " ".join(map(str, f.key)) in f.check and not any(c.split()[-1] in STRAGGLER_CAUSES for c in f.check)


def _groups(fault_rows: list[dict], by: str = "family") -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in fault_rows:
        out.setdefault(r[by], []).append(r)
    return out


def _entry(value, unit: str, target: str, meets: bool, baseline: str = "issue 28 target", base=None) -> dict:
    return {
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_value": base,
        "ratio": value / base if isinstance(value, (int, float)) and base else None,
        "target": target,
        "meets": meets,
    }


def run(quick: bool = False) -> dict:
    jobs = measure(quick)
    fault_rows = rows(jobs)
    _print(jobs, fault_rows)
    out = {}
    for fam, mine in _groups(fault_rows).items():
        named = [r["named_s"] for r in mine if r["named_s"] is not None]
        sig = [r["signal_s"] for r in mine if r["signal_s"] is not None]
        mult = [r["multiple"] for r in mine if r["multiple"] is not None]
        met = sum(r["met"] for r in mine)
        out[f"early_{fam}_named_s"] = _entry(
            round(statistics.median(named), 1) if named else None,
            f"s from onset, median of {len(mine)} faults ({met} on target)",
            f"all {len(mine)} by their due moment",
            met == len(mine),
            "Zephyr's signal (median s)",
            round(statistics.median(sig), 1) if sig else None,
        )
        if mult:
            out[f"early_{fam}_x_signal"] = _entry(
                round(statistics.median(mult), 4), "x Zephyr's signal (median)", "report only", True
            )
    checks = [(f, _check_ok(f)) for j in jobs for f in j.faults if f.check]
    out["early_heldout_crash_loop_checks"] = _entry(
        sum(ok for _, ok in checks),
        f"of {len(checks)} crash loops cut 60 s after their 3rd loss: its crash-loop and no straggler cause",
        f"{len(checks)}",
        all(ok for _, ok in checks),
    )
    healthy = [j for j in jobs if j.truth["healthy"]]
    wrong = sum(len(j.wrong) for j in healthy)
    out["early_wrong_findings_healthy"] = _entry(
        wrong,
        f"warning/error findings over {sum(j.cuts for j in healthy)} cuts of {len(healthy)} healthy jobs",
        "0",
        wrong == 0,
    )
    faulty_wrong = sum(len(j.wrong) for j in jobs if not j.truth["healthy"])
    out["early_wrong_findings_faulty"] = _entry(
        faulty_wrong, "findings at cuts of faulty jobs that truth.json lacks", "report only", True
    )
    return out
