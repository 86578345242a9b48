"""Next commands that run: the evidence as the user named it, and only what its state allows
(a live job: `dump`, `profile`; anything else: `report`, `crashes`, `playbook`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.model import Evidence

# Targets with no log files of their own to scan (`zdebug logs` reads files).
REMOTE = ("http://", "https://", "iris://", "finelog://", "prometheus+")


@lru_cache(maxsize=1)
def _playbooks() -> dict[str, str]:
    """Finding kind -> the playbook whose front matter lists it (shipped in the package)."""
    from zephyr_debug import playbooks

    return playbooks.for_cause()


def is_live(ev: Evidence) -> bool:
    """The job runs and its workers can be reached from here (a coordinator URL, an Iris job, or
    a job of the local job store whose launcher is alive)."""
    if ev.state != "running":
        return False
    if ev.source.startswith(("http://", "https://", "iris://")):
        return True
    path = Path(ev.source)
    return path.is_dir() and jobstore.is_job_dir(path)


@dataclass(frozen=True)
class Steps:
    """Builds next commands for one job."""

    target: str  # the evidence as the user gave it (a path, URL or job id)
    live: bool

    @property
    def job(self) -> str:
        return shlex.quote(self.target)

    def crashes(self, shard: int | None = None) -> str:
        return f"zdebug crashes {self.job} --dedupe" + (f" --shard {shard}" if shard is not None else "")

    def logs(self, shard: int | None) -> list[str]:
        """The shard's own lines from every log of the job (`zdebug logs`), when it has log files."""
        if shard is None or shard < 0 or self.target.startswith(REMOTE):
            return []
        return [f"zdebug logs {self.job} --shard {shard}"]

    def playbook(self, kind: str) -> list[str]:
        name = _playbooks().get(kind)
        return [f"zdebug playbook {name}"] if name else []

    def for_straggler(self, kind: str, worker: str | None, shard: int, live: bool) -> list[str]:
        out = []
        if self.live and live and worker:
            w = shlex.quote(worker)
            if kind in ("stuck", "undetermined"):
                out.append(f"zdebug dump {w} --job {self.job}")
            out.append(f"zdebug profile {w} --job {self.job}")
        elif not self.live:
            out.append(f"zdebug report {self.job}")
        return out + self.logs(shard) + self.playbook(kind)

    def for_failure(self, kind: str, shard: int | None) -> list[str]:
        return [self.crashes(shard), *self.logs(shard), *self.playbook(kind)]

    def for_workers(self, kind: str) -> list[str]:
        return [f"zdebug workers {self.job} --sort memory", *self.playbook(kind)]
