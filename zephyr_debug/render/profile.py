"""Rich views of a profile summary (`profile.summary.summarize`) and a normalized thread dump."""

from __future__ import annotations

from rich.console import JustifyMethod
from rich.table import Table

from zephyr_debug.render.output import clean, console

VERDICT_STYLE = {"user": "magenta", "library": "yellow", "waiting": "cyan", "mixed": "white", "no-samples": "red"}


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _frames(rows: list[dict]) -> Table:
    table = Table(box=None, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (("share", "right"), ("frame", "left"), ("in-app", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for row in rows:
        table.add_row(_pct(row["share"]), clean(row["where"]), "yes" if row["in_app"] else "")
    return table


def render_summary(s: dict) -> None:
    con = console()
    style = VERDICT_STYLE.get(s["verdict"], "white")
    head = f"[bold]{clean(s['source'])}[/]: {s['samples']} samples ({s['seconds']:.2f} thread-seconds)"
    con.print(head + (" [dim](GIL-holding samples only)[/]" if s["gil_only"] else ""))
    con.print(f"[bold]Verdict:[/] [{style}]{clean(s['verdict_text'])}[/]")
    if s["shares"]:
        con.print(
            "  "
            + ", ".join(f"{k} {_pct(v)}" for k, v in s["shares"].items())
            + (f"; holds the GIL {_pct(s['gil_share'])} of the time" if s["gil_share"] is not None else "")
        )
    for key, label in (("hot_frame", "hottest in-app frame (on CPU)"), ("waiting_at", "waits mostly at")):
        if s.get(key):
            con.print(f"  {label}: [bold]{clean(s[key]['where'])}[/] ({_pct(s[key]['share'])})")
    left_out = [t for t in s["threads"] if not t["in_verdict"]]
    if left_out:
        con.print(
            "  left out (no in-app code, or parked): "
            + "; ".join(
                f"{clean(t['thread'])} {_pct(t['waiting_share'])} waiting, mostly in {clean(t['sits_in'])}"
                for t in left_out
            )
        )
    if s["top_self"]:
        for key, title in (
            ("top_self", "top self (innermost frame)"),
            ("top_total", "top total (anywhere on the stack)"),
        ):
            con.print(f"[bold]{title}[/]")
            con.print(_frames(s[key]))
    for note in s.get("notes", []):
        con.print(f"  [yellow]note:[/] {clean(note)}")
    for step in s.get("next", []):
        con.print(f"  next: [bold cyan]{clean(step)}[/]")


def render_dump(d: dict) -> None:
    con = console()
    con.print(f"[bold]{clean(d['target'])}[/]: {len(d['threads'])} threads")
    for t in d["threads"]:
        style = "cyan" if t["state"] == "waiting" else "magenta"
        gil = ", holds the GIL" if t["owns_gil"] else ""
        con.print(
            f"\n[bold]Thread {t['thread_id']}[/] {clean(t['name'])!r} (pid {t['pid']}) [{style}]{t['state']}[/]{gil}"
        )
        con.print(f"  sits in: [bold]{clean(t['sits_in'])}[/]")
        if t["in_app_frame"] and t["in_app_frame"] != t["sits_in"]:
            con.print(f"  in-app:  [bold]{clean(t['in_app_frame'])}[/]")
        for f in t["frames"]:
            mark = "[magenta]*[/]" if f["in_app"] else " "
            code = f"  [dim]{clean(f['code'])}[/]" if f["code"] else ""
            con.print(f"   {mark} {clean(f['where'])}{code}")
    for step in d.get("next", []):
        con.print(f"\n  next: [bold cyan]{clean(step)}[/]")
