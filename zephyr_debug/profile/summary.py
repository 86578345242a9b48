"""The verdict on a profile: user code vs libraries vs idle/waiting, hot frames, GIL share.

Each sample is attributed to its innermost frame: `waiting` when that frame blocks (rules in
`rules.json`), else `user` when it is in-app, else `library`. The shares cover the threads that
ran in-app code in the window (background threads such as heartbeat loops are left out); with
none, the threads that were not "parked" (waiting nearly all the time); with none, all threads.
"""

from __future__ import annotations

import json
import linecache
import re
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from zephyr_debug.profile import speedscope

RULES_PATH = Path(__file__).with_name("rules.json")
CATEGORIES = ["user", "library", "waiting"]
_PROCESS = re.compile(r"^Process (\d+) ")
_STDLIB = re.compile(r"/lib/python\d+(?:\.\d+)?/(?:(?:site|dist)-packages/)?")


@cache
def default_rules() -> dict:
    return json.loads(RULES_PATH.read_text())


def short_path(path: str) -> str:
    """Package-relative path for libraries and the stdlib, cwd-relative for local code."""
    match = _STDLIB.search(path) or re.search(r"/(?:site|dist)-packages/", path)
    if match:
        return path[match.end() :]
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def classify_frames(table: pd.DataFrame, rules: dict) -> pd.DataFrame:
    """Adds `in_app` and `waiting` to a frames table (columns name, file, line)."""
    files, names = table["file"].fillna("").astype(str), table["name"].fillna("").astype(str)
    in_app = pd.Series(np.nan, index=table.index, dtype="object")
    for rule in rules["in_app"]["rules"]:
        hit = pd.Series(True, index=table.index)
        if "file" in rule:
            hit &= _matches(files, rule["file"])
        if "function" in rule:
            hit &= _matches(names, rule["function"])
        in_app = in_app.where(in_app.notna() | ~hit, rule["in_app"])
    waiting = pd.Series(False, index=table.index)
    for rule in rules["waiting"]["functions"]:
        waiting |= _matches(files, rule["file"]) & _matches(names, rule["function"])
    lines = [_source_line(f, n) for f, n in zip(files, table["line"], strict=True)]
    line_rule = re.compile("|".join(rules["waiting"]["lines"])) if rules["waiting"]["lines"] else None
    if line_rule is not None:
        waiting |= pd.Series([bool(line_rule.search(s)) for s in lines], index=table.index)
    return table.assign(
        in_app=in_app.fillna(True).astype(bool),
        waiting=waiting,
        code=lines,
        where=[
            f"{short_path(f)}:{'' if pd.isna(n) else int(n)} {name}"
            for f, n, name in zip(files, table["line"], names, strict=True)
        ],
    )


def _matches(values: pd.Series, pattern: str) -> pd.Series:
    return values.map(re.compile(pattern).search).notna()


def _source_line(path: str, line) -> str:
    """The frame's source line, if this machine has its file. A frame py-spy read without pausing
    the process (--nonblocking) may be torn: a name with a NUL byte is no file to open."""
    if not path or "\0" in path or pd.isna(line):
        return ""
    return linecache.getline(path, int(line)).strip()


def summarize(
    doc: dict, *, rules: dict | None = None, duration_s: float | None = None, gil: bool = False, source: str = ""
) -> dict:
    """Verdict + evidence for a speedscope document. `duration_s` (wall time) enables the GIL share."""
    rules = rules or default_rules()
    frames = classify_frames(speedscope.frames(doc), rules).set_index("frame")
    samples = speedscope.samples(doc)
    out = {
        "source": source,
        "samples": len(samples),
        "seconds": round(float(samples["weight"].sum()), 3),
        "gil_only": gil,
        "duration_s": duration_s,
    }
    if samples.empty:
        return {
            **out,
            "verdict": "no-samples",
            "verdict_text": "no samples: no Python thread was sampled"
            " (with --gil: none held the GIL; with --no-idle: all were idle)",
            "shares": {},
            "threads": [],
            "gil_share": None,
            "hot_frame": None,
            "waiting_at": None,
            "top_self": [],
            "top_total": [],
        }
    samples["leaf"] = samples["stack"].str[-1]
    leaf = frames.loc[samples["leaf"]]
    samples["category"] = np.where(
        leaf["waiting"].to_numpy(), "waiting", np.where(leaf["in_app"].to_numpy(), "user", "library")
    )
    deep = samples[["sample", "stack"]].explode("stack").rename(columns={"stack": "frame"})
    deep["frame"] = deep["frame"].astype(int)
    app = deep[frames.loc[deep["frame"], "in_app"].to_numpy()].groupby("sample")["frame"].last()
    samples["app_frame"] = samples["sample"].map(app)
    threads = _threads(samples, frames, rules["parked_share"], rules["app_thread_share"]["share"])
    focus = (
        [t["thread"] for t in threads if t["in_app"]]
        or [t["thread"] for t in threads if not t["parked"]]
        or [t["thread"] for t in threads]
    )
    for t in threads:
        t["in_verdict"] = t["thread"] in focus
    active = samples[samples["thread"].isin(focus)]
    total = active["weight"].sum()
    shares = {c: round(float(active.loc[active["category"] == c, "weight"].sum() / total), 4) for c in CATEGORIES}
    verdict = _verdict(shares, rules["verdict"]["margin"])
    on_cpu = active[active["category"] != "waiting"]
    waits = active[active["category"] == "waiting"]
    top = rules["top"]
    return {
        **out,
        "verdict": verdict,
        "verdict_text": rules["verdict"]["texts"][verdict],
        "shares": shares,
        "gil_share": _gil_share(samples, duration_s) if gil else None,
        "threads": threads,
        "hot_frame": next(iter(_top(on_cpu, "app_frame", frames, total, 1)), None),
        "waiting_at": next(iter(_top(waits, "app_frame", frames, total, 1)), None),
        "top_self": _top(active, "leaf", frames, total, top),
        "top_total": _top(
            deep[deep["sample"].isin(active["sample"])]
            .drop_duplicates()
            .merge(active[["sample", "weight"]], on="sample"),
            "frame",
            frames,
            total,
            top,
        ),
    }


def _threads(samples: pd.DataFrame, frames: pd.DataFrame, parked_share: float, app_share: float) -> list[dict]:
    rows = []
    for thread, group in samples.groupby("thread", sort=False):
        seconds = group["weight"].sum()
        waiting = group.loc[group["category"] == "waiting", "weight"].sum() / seconds
        in_app = group.loc[group["app_frame"].notna(), "weight"].sum() / seconds
        sits = group.groupby("leaf")["weight"].sum().idxmax()
        rows.append(
            {
                "thread": thread,
                "samples": len(group),
                "seconds": round(float(seconds), 3),
                "waiting_share": round(float(waiting), 4),
                "parked": bool(waiting >= parked_share),
                "in_app": bool(in_app > 0 and in_app >= app_share),
                "sits_in": frames.at[sits, "where"],
            }
        )
    return rows


def _verdict(shares: dict[str, float], margin: float) -> str:
    """On CPU (user + library) vs waiting first; then user vs library. Close calls read `mixed`."""
    cpu = shares["user"] + shares["library"]
    if abs(cpu - shares["waiting"]) < margin:
        return "mixed"
    if shares["waiting"] > cpu:
        return "waiting"
    return "user" if shares["user"] >= shares["library"] else "library"


def _gil_share(samples: pd.DataFrame, duration_s: float | None) -> float | None:
    """GIL-holding seconds / wall seconds, for the busiest process (one GIL per process).

    py-spy samples a little past the asked duration, so the ratio is capped at 1: a GIL is
    held at most all of the time.
    """
    if not duration_s:
        return None
    process = samples["thread"].str.extract(_PROCESS, expand=False).fillna("main")
    return round(min(1.0, float(samples.groupby(process)["weight"].sum().max() / duration_s)), 4)


def _top(table: pd.DataFrame, column: str, frames: pd.DataFrame, total: float, n: int) -> list[dict]:
    """The `n` frames of `column` with most sample weight, each with its share of `total`."""
    weights = table.dropna(subset=[column]).groupby(column)["weight"].sum().nlargest(n)
    rows = []
    for frame, weight in weights.items():
        f = frames.loc[int(frame)]
        rows.append(
            {
                "function": f["name"],
                "file": short_path(str(f["file"] or "")),
                "line": None if pd.isna(f["line"]) else int(f["line"]),
                "where": f["where"],
                "in_app": bool(f["in_app"]),
                "share": round(float(weight / total), 4),
            }
        )
    return rows
