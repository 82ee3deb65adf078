"""Run one multi-node training job through the Kubernetes API, whichever custom resource it is (PyTorchJob,
TrainJob): create it, wait for its success or failure condition or a timeout, explain a failure with the failed
pods' log tails, and always delete it. What differs per resource is data (``JobKind``), not code."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError, PyTorchJobSettings

logger = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 30  # seconds per API call, so a hung API server cannot stall the poll loop forever
_LOG_TAIL_LINES = 40


class ClusterJobFailedError(StageFailure):
    """The job could not be created or ended Failed; the message says why and what to check."""


class ClusterJobTimeoutError(ClusterJobFailedError):
    """The job did not finish within the timeout."""


@dataclasses.dataclass(frozen=True)
class JobKind:
    """One custom resource that runs DDP pods, as the runner needs to know it."""

    kind: str  # e.g. "PyTorchJob"
    group: str
    version: str
    plural: str
    succeeded: str  # the condition type that is True once the job succeeded
    failed: str  # the condition type that is True once it failed
    pod_label: str  # label whose value is the job's name on every pod of the job
    role_label: str  # label that names a pod's role in a failure message
    container: str  # the training container's name
    missing_hint: str  # what to install when the API server does not know the resource (404)
    summary: Callable[[dict, str | None], str]  # status -> "Worker: 1 active" (only one counter when given)
    build: Callable[[PyTorchJobSettings, str, list[str], dict[str, str]], dict]  # settings, name, command, labels


def api_message(exc: ApiException) -> str:
    """The API server's Status message (e.g. an admission webhook's reason), else the raw body."""
    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError, AttributeError):
        return str(exc.body or "").strip()


def _latest_condition(status: dict) -> dict:
    true = [c for c in status.get("conditions") or [] if c.get("status") == "True"]
    return true[-1] if true else {}


def _is_true(status: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def _conditions_text(status: dict) -> str:
    return "; ".join(
        f"{c.get('type')}={c.get('reason', '')}: {c.get('message', '')}" for c in status.get("conditions") or []
    )


class ClusterJobRunner:
    """Create a job of ``kind``, wait for its success/failure/timeout, always delete it afterwards."""

    def __init__(
        self,
        kind: JobKind,
        api: client.CustomObjectsApi,
        core_api: client.CoreV1Api | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self._api, self._core, self._sleep, self._clock = api, core_api, sleep, clock

    def build_manifest(self, settings: PyTorchJobSettings, name: str, command: list[str], labels: dict) -> dict:
        return self.kind.build(settings, name, command, labels)

    def run(self, manifest: dict, timeout_seconds: float, poll_seconds: float) -> dict:
        """Return the final status of a job that succeeded; raise ClusterJobFailedError/ClusterJobTimeoutError."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        self._create(ns, name, manifest)
        try:
            return self._wait(ns, name, timeout_seconds, poll_seconds)
        finally:
            self._delete(ns, name)

    def _create(self, ns: str, name: str, manifest: dict) -> None:
        k = self.kind
        try:
            self._api.create_namespaced_custom_object(
                k.group, k.version, ns, k.plural, manifest, _request_timeout=_REQUEST_TIMEOUT
            )
        except ApiException as exc:
            hint = {
                404: f"the {k.kind} CRD ({k.group}/{k.version}) is not installed (or namespace {ns!r} is missing): "
                f"{k.missing_hint}",
                403: f"RBAC: grant create, get, delete on {k.plural}.{k.group}, list on pods and get on pods/log "
                f"in {ns!r} (kubeflow/rbac/torchtfx-trainer.yaml)",
                409: f"a {k.kind} named {name!r} already exists in {ns!r}",
            }.get(exc.status, f"the API server rejected the {k.kind}")
            raise ClusterJobFailedError(
                f"Creating {k.kind} {ns}/{name} failed ({exc.status} {exc.reason}: {api_message(exc)}): {hint}"
            ) from exc
        logger.info("Created %s %s/%s", k.kind, ns, name)

    def _wait(self, ns: str, name: str, timeout_seconds: float, poll_seconds: float) -> dict:
        k = self.kind
        deadline = self._clock() + timeout_seconds
        status: dict = {}
        last_seen: tuple | None = None
        while True:
            status = self._get_status(ns, name, status)
            cond = _latest_condition(status)
            seen = (cond.get("type"), cond.get("reason"), k.summary(status, None))
            if seen != last_seen:
                logger.info("%s %s/%s: %s (%s) [%s]", k.kind, ns, name, seen[0] or "Pending", seen[1] or "", seen[2])
                last_seen = seen
            if _is_true(status, k.failed):
                raise ClusterJobFailedError(self._failure_message(ns, name, status))
            if _is_true(status, k.succeeded):
                return status
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise ClusterJobTimeoutError(
                    f"{k.kind} {ns}/{name} did not finish within {timeout_seconds:g}s; last conditions: "
                    f"{_conditions_text(status) or 'none'}. Check: kubectl -n {ns} describe {k.kind.lower()} {name}; "
                    f"kubectl -n {ns} get events (pods a namespace's Pod Security or quota rejects never start)"
                )
            self._sleep(min(poll_seconds, remaining))

    def _get_status(self, ns: str, name: str, previous: dict) -> dict:
        """The job's status; on a transient API error, log it and keep the previous status."""
        try:
            obj = self._api.get_namespaced_custom_object(
                self.kind.group, self.kind.version, ns, self.kind.plural, name, _request_timeout=_REQUEST_TIMEOUT
            )
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            if getattr(exc, "status", None) == 404:
                raise ClusterJobFailedError(
                    f"{self.kind.kind} {ns}/{name} disappeared (deleted by someone else?)"
                ) from exc
            logger.warning("Polling %s %s/%s failed (%s); retrying", self.kind.kind, ns, name, exc)
            return previous
        return obj.get("status") or {}

    def _failure_message(self, ns: str, name: str, status: dict) -> str:
        k = self.kind
        lines = [
            f"{k.kind} {ns}/{name} failed: {k.summary(status, 'failed') or 'no replica reported failed'}",
            f"Conditions: {_conditions_text(status)}",
        ]
        lines += self._failed_pod_logs(ns, name)
        lines.append(
            f"Check: kubectl -n {ns} describe {k.kind.lower()} {name}; kubectl -n {ns} logs -l {k.pod_label}={name}"
        )
        return "\n".join(lines)

    def _failed_pod_logs(self, ns: str, name: str) -> list[str]:
        """Log tails of pods whose training container exited non-zero (diagnostic only; never raises)."""
        if self._core is None:
            return []
        out: list[str] = []
        try:
            pods = self._core.list_namespaced_pod(
                ns, label_selector=f"{self.kind.pod_label}={name}", _request_timeout=_REQUEST_TIMEOUT
            )
            for pod in pods.items:
                out += self._pod_log_tail(ns, pod)
        except Exception as exc:  # the job already failed; missing logs must not hide that
            logger.warning("Could not read the failed pods' logs of %s/%s: %s", ns, name, exc)
        return out

    def _pod_log_tail(self, ns: str, pod: client.V1Pod) -> list[str]:
        container = self.kind.container
        for cs in pod.status.container_statuses or []:
            now, last = cs.state and cs.state.terminated, cs.last_state and cs.last_state.terminated
            failed = now if now and now.exit_code else last if last and last.exit_code else None
            if cs.name != container or failed is None:
                continue
            text = self._core.read_namespaced_pod_log(
                pod.metadata.name,
                ns,
                container=container,
                tail_lines=_LOG_TAIL_LINES,
                previous=failed is not now,
                _request_timeout=_REQUEST_TIMEOUT,
            )
            role = (pod.metadata.labels or {}).get(self.kind.role_label, "?")
            return [f"--- {role} pod {pod.metadata.name} (exit code {failed.exit_code}), log tail:", str(text).rstrip()]
        return []

    def _delete(self, ns: str, name: str) -> None:
        k = self.kind
        try:
            self._api.delete_namespaced_custom_object(
                k.group,
                k.version,
                ns,
                k.plural,
                name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"),
                _request_timeout=_REQUEST_TIMEOUT,
            )
            logger.info("Deleted %s %s/%s", k.kind, ns, name)
        except ApiException as exc:
            if exc.status != 404:
                logger.warning(
                    "Deleting %s %s/%s failed (%s %s): delete it by hand: kubectl -n %s delete %s %s",
                    k.kind,
                    ns,
                    name,
                    exc.status,
                    exc.reason,
                    ns,
                    k.kind.lower(),
                    name,
                )


def load_kubernetes_apis() -> tuple[client.CustomObjectsApi, client.CoreV1Api]:
    """APIs authenticated by the in-cluster service account, else by the kubeconfig (KUBECONFIG/~/.kube/config)."""
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException as incluster_error:
        try:
            # KUBECONFIG is read now, not when the kubernetes package was imported.
            config.load_kube_config(os.environ.get("KUBECONFIG", "~/.kube/config"), client_configuration=cfg)
        except (config.ConfigException, OSError) as kubeconfig_error:
            raise PyTorchJobConfigError(
                "No Kubernetes credentials: not running in a pod with a service account "
                f"({incluster_error}) and no usable kubeconfig ({kubeconfig_error})"
            ) from kubeconfig_error
    api_client = client.ApiClient(cfg)
    return client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
