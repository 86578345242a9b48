"""`zdebug counters <job> [--compare JOB…]`: counters and throughput per stage, against earlier runs."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import JOB, JSON, TIMEOUT, examples, load_evidence

COMPARE = typer.Option(
    None,
    "--compare",
    metavar="JOB",
    show_default=False,
    help="Compare with this run (repeatable; default: the earlier runs of the same pipeline in the job store).",
)


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug counters                # the newest job, against its earlier runs",
            "zdebug counters latest --compare 20260101-120000-1a2b3c4d",
            "zdebug counters coordinator.log --json",
        )
    )
    def counters(
        job: str = JOB,
        compare: list[str] = COMPARE,
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Every counter per stage (total, rate, per item, shard spread), ratios to other runs, worker churn."""
        from zephyr_debug.analyze import churn
        from zephyr_debug.analyze import counters as rules
        from zephyr_debug.analyze.nextsteps import Steps, is_live
        from zephyr_debug.render import counters as view
        from zephyr_debug.render.output import print_json
        from zephyr_debug.sources import earlier

        ev = load_evidence(job, as_json)
        runs = [rules.summarize(load_evidence(other, as_json)) for other in compare] if compare else earlier.runs(ev)
        steps = Steps(job, is_live(ev))
        report = rules.report(ev, steps, runs)
        found = report.findings + tuple(churn.findings(ev, steps))
        report = rules.Report(report.run, report.earlier, report.comparisons, found, report.rules)
        workers = churn.per_worker(ev)
        if as_json:
            print_json(
                {
                    **report.to_json(),
                    "churn": {
                        "workers": [w.to_json() for w in workers],
                        "per_hour": [{"hour": h, "reregistered": r, "timeouts": t} for h, r, t in churn.per_hour(ev)],
                    },
                }
            )
        else:
            view.render(report, workers)
