"""Fault specs: `KIND:TARGET[:OPTION...]`, e.g. `skew-shard:42:x30`, `oom:5:always`.

Options: `xF` (slow-down / data factor), `always` or `times=N` (how many attempts fail),
`stage=K` (which stage, default 0), `secs=S` (hang length; default: until the job ends).
Stage faults target a stage: `slow-stage:K:xF`, `drop-records:K:RATE` (RATE a share, e.g. 0.05).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from zephyr_debug.errors import ZdebugError

# kind -> (what the target is, default factor, default times; None = every attempt)
KINDS: dict[str, tuple[str, float, int | None]] = {
    "slow-shard": ("shard", 10.0, None),  # expensive records: CPU-bound, same data size
    "skew-shard": ("shard", 30.0, None),  # far more data, normal rate
    "slow-worker": ("worker", 8.0, None),  # every shard on that worker takes x as long (CPU and I/O)
    "hang": ("shard", 1.0, 1),  # blocks mid-shard with no progress
    "exception": ("shard", 1.0, 1),  # user exception with a chained cause
    "crash-loop": ("shard", 1.0, None),  # raises on every attempt: TASK abort
    "oom": ("shard", 1.0, 1),  # grows memory until the watchdog SIGKILLs it
    "segfault": ("shard", 1.0, 1),  # real SIGSEGV via ctypes
    "kill-worker": ("worker", 1.0, 1),  # worker process group SIGKILLed mid-shard, once
    "kill-all-workers": ("shard", 1.0, 1),  # every worker SIGKILLed once this shard starts
    "slow-stage": ("stage", 10.0, None),  # every shard of stage K takes x as long (CPU and I/O)
    "drop-records": ("stage", 0.05, None),  # stage K drops this share of its records (user counter)
}


@dataclass(frozen=True)
class Fault:
    kind: str
    target: int
    factor: float = 1.0
    times: int | None = 1
    stage: int = 0
    seconds: float | None = None

    def hits(self, stage_index: int, shard: int, attempt: int) -> bool:
        """Does this shard fault fire for that attempt of that shard?"""
        return (
            KINDS[self.kind][0] == "shard"
            and stage_index == self.stage
            and shard == self.target
            and (self.times is None or attempt < self.times)
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"


def parse(spec: str) -> Fault:
    kind, _, rest = spec.partition(":")
    if kind not in KINDS:
        raise ZdebugError(f"--fault {spec}: unknown kind {kind!r} (one of: {', '.join(KINDS)})")
    parts = rest.split(":") if rest else []
    if not parts or not parts[0].isdigit():
        raise ZdebugError(f"--fault {spec}: expected {kind}:<{KINDS[kind][0]} number>[:options]")
    _, factor, times = KINDS[kind]
    fields: dict = {"factor": factor, "times": times}
    for option in parts[1:]:
        try:
            if option.startswith("x"):
                fields["factor"] = float(option[1:])
            elif option == "always":
                fields["times"] = None
            elif KINDS[kind][0] == "stage" and option.replace(".", "", 1).isdigit():
                fields["factor"] = float(option)  # drop-records:K:RATE
            elif option.startswith(("times=", "stage=", "secs=")):
                name, value = option.split("=", 1)
                fields[{"secs": "seconds"}.get(name, name)] = float(value) if name == "secs" else int(value)
            else:
                raise ValueError(option)
        except ValueError:
            raise ZdebugError(f"--fault {spec}: bad option {option!r} (xF, always, times=N, stage=K, secs=S)") from None
    if KINDS[kind][0] == "stage":
        fields["stage"] = int(parts[0])
    return Fault(kind, int(parts[0]), **fields)


def from_dicts(items: list[dict]) -> list[Fault]:
    return [Fault(**item) for item in items]
