"""A `py-spy dump --json` normalized: per thread, its state and the frame it sits in."""

from __future__ import annotations

import pandas as pd

from zephyr_debug.profile.summary import classify_frames, default_rules, short_path


def normalize(threads: list[dict], rules: dict | None = None) -> list[dict]:
    """Threads with frames innermost first, each frame classified (in-app, waiting)."""
    rules = rules or default_rules()
    rows = [
        {"thread": i, "name": f.get("name", "?"), "file": f.get("filename") or "", "line": f.get("line")}
        for i, t in enumerate(threads)
        for f in t.get("frames", [])
    ]
    table = pd.DataFrame(rows, columns=["thread", "name", "file", "line"])
    table = classify_frames(table, rules) if rows else table.assign(in_app=[], waiting=[], code=[], where=[])
    out = []
    for i, t in enumerate(threads):
        frames = [
            {
                "function": f["name"],
                "file": short_path(f["file"]),
                "path": f["file"],
                "line": None if pd.isna(f["line"]) else int(f["line"]),
                "in_app": bool(f["in_app"]),
                "waiting": bool(f["waiting"]),
                "code": f["code"],
                "where": f["where"],
            }
            for f in table[table["thread"] == i].to_dict("records")
        ]
        app = next((f for f in frames if f["in_app"]), None)
        waiting = bool(frames and frames[0]["waiting"])
        out.append(
            {
                "pid": t.get("pid"),
                "thread_id": t.get("os_thread_id"),
                "name": t.get("thread_name") or "",
                "active": bool(t.get("active")),
                "owns_gil": bool(t.get("owns_gil")),
                "state": "waiting" if waiting or not t.get("active") else "running",
                "sits_in": frames[0]["where"] if frames else None,
                "in_app_frame": app["where"] if app else None,
                "frames": frames,
            }
        )
    return out
