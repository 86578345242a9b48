"""Speedscope files: read (also an Iris profile-task reply), fix py-spy's nulls, write, flatten.

`file-format-schema.json` is speedscope's published schema, vendored unchanged (npm
`speedscope` 1.25.0). py-spy writes `"activeProfileIndex": null` and `"col": null`, which
that schema rejects; `fix()` drops null fields so the files validate.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from zephyr_debug.errors import EvidenceError

SCHEMA_PATH = Path(__file__).with_name("file-format-schema.json")
SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"
# Frames table (one row per shared frame) and samples table (one row per sample).
FRAME_COLUMNS = ["frame", "name", "file", "line"]
SAMPLE_COLUMNS = ["sample", "thread", "weight", "stack"]  # stack: frame indices, root first


def load(path: Path) -> dict:
    """A speedscope document from a file: speedscope JSON, or an Iris reply with base64 `profile_data`."""
    try:
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
        raise EvidenceError(f"{path}: not JSON ({exc})") from None
    if isinstance(doc, dict) and ("profile_data" in doc or "profileData" in doc):
        doc = _from_iris(path, doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("profiles"), list):
        raise EvidenceError(f"{path}: not a speedscope file (no `profiles` list)")
    doc = fix(doc)
    _check(path, doc)
    return doc


def _check(path: Path, doc: dict) -> None:
    """Stacks, weights and events that `samples()` can read, or one line saying what is wrong."""
    n = len(doc["shared"]["frames"])

    def frame_ok(index) -> bool:
        return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    for i, p in enumerate(doc["profiles"]):
        where = f"{path}: profiles[{i}]"
        if p.get("type") == "sampled":
            stacks, weights = p["samples"], p["weights"]
            if not isinstance(stacks, list) or not isinstance(weights, list) or len(stacks) != len(weights):
                raise EvidenceError(f"{where}: `samples` and `weights` must be lists of the same length")
            bad = next(
                (
                    j
                    for j, (s, w) in enumerate(zip(stacks, weights, strict=True))
                    if not isinstance(s, list) or not all(map(frame_ok, s)) or not number(w)
                ),
                None,
            )
            if bad is not None:
                raise EvidenceError(
                    f"{where}: sample {bad} is not a list of frame indices below {n} with a number weight"
                )
        elif p.get("type") == "evented":
            events = p.get("events")
            bad = (
                next(
                    (
                        j
                        for j, e in enumerate(events)
                        if not isinstance(e, dict)
                        or e.get("type") not in ("O", "C")
                        or not frame_ok(e.get("frame"))
                        or not number(e.get("at"))
                    ),
                    None,
                )
                if isinstance(events, list)
                else 0
            )
            if bad is not None:
                raise EvidenceError(f"{where}: event {bad} is not {{type O|C, frame below {n}, at}}")
        else:
            raise EvidenceError(f"{where}: unknown profile type {str(p.get('type'))[:40]!r} (sampled or evented)")


def _from_iris(path: Path, reply: dict) -> dict:
    data = reply.get("profile_data", reply.get("profileData")) or ""
    if not data:
        raise EvidenceError(f"{path}: Iris profile reply has no profile_data (error: {reply.get('error') or 'none'})")
    try:
        return json.loads(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError, RecursionError):
        raise EvidenceError(f"{path}: profile_data is not base64 speedscope JSON") from None


def _drop_nulls(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if v is not None}


def fix(doc: dict) -> dict:
    """The document made valid for speedscope's schema (nulls dropped, required keys filled)."""
    doc = _drop_nulls(doc)
    doc["$schema"] = SCHEMA_URL
    shared: dict = doc["shared"] if isinstance(doc.get("shared"), dict) else {}
    frames = [_drop_nulls(f) if isinstance(f, dict) else {"name": "?"} for f in shared.get("frames") or []]
    for frame in frames:
        frame["name"] = str(frame.get("name", "?"))
    doc["shared"] = {**shared, "frames": frames}
    profiles = []
    for i, profile in enumerate(doc["profiles"]):
        profile = _drop_nulls(profile) if isinstance(profile, dict) else {"type": type(profile).__name__}
        profile.setdefault("name", f"profile {i}")
        profile.setdefault("unit", "none")
        profile.setdefault("startValue", 0)
        if profile.get("type") == "sampled":
            profile.setdefault("samples", [])
            stacks = profile["samples"] if isinstance(profile["samples"], list) else []
            profile.setdefault("weights", [1] * len(stacks))
            if "endValue" not in profile:
                weights = profile["weights"] if isinstance(profile["weights"], list) else []
                profile["endValue"] = sum(w for w in weights if isinstance(w, (int, float)))
        profiles.append(profile)
    doc["profiles"] = profiles
    return doc


def write(doc: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fix(doc), separators=(",", ":")))
    return path


def frames(doc: dict) -> pd.DataFrame:
    rows = [
        {"frame": i, "name": f.get("name", "?"), "file": f.get("file", ""), "line": f.get("line")}
        for i, f in enumerate(doc["shared"]["frames"])
    ]
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def samples(doc: dict) -> pd.DataFrame:
    """Every sample of every profile: thread (= profile name), weight and stack (root first)."""
    rows: list[dict] = []
    for profile in doc["profiles"]:
        if profile.get("type") == "sampled":
            pairs: Iterable[tuple[Any, Any]] = zip(profile["samples"], profile["weights"], strict=True)
        else:
            pairs = _evented_stacks(profile["events"])
        rows.extend({"thread": profile["name"], "weight": float(w), "stack": tuple(s)} for s, w in pairs if s)
    table = pd.DataFrame(rows, columns=SAMPLE_COLUMNS[1:])
    table.insert(0, "sample", range(len(table)))
    return table


def _evented_stacks(events: list[dict]) -> list[tuple[tuple, float]]:
    """Evented profile as (stack, duration) pairs: the open stack between consecutive events."""
    stack: list[int] = []
    out, last = [], None
    for event in sorted(events, key=lambda e: e["at"]):
        if stack and last is not None and event["at"] > last:
            out.append((tuple(stack), event["at"] - last))
        last = event["at"]
        if event["type"] == "O":
            stack.append(event["frame"])
        elif event["frame"] in stack:
            del stack[len(stack) - 1 - stack[::-1].index(event["frame"]) :]
    return out
