"""Live Iris source: `iris://HOST:PORT/<job-id>` (or `iris://https://HOST/<job-id>`) -> Evidence.

zdebug does the stitching a user does by hand with the Iris CLI: the job and its child jobs,
their tasks (resource usage from each task's own worker: the controller's list-tasks lacks it),
the Zephyr coordinator endpoint, the job's logs (children included) and the coordinator's
`get_status` / `get_counters`. What it fetched is written as files (`iris rpc` JSON, log text)
to `$ZDEBUG_HOME/iris/<controller>/<job>/<snapshot>/` and read back by `evidencedir`: the live
view and an offline re-run (`zdebug crashes <that dir>`) go through the same parsers.

Every call uses marin-iris's generated Connect clients (protobuf replies, kept as the JSON
`iris rpc` prints). Actor replies (get_status, get_counters) are pickles: they are read by
`plain_data`, which builds only dicts, lists and scalars and never imports or calls anything
named in the pickle (Python's "restricting globals" recipe).
"""

from __future__ import annotations

import builtins
import io
import json
import logging
import pickle
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import DEAD_STATES, Evidence, safe_name
from zephyr_debug.sources import evidencedir, logtext

SCHEME = "iris://"
RPC_TIMEOUT_MS = 30_000  # generous: a local cluster serves everything from one GIL-bound process
MAX_LOG_LINES = 100_000  # newest lines kept (Iris `job logs --tail`)
WORKER_TIMEOUT_MS = 5_000  # per Iris worker; they may not be reachable from here at all
KEEP_SNAPSHOTS = 3
PRUNE_AFTER_S = 60.0
PROFILE_RATE_HZ = 100  # Iris's default is 20
COORDINATOR_RE = re.compile(r"-p(\d+)-coord-\d+$")
WORKER_TASK_RE = re.compile(r"-workers(?:-a\d+)?/\d+$")  # a task of a Zephyr worker group job
ATTEMPT_RE = re.compile(r"-p(\d+)-a(\d+)/")
# Iris job states -> Evidence.state (anything else: still running).
JOB_STATES = {"SUCCEEDED": "succeeded", "FAILED": "failed", "WORKER_FAILED": "failed",
              "UNSCHEDULABLE": "failed", "KILLED": "interrupted"}
RESOURCE_COLUMNS = ["memory_mb", "memory_peak_mb", "disk_mb", "cpu"]


def is_target(target: str) -> bool:
    return target.startswith(SCHEME)


def parse_target(target: str) -> tuple[str, str]:
    """`iris://HOST:PORT/user/job` -> (`http://HOST:PORT`, `/user/job`)."""
    rest = target[len(SCHEME):]
    scheme = "http://"
    for prefix in ("http://", "https://"):
        if rest.startswith(prefix):
            scheme, rest = prefix, rest[len(prefix):]
    host, _, job = rest.partition("/")
    if not host or not job.strip("/"):
        raise ZdebugError(f"{target}: expected iris://HOST:PORT/<job-id>, e.g. iris://127.0.0.1:10000/alice/my-job")
    return scheme + host, "/" + job.strip("/")


@dataclass
class Fetched:
    """What one round of Iris calls returned (wire-form dicts, as `iris rpc` prints them)."""

    url: str
    job: str
    jobs: list[dict] = field(default_factory=list)
    endpoints: list[dict] = field(default_factory=list)
    tasks: list[dict] = field(default_factory=list)
    logs: list = field(default_factory=list)  # iris TaskLogEntry, oldest first
    status: dict | None = None  # the coordinator's get_status, as plain data
    counters: dict | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def coordinator(self) -> str | None:
        """The newest Zephyr coordinator endpoint (highest pipeline, then attempt)."""
        names = [e["name"] for e in self.endpoints if COORDINATOR_RE.search(e.get("name", ""))]
        return max(names, key=_attempt_key) if names else None

    def worker_ids(self) -> dict[str, str]:
        """Iris task id -> Zephyr worker id base: the actor endpoint's last component, or, once the
        task finished and its endpoint is gone, fray's actor naming `<group job>-<task index>`."""
        ids = {t["task_id"]: "-".join(t["task_id"].rsplit("/", 2)[-2:]) for t in self.tasks
               if WORKER_TASK_RE.search(t["task_id"])}
        ids.update({e["task_id"]: e["name"].rsplit("/", 1)[-1] for e in self.endpoints
                    if e.get("task_id") and not COORDINATOR_RE.search(e["name"])})
        return ids


class _Record:
    """Stands in for any class a pickled reply names: keeps the state, runs none of its code."""

    def __init__(self, *args):
        self.__dict__["_args"] = args

    def __setstate__(self, state):
        if isinstance(state, tuple):  # (dict state, slots state)
            state = {**(state[0] or {}), **(state[1] or {})}
        self.__dict__.update(state if isinstance(state, dict) else {"_state": state})

    def __setitem__(self, key, value):
        self.__dict__[key] = value


_SAFE_BUILTINS = {name: getattr(builtins, name) for name in ("set", "frozenset", "list", "dict", "tuple")}
# bytearray(bytes) only: bytearray(10**10) from a hostile reply would allocate 10 GB.
_SAFE_BUILTINS["bytearray"] = lambda data=b"", *_: bytearray(data if isinstance(data, (bytes, bytearray)) else b"")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module == "builtins" and name in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[name]
        if (module, name) == ("copyreg", "_reconstructor"):
            return lambda cls, base, state: cls()
        return type(name, (_Record,), {})

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed")


def plain_data(data: bytes):
    """A pickled reply as dicts / lists / scalars; objects become the dict of their state."""
    try:
        return _plain(_PlainUnpickler(io.BytesIO(data)).load())
    except Exception as exc:  # any malformed or unexpected pickle
        raise ZdebugError(f"unreadable actor reply ({type(exc).__name__}: {str(exc)[:80]})") from None


def _plain(value):
    if isinstance(value, _Record):
        state = {k: v for k, v in value.__dict__.items() if k != "_args"}
        if not state:
            args = value.__dict__.get("_args", ())
            return _plain(args[0]) if len(args) == 1 else [_plain(a) for a in args]
        return {str(k): _plain(v) for k, v in state.items()}
    if isinstance(value, dict):
        return {(k if isinstance(k, (str, int, float)) else str(_plain(k))): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _attempt_key(name: str) -> tuple[int, int, str]:
    m = ATTEMPT_RE.search(name)
    return (int(m.group(1)), int(m.group(2)), name) if m else (-1, -1, name)


# -- the marin-iris client ---------------------------------------------------------------------
class _Iris:
    """Thin use of marin-iris's own clients; every failure becomes one ZdebugError line."""

    def __init__(self, url: str):
        try:
            from connectrpc.errors import ConnectError
            from google.protobuf import json_format
            from iris.client.client import IrisClient
            from iris.cluster.token_store import cluster_name_from_url, load_token
            from iris.rpc import controller_connect, controller_pb2, job_pb2, worker_connect, worker_pb2
            from iris.rpc.auth import StaticTokenProvider, client_interceptors
        except ImportError as exc:
            raise ZdebugError(f"iris:// targets need the Iris client ({exc.name} missing): "
                              "pip install 'zephyr-debug[iris]'") from None
        for name in ("iris", "finelog", "finelog.client.log_client", "rigging"):  # INFO lines would mix into ours
            logging.getLogger(name).setLevel(logging.WARNING)
        self.url = url
        self.ConnectError, self.json_format = ConnectError, json_format
        self.pb, self.job_pb, self.worker_pb, self.worker_connect = controller_pb2, job_pb2, worker_pb2, worker_connect
        credential = load_token(cluster_name_from_url(url))  # stored by `iris login`, as the CLI does
        self.tokens = StaticTokenProvider(credential.token) if credential else None
        self.interceptors = client_interceptors(self.tokens)
        self.controller = controller_connect.ControllerServiceClientSync(
            url, timeout_ms=RPC_TIMEOUT_MS, interceptors=self.interceptors)
        self.logs_client = IrisClient.remote(url, timeout_ms=RPC_TIMEOUT_MS, token_provider=self.tokens)

    def dict(self, message) -> dict:
        return self.json_format.MessageToDict(message, preserving_proto_field_name=True)

    def call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self.ConnectError as exc:
            raise ZdebugError(self.explain(what, exc)) from None

    def explain(self, what: str, exc) -> str:
        code = getattr(exc.code, "name", str(exc.code))
        message = " ".join(str(exc.message or exc).split())
        if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return (f"{self.url}: Iris controller requires authentication ({message[:120]}); "
                    f"run `iris --controller-url {self.url} login`")
        if code == "UNAVAILABLE" and ("connect" in message.lower() or "dns" in message.lower()):
            return f"{self.url}: Iris controller unreachable ({message[-80:]})"
        if code == "DEADLINE_EXCEEDED":
            return f"{self.url}: Iris controller did not answer {what} within {RPC_TIMEOUT_MS / 1000:.0f}s"
        if code in ("UNIMPLEMENTED", "NOT_FOUND") and "method" in message.lower():
            return f"{self.url}: not an Iris controller ({what}: {message[:120]})"
        return f"{self.url}: Iris {what} failed: {code.lower()}: {message[:200]}"

    def jobs(self, job: str) -> list[dict]:
        query = self.pb.Controller.JobQuery(job_id_prefix=job)
        reply = self.call("list-jobs", self.controller.list_jobs, self.pb.Controller.ListJobsRequest(query=query))
        found = [self.dict(j) for j in reply.jobs]
        return [j for j in found if j["job_id"] == job or j["job_id"].startswith(job + "/")]

    def endpoints(self, job: str) -> list[dict]:
        reply = self.call("list-endpoints", self.controller.list_endpoints,
                          self.pb.Controller.ListEndpointsRequest(prefix=job))
        return self.dict(reply).get("endpoints", [])

    def tasks(self, job: str) -> list[dict]:
        reply = self.call("list-tasks", self.controller.list_tasks, self.pb.Controller.ListTasksRequest(job_id=job))
        return self.dict(reply).get("tasks", [])

    def worker_usage(self, address: str) -> dict[str, dict]:
        """task id -> resource_usage, from the worker's own list-tasks (`iris rpc worker list-tasks`)."""
        client = self.worker_connect.WorkerServiceClientSync(
            "http://" + address, timeout_ms=WORKER_TIMEOUT_MS, interceptors=self.interceptors)
        try:
            reply = self.dict(client.list_tasks(self.worker_pb.Worker.ListTasksRequest()))
        finally:
            client.close()
        return {t["task_id"]: t["resource_usage"] for t in reply.get("tasks", []) if t.get("resource_usage")}

    def logs(self, job: str) -> list:
        from iris.cluster.types import JobName

        try:
            return self.logs_client.fetch_task_logs(JobName.from_wire(job), max_lines=MAX_LOG_LINES, tail=True)
        except self.ConnectError as exc:
            raise ZdebugError(self.explain("job logs", exc)) from None

    def actor_call(self, endpoint: str, method: str):
        """`iris actor call ENDPOINT METHOD` through the controller's proxy; the reply as plain data."""
        from iris.actor.resolver import ProxyResolver
        from iris.rpc import actor_pb2
        from iris.rpc.actor_connect import ActorServiceClientSync

        address = ProxyResolver(self.url).resolve(endpoint).first().url
        client = ActorServiceClientSync(address=address, timeout_ms=RPC_TIMEOUT_MS, accept_compression=[],
                                        interceptors=self.interceptors)
        call = actor_pb2.ActorCall(method_name=method, actor_name=endpoint,
                                   serialized_args=pickle.dumps(()), serialized_kwargs=pickle.dumps({}))
        try:
            reply = client.call(call)
        except self.ConnectError as exc:
            raise ZdebugError(self.explain(f"{method} on the coordinator", exc)) from None
        finally:
            client.close()
        if reply.HasField("error"):
            raise ZdebugError(f"{method}: {reply.error.error_type}: {reply.error.message}"[:200])
        return plain_data(reply.serialized_value)

    def profile(self, task: str, duration: int) -> bytes:
        cpu = self.job_pb.CpuProfile(format=self.job_pb.CpuProfile.SPEEDSCOPE, rate_hz=PROFILE_RATE_HZ)
        request = self.job_pb.ProfileTaskRequest(target=task, duration_seconds=duration,
                                                 profile_type=self.job_pb.ProfileType(cpu=cpu))
        reply = self.call("profile-task", self.controller.profile_task, request,
                          timeout_ms=(duration + 30) * 1000)
        if reply.error:
            raise ZdebugError(f"{self.url}: Iris could not profile {task}: {' '.join(reply.error.split())[:200]}")
        return reply.profile_data


# -- fetching ----------------------------------------------------------------------------------
def fetch(url: str, job: str) -> Fetched:
    iris = _Iris(url)
    got = Fetched(url, job, jobs=iris.jobs(job))
    if not got.jobs:
        raise ZdebugError(f"{url}: Iris job {job} not found (list it with `iris --controller-url {url} job list`)")
    got.endpoints = iris.endpoints(job)
    with ThreadPoolExecutor(max_workers=4) as pool:
        logs = pool.submit(iris.logs, job)
        calls = {m: pool.submit(_try, iris.actor_call, got.coordinator, m)
                 for m in ("get_status", "get_counters")} if got.coordinator else {}
        task_lists = list(pool.map(iris.tasks, [j["job_id"] for j in got.jobs]))
        got.tasks = [t for tasks in task_lists for t in tasks]
        addresses = sorted({t["worker_address"] for t in got.tasks if t.get("worker_address")})
        usage: dict[str, dict] = {}
        failed: list[str] = []
        with ThreadPoolExecutor(max_workers=16) as workers:
            for address, result in zip(addresses, workers.map(lambda a: _try(iris.worker_usage, a), addresses)):
                if isinstance(result, Exception):
                    failed.append(f"{address} ({str(result).splitlines()[0][:100]})")
                else:
                    usage.update(result)
        if failed:
            got.warnings.append(f"{len(failed)} of {len(addresses)} Iris workers unreachable, no resource usage "
                                f"for their tasks: {failed[0]}{' …' if len(failed) > 1 else ''}")
        for task in got.tasks:
            if task["task_id"] in usage:
                task["resource_usage"] = usage[task["task_id"]]
        got.logs = logs.result()
        for method, call in calls.items():
            result = call.result()
            if isinstance(result, Exception):
                got.warnings.append(f"coordinator {method} failed (pipeline finished?): {str(result)[:160]}")
            else:
                setattr(got, method.removeprefix("get_"), result)
    return got


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # one unreachable worker must not hide the others
        return exc


def save(got: Fetched, root: Path) -> Path:
    """The fetched evidence as files `evidencedir` reads: one new snapshot dir per fetch, so
    concurrent zdebug runs never read a half-written or deleted one. Snapshots beyond the newest
    `KEEP_SNAPSHOTS` go once they are `PRUNE_AFTER_S` old (their readers are long done)."""
    job_dir = root / safe_name(got.url.split("://", 1)[-1]) / safe_name(got.job.strip("/"))
    job_dir.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=job_dir))
    for old in sorted(p for p in job_dir.iterdir() if p.is_dir())[:-KEEP_SNAPSHOTS]:
        try:
            stale = time.time() - old.stat().st_mtime > PRUNE_AFTER_S
        except OSError:  # another zdebug run pruned it first
            continue
        if stale:
            shutil.rmtree(old, ignore_errors=True)
    with open(out / "job.log", "w", encoding="utf-8") as fh:
        for line in _log_lines(got.logs):
            fh.write(line + "\n")
    (out / "tasks.json").write_text(json.dumps({"tasks": got.tasks}, indent=1) + "\n")
    (out / "jobs.json").write_text(json.dumps({"jobs": got.jobs, "endpoints": got.endpoints}, indent=1) + "\n")
    for name, value in (("get_status", got.status), ("get_counters", got.counters)):
        if value is not None:
            (out / f"{name}.json").write_text(json.dumps(value, indent=1, default=str) + "\n")
    return out


def _log_lines(entries: list) -> list[str]:
    """Every task's lines in Iris time order, a task's untimestamped continuation lines (a
    traceback) kept right after the line they continue, whatever other tasks logged meanwhile."""
    records: list[list[str]] = []
    last: dict[str, list[str]] = {}
    for entry in entries:
        text = entry.data.rstrip("\n")
        record = last.get(entry.task_id)
        if record is not None and not logtext.LINE_START_RE.match(b"\n" + text[:64].encode("utf-8", "replace")):
            record.append(text)
            continue
        last[entry.task_id] = record = [text]
        records.append(record)
    return [line for record in records for line in record]


def load(target: str) -> Evidence:
    url, job = parse_target(target)
    got = fetch(url, job)
    now = time.time()
    if not got.coordinator and not any(" zephyr." in e.data or "Zephyr" in e.data for e in got.logs):
        raise ZdebugError(f"{target}: no Zephyr coordinator in Iris job {job} "
                          f"(no `-coord` endpoint, no Zephyr lines in {len(got.logs)} log lines)")
    saved = save(got, jobstore.home() / "iris")
    ev = evidencedir.load(saved)
    if ev is None or not (ev.stages or ev.live):
        raise ZdebugError(f"{target}: no Zephyr coordinator in Iris job {job} "
                          f"(its logs and endpoints hold no Zephyr pipeline; fetched to {saved})")
    ev.job = ev.source = target  # `next` commands then point back at the live job
    ev.warnings += got.warnings
    if not got.coordinator:
        ev.warnings.append("no live Zephyr coordinator endpoint (pipeline finished?): status comes from the logs")
    _apply_job_state(ev, got, now)
    ev.workers = _zephyr_workers(ev.workers, got)
    ev.config.setdefault("iris_evidence_dir", str(saved))
    return ev


def _apply_job_state(ev: Evidence, got: Fetched, now: float) -> None:
    """The Iris job's own state: while it runs the evidence is as of now; once it ended, its end
    (succeeded / failed / killed) is the job's, unless Zephyr's logs already said it failed."""
    top = next((j for j in got.jobs if j["job_id"] == got.job), {})  # {}: a prefix of several jobs
    state = JOB_STATES.get(str(top.get("state", "")).removeprefix("JOB_STATE_"))
    if state is None:
        ev.now = now
        if ev.state in ("unknown", "succeeded") and not (ev.live and ev.live.done):
            ev.state = "running"
    elif ev.state not in ("failed",):
        ev.state = state
    if top.get("error") and not ev.fatal_error and state == "failed":
        ev.fatal_error = top["error"]


def _zephyr_workers(workers, got: Fetched):
    """Iris task rows carry their resource usage over to the Zephyr workers they host; the other
    tasks (the driver, the coordinator) are not Zephyr workers and leave the table."""
    if not len(workers):
        return workers
    bases = got.worker_ids()
    task_rows = workers[workers["worker"].isin(bases.keys())]
    rest = workers[~workers["worker"].isin({t["task_id"] for t in got.tasks})].copy()
    names = rest["worker"].astype(str)
    stripped = names.str.replace(r":\d+$", "", regex=True)  # `BASE:N` -> BASE, once for all tasks
    for _, row in task_rows.iterrows():
        base = bases[row["worker"]]
        mine = (names == base) | (stripped == base)
        if not mine.any():
            continue
        for col in RESOURCE_COLUMNS:
            if col in rest and row.get(col) is not None:
                rest.loc[mine, col] = row[col]
        if row.get("state") in DEAD_STATES:  # the Iris task ended: so did the worker it hosted
            rest.loc[mine, "state"] = row["state"]
    return rest.reset_index(drop=True)


# -- profiling ---------------------------------------------------------------------------------
def profile_task(target: str, duration: int, worker: str | None = None) -> bytes:
    """Speedscope JSON of an Iris profile-task (py-spy on the task's worker) for `duration` s.

    `target` is `iris://HOST:PORT/<job>` or `…/<task-id>` (a job path ending in the task index).
    For a job, the task is the one hosting Zephyr worker `worker`, or, without it, the worker
    holding the longest-running in-flight shard (the straggler)."""
    url, path = parse_target(target)
    iris = _Iris(url)
    task = path if re.search(r"/\d+$", path) else _task_for(target, iris, path, worker)
    data = iris.profile(task, duration)
    try:
        profiles = json.loads(data).get("profiles")
    except (ValueError, AttributeError, RecursionError):
        raise ZdebugError(f"{target}: Iris profile of {task} is not speedscope JSON") from None
    if not profiles:
        raise ZdebugError(f"{target}: Iris returned an empty profile for {task}: no samples (the task "
                          "idled throughout, or py-spy is missing on the Iris worker's PATH: see its log)")
    return data


def _task_for(target: str, iris: _Iris, job: str, worker: str | None) -> str:
    if worker is None:
        ev = load(target)
        running = ev.attempts[ev.attempts["outcome"] == "running"]
        if not len(running):
            raise ZdebugError(f"{target}: no shard in flight to profile; name a worker or an Iris task id")
        start = running["start_ts"].astype(float).fillna(ev.now)
        worker = str(running.loc[start.idxmin(), "worker"])
    base = worker.split(":", 1)[0]
    tasks = {b: t for t, b in Fetched(iris.url, job, endpoints=iris.endpoints(job)).worker_ids().items()}
    if base not in tasks:
        raise ZdebugError(f"{target}: no Iris task hosts Zephyr worker {worker} (not registered in job {job})")
    return tasks[base]
