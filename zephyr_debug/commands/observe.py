"""`zdebug observe`: a local Prometheus (with the alert rules) scraping a demo coordinator."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import typer

from zephyr_debug import jobstore
from zephyr_debug.commands.common import JSON, examples
from zephyr_debug.commands.demo import DEFAULT_FAULTS, WRITE_FINELOG, finelog_target

SCRAPE = "1s"


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug observe                # Prometheus on 127.0.0.1:9090 until Ctrl-C",
            "zdebug observe --port 0 --no-keep -f oom:5",
        )
    )
    def observe(
        fault: list[str] = typer.Option(
            None,
            "--fault",
            "-f",
            metavar="KIND:TARGET[:OPTS]",
            help="A fault, repeatable (as in `zdebug demo`). Default: the demo's mixed set.",
        ),
        workers: int = typer.Option(4, min=1, metavar="N", help="Worker processes."),
        shards: int = typer.Option(16, min=1, metavar="N", help="Shards in the first stage."),
        rows: int = typer.Option(20_000, min=10, metavar="N", help="Rows per shard."),
        port: int = typer.Option(
            9090, min=0, max=65535, metavar="PORT", help="Prometheus port on 127.0.0.1 (0: any free port)."
        ),
        workdir: Path = typer.Option(
            None, metavar="DIR", help="Prometheus config and TSDB (default $ZDEBUG_HOME/prometheus)."
        ),
        keep: bool = typer.Option(True, help="Keep Prometheus up after the job ends, until Ctrl-C."),
        finelog: str = WRITE_FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Run the demo pipeline while a local Prometheus scrapes it every second, with the alert
        rules at demo-sized thresholds: look at live metrics and alerts in the Prometheus UI."""
        from zephyr_debug.dashboards import alerts, grafana
        from zephyr_debug.dashboards.local import LocalPrometheus
        from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, default_stages, parse_fault
        from zephyr_debug.render.output import clean, console, print_json
        from zephyr_debug.sources import prometheus

        coordinator = CoordinatorConfig(
            heartbeat_interval=0.5, heartbeat_timeout=5.0, status_interval=1.0, no_workers_timeout=10.0
        )
        specs = fault or DEFAULT_FAULTS
        config = JobConfig(
            workers=workers,
            stages=default_stages(shards, rows),
            faults=[parse_fault(s) for s in specs],
            coordinator=coordinator,
            linger_s=3.0,
            finelog=finelog,
        )
        home = workdir or jobstore.jobs_root().parent / "prometheus"
        con = console()

        def say(text: str) -> None:
            con.print(text, soft_wrap=True)  # URLs stay on one line, copyable

        with LocalPrometheus(home, scrape_interval=SCRAPE, thresholds=alerts.DEMO, port=port or None) as prom:
            job = Job(config).serve()
            prom.add_target(job.url)
            prom.wait_scraped(job.url)  # the run's first seconds on record too
            job.start()
            info = {
                "prometheus": prom.url,
                "coordinator": job.url,
                "job": job.execution_id,
                "dir": str(job.job_dir),
                "faults": specs,
                "zdebug": prometheus.target(prom.url, job.execution_id),
            }
            if finelog:
                info["finelog"] = finelog_target(finelog, job.execution_id)
            if not as_json:
                say(f"[bold]Prometheus[/] {prom.url}/graph  (alerts: {prom.url}/alerts, data in {clean(home)})")
                say(
                    f"[bold]coordinator[/] {job.url}/metrics  running {job.execution_id} with {clean(', '.join(specs))}"
                )
                say(f"Grafana: provision dashboards/ ({grafana.UID}.json) against {prom.url}")
                say(f"then: zdebug status '{info['zdebug']}'  (or stragglers, workers, report)")
                if finelog:
                    say(f"telemetry: zdebug stragglers {info['finelog']}")
            result = job.wait()
            info["state"] = result.state
            if as_json:
                print_json(info)
                sys.stdout.flush()  # readable while Prometheus keeps running
            else:
                say(f"job {result.execution_id} ended: {result.state}")
            if keep:
                if not as_json:
                    say("Prometheus keeps running with the data; Ctrl-C to stop.")
                threading.Event().wait()
