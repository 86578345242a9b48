"""The marin-iris Connect clients zdebug calls (controller, workers, actor proxy, logs).

Replies are kept as the JSON `iris rpc` prints (protobuf -> dict); actor replies (pickles)
go through `unpickle.plain_data`. Every failure becomes one `ZdebugError` line.
"""

from __future__ import annotations

import builtins
import logging
import pickle

from zephyr_debug.errors import EvidenceError, ZdebugError
from zephyr_debug.sources import http
from zephyr_debug.sources.unpickle import plain_data

MAX_LOG_LINES = 100_000  # newest lines kept (Iris `job logs --tail`)
WORKER_TIMEOUT_S = 5.0  # per Iris worker; they may not be reachable from here at all
PROFILE_RATE_HZ = 100  # Iris's default is 20


def rpc_timeout_ms() -> int:
    """Each Connect call's deadline: the shared `--timeout`, doubled (a local cluster serves
    everything from one GIL-bound process)."""
    return int(http.timeout() * 2000)


class IrisClient:
    """Thin use of marin-iris's own clients; every failure becomes one ZdebugError line."""

    def __init__(self, url: str):
        try:
            from connectrpc.errors import ConnectError
            from google.protobuf import json_format
            from iris.client.client import IrisClient as LogsClient
            from iris.cluster.token_store import cluster_name_from_url, load_token
            from iris.rpc import controller_connect, controller_pb2, job_pb2, worker_connect, worker_pb2
            from iris.rpc.auth import StaticTokenProvider, client_interceptors
        except ImportError as exc:
            raise ZdebugError(
                f"iris:// targets need the Iris client ({exc.name} missing): pip install 'zephyr-debug[iris]'"
            ) from None
        for name in ("iris", "finelog", "finelog.client.log_client", "rigging"):  # INFO lines would mix into ours
            logging.getLogger(name).setLevel(logging.WARNING)
        self.url = url
        self.timeout_ms = rpc_timeout_ms()
        self.ConnectError, self.json_format = ConnectError, json_format
        self.pb, self.job_pb, self.worker_pb, self.worker_connect = controller_pb2, job_pb2, worker_pb2, worker_connect
        credential = load_token(cluster_name_from_url(url))  # stored by `iris login`, as the CLI does
        self.tokens = StaticTokenProvider(credential.token) if credential else None
        self.interceptors = client_interceptors(self.tokens)
        self.controller = controller_connect.ControllerServiceClientSync(
            url, timeout_ms=self.timeout_ms, interceptors=self.interceptors
        )
        self.logs_client = LogsClient.remote(url, timeout_ms=self.timeout_ms, token_provider=self.tokens)

    def dict(self, message) -> dict:
        return self.json_format.MessageToDict(message, preserving_proto_field_name=True)

    def call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self.ConnectError as exc:
            raise EvidenceError(self.explain(what, exc)) from None

    def explain(self, what: str, exc) -> str:
        code = getattr(exc.code, "name", str(exc.code))
        message = " ".join(str(exc.message or exc).split())
        if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return (
                f"{self.url}: Iris controller requires authentication ({message[:120]}); "
                f"run `iris --controller-url {self.url} login`"
            )
        if code == "UNAVAILABLE" and ("connect" in message.lower() or "dns" in message.lower()):
            return f"{self.url}: Iris controller unreachable ({message[-80:]})"
        if code == "DEADLINE_EXCEEDED":
            return (
                f"{self.url}: Iris controller did not answer {what} within {self.timeout_ms / 1000:g}s "
                "(--timeout SECONDS: half of each Iris call's deadline)"
            )
        if code in ("UNIMPLEMENTED", "NOT_FOUND") and "method" in message.lower():
            return f"{self.url}: not an Iris controller ({what}: {message[:120]})"
        return f"{self.url}: Iris {what} failed: {code.lower()}: {message[:200]}"

    def jobs(self, job: str) -> list[builtins.dict]:
        query = self.pb.Controller.JobQuery(job_id_prefix=job)
        reply = self.call("list-jobs", self.controller.list_jobs, self.pb.Controller.ListJobsRequest(query=query))
        found = [self.dict(j) for j in reply.jobs]
        return [j for j in found if j["job_id"] == job or j["job_id"].startswith(job + "/")]

    def endpoints(self, job: str) -> list[builtins.dict]:
        reply = self.call(
            "list-endpoints", self.controller.list_endpoints, self.pb.Controller.ListEndpointsRequest(prefix=job)
        )
        return self.dict(reply).get("endpoints", [])

    def tasks(self, job: str) -> list[builtins.dict]:
        reply = self.call("list-tasks", self.controller.list_tasks, self.pb.Controller.ListTasksRequest(job_id=job))
        return self.dict(reply).get("tasks", [])

    def worker_usage(self, address: str) -> builtins.dict[str, builtins.dict]:
        """task id -> resource_usage, from the worker's own list-tasks (`iris rpc worker list-tasks`)."""
        client = self.worker_connect.WorkerServiceClientSync(
            "http://" + address, timeout_ms=int(WORKER_TIMEOUT_S * 1000), interceptors=self.interceptors
        )
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
            raise EvidenceError(self.explain("job logs", exc)) from None

    def actor_call(self, endpoint: str, method: str):
        """`iris actor call ENDPOINT METHOD` through the controller's proxy; the reply as plain data."""
        from iris.actor.resolver import ProxyResolver
        from iris.rpc import actor_pb2
        from iris.rpc.actor_connect import ActorServiceClientSync

        address = ProxyResolver(self.url).resolve(endpoint).first().url
        client = ActorServiceClientSync(
            address=address, timeout_ms=self.timeout_ms, accept_compression=[], interceptors=self.interceptors
        )
        call = actor_pb2.ActorCall(
            method_name=method,
            actor_name=endpoint,
            serialized_args=pickle.dumps(()),
            serialized_kwargs=pickle.dumps({}),
        )
        try:
            reply = client.call(call)
        except self.ConnectError as exc:
            raise EvidenceError(self.explain(f"{method} on the coordinator", exc)) from None
        finally:
            client.close()
        if reply.HasField("error"):
            raise EvidenceError(f"{method}: {reply.error.error_type}: {reply.error.message}"[:200])
        return plain_data(reply.serialized_value)

    def profile(self, task: str, duration: int) -> bytes:
        cpu = self.job_pb.CpuProfile(format=self.job_pb.CpuProfile.SPEEDSCOPE, rate_hz=PROFILE_RATE_HZ)
        request = self.job_pb.ProfileTaskRequest(
            target=task, duration_seconds=duration, profile_type=self.job_pb.ProfileType(cpu=cpu)
        )
        reply = self.call(
            "profile-task", self.controller.profile_task, request, timeout_ms=duration * 1000 + self.timeout_ms
        )
        if reply.error:
            raise EvidenceError(f"{self.url}: Iris could not profile {task}: {' '.join(reply.error.split())[:200]}")
        return reply.profile_data
