"""The Zephyr pipeline dashboard, built with grafana-foundation-sdk from `PANELS` (data).

Every query filters on the `$run` template variable and reads the `$datasource` one; the
integration test runs each panel's expressions against a real Prometheus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

UID = "zephyr-pipeline"
RUN = 'run=~"$run"'
ATTEMPT = "run, stage, shard, attempt, worker"  # the labels of one attempt's series


@dataclass(frozen=True)
class PanelSpec:
    title: str
    queries: list[tuple[str, str]]  # (PromQL, legend)
    kind: str = "timeseries"  # timeseries | stat
    unit: str = "short"
    description: str = ""
    width: int = 12
    steps: list[tuple[float | None, str]] = field(default_factory=lambda: [(None, "green")])
    stacked: bool = False


PANELS = [
    PanelSpec(
        "Progress per stage",
        [(f"zephyr_shards_completed{{{RUN}}} / zephyr_shards_total{{{RUN}}}", "{{run}} {{stage}}")],
        unit="percentunit",
        description="Completed / total shards of each stage started so far.",
    ),
    PanelSpec(
        "Shards in flight and queued",
        [
            (f"zephyr_shards_in_flight{{{RUN}}}", "in flight {{stage}}"),
            (f"zephyr_queue_depth{{{RUN}}}", "queued {{stage}}"),
        ],
    ),
    PanelSpec(
        "Tail: in flight > 0 and queue empty",
        [
            (
                f"(zephyr_shards_in_flight{{{RUN}}} > bool 0) * on(run, stage) (zephyr_queue_depth{{{RUN}}} == bool 0)",
                "{{run}} {{stage}}",
            )
        ],
        kind="stat",
        width=6,
        steps=[(None, "green"), (1, "orange")],
        description="1 while the stage waits on stragglers: run `zdebug stragglers`.",
    ),
    PanelSpec(
        "Time since last progress",
        [(f"time() - progress_time_seconds{{{RUN}}}", "{{run}}")],
        kind="stat",
        unit="s",
        width=6,
        steps=[(None, "green"), (600, "orange"), (2700, "red")],
        description="now - progress_time_seconds; ZephyrPipelineProgressStalled fires at 45 min.",
    ),
    PanelSpec(
        "Top workers by memory", [(f"topk(10, zephyr_worker_memory_bytes{{{RUN}}})", "{{worker}}")], unit="bytes"
    ),
    PanelSpec(
        "Top workers by disk",
        [(f"topk(10, zephyr_worker_disk_bytes{{{RUN}}})", "{{worker}}")],
        unit="bytes",
        description="Bytes in each worker's scratch dir.",
    ),
    PanelSpec(
        "Failures by kind",
        [(f"sum by (run, kind) (zephyr_shard_failures_total{{{RUN}}})", "{{run}} {{kind}}")],
        description="task: the shard's code raised; infra: its worker died or stopped heartbeating.",
    ),
    PanelSpec("Retries (current stage)", [(f"zephyr_stage_retries{{{RUN}}}", "{{run}} {{stage}}")]),
    PanelSpec("Workers alive / dead", [(f"zephyr_workers{{{RUN}}}", "{{state}}")], stacked=True),
    PanelSpec(
        "Shards failing repeatedly",
        [(f"sum by (run, stage, shard) (zephyr_shard_attempt_failures{{{RUN}}})", "{{stage}} shard {{shard}}")],
        steps=[(None, "green"), (3, "red")],
        description="Failed attempts per shard: a crash loop climbs.",
    ),
    PanelSpec(
        "Longest-running shards in flight",
        [
            (
                f"topk(10, zephyr_shard_elapsed_seconds{{{RUN}}} unless on({ATTEMPT}) (zephyr_shard_done{{{RUN}}} == 1)"
                f" unless on({ATTEMPT}) zephyr_shard_attempt_failed{{{RUN}}})",
                "{{stage}} shard {{shard}} on {{worker}}",
            )
        ],
        unit="s",
        width=24,
        description="Straggler candidates: elapsed time of each running shard.",
    ),
]


def dashboard() -> dict:
    """The dashboard as Grafana JSON (a dict)."""
    from grafana_foundation_sdk.builders import common as cb
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import prometheus, stat, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common as cm
    from grafana_foundation_sdk.models import dashboard as dm

    ds = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
    builder = (
        db.Dashboard("Zephyr pipeline")
        .uid(UID)
        .tags(["zephyr", "zdebug"])
        .refresh("10s")
        .time("now-1h", "now")
        .timezone("browser")
        .with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(
            db.QueryVariable("run")
            .label("Run")
            .datasource(ds)
            .query("label_values(progress_time_seconds, run)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.ALPHABETICAL_DESC)
            .multi(True)
            .include_all(True)
            .all_value(".+")
        )
    )
    for number, spec in enumerate(PANELS, 1):
        panel = (stat.Panel() if spec.kind == "stat" else timeseries.Panel()).id(number).title(spec.title)
        panel = panel.datasource(ds).unit(spec.unit).span(spec.width).height(8)
        if spec.description:
            panel = panel.description(spec.description)
        panel = panel.thresholds(
            db.ThresholdsConfig()
            .mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=v, color=c) for v, c in spec.steps])
        )
        if spec.stacked and isinstance(panel, timeseries.Panel):  # only time series stack
            panel = panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL)).fill_opacity(30)
        for ref, (expr, legend) in zip("ABCDEFGH", spec.queries, strict=False):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref))
        builder = builder.with_panel(panel)
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder))


def queries(board: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of a dashboard JSON."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
