"""Every declared finding kind renders in every output mode (text of diagnose / status /
stragglers / watch, JSON, the HTML report), with titles and evidence that hold markup-like text,
brackets and terminal escapes; and no undeclared kind can be made."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.commands.watch import snapshot
from zephyr_debug.findings import KINDS, Finding
from zephyr_debug.render import diagnose, report, status, stragglers
from zephyr_debug.render import watch as watch_view
from zephyr_debug.render.output import console
from zephyr_debug.sources import load

CAPTURE = Path(__file__).parent / "data" / "realcaptures" / "crashloop"
HOSTILE = "[/] [bold]x[/bold] \x1b]0;pwned\x07 \x1b[2J [link=http://x]y[/link]"


@pytest.fixture(scope="module")
def evidence_and_analysis():
    ev = load(str(CAPTURE))
    return ev, analyze(ev)


def _with(a, kind: str):
    f = Finding(
        kind=kind,
        causes=(kind,),
        title=f"title {HOSTILE}",
        evidence=(f"line {HOSTILE}",),
        next=("zdebug report x",),
        stage="stage0-Map",
        shard=1,
    )
    return dataclasses.replace(a, findings=(f,), state=f"failed{HOSTILE}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_renders_in_every_mode(evidence_and_analysis, kind, capsys):
    ev, base = evidence_and_analysis
    a = _with(base, kind)
    diagnose.render(a)
    status.render(a)
    stragglers.render(a)
    console().print(watch_view.screen(dataclasses.replace(snapshot(ev, 2.0, str(CAPTURE)), analysis=a)))
    out = capsys.readouterr().out
    assert kind in out and "\x1b" not in out and "pwned" in out  # shown, escapes made visible
    assert json.loads(json.dumps(a.to_json()))["findings"][0]["kind"] == kind
    html = report.render(ev, a)
    assert kind in html and "\x1b]0;" not in html


def test_an_undeclared_kind_is_refused():
    with pytest.raises(ValueError, match="not declared"):
        Finding(kind="no-such-kind", title="t")
