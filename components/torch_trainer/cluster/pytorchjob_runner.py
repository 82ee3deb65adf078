"""Run a PyTorchJob through the Kubernetes API: create it, wait for Succeeded/Failed/timeout, explain a failure
with the failed pods' logs, and always delete it."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from torchtfx.components.torch_trainer.cluster.pytorchjob_manifest import (
    CONTAINER,
    GROUP,
    JOB_LABEL,
    PLURAL,
    REPLICA_LABEL,
    VERSION,
)
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError

logger = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 30  # seconds per API call, so a hung API server cannot stall the poll loop forever
_LOG_TAIL_LINES = 40


class PyTorchJobFailedError(RuntimeError):
    """The PyTorchJob could not be created or ended Failed; the message says why and what to check."""


class PyTorchJobTimeoutError(PyTorchJobFailedError):
    """The PyTorchJob did not finish within the timeout."""


def _api_message(exc: ApiException) -> str:
    """The API server's Status message (e.g. an admission webhook's reason), else the raw body."""
    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError, AttributeError):
        return str(exc.body or "").strip()


def _latest_condition(status: dict) -> dict:
    true = [c for c in status.get("conditions") or [] if c.get("status") == "True"]
    return true[-1] if true else {}


def _replica_summary(status: dict, key: str | None = None) -> str:
    parts = []
    for rtype, counts in sorted((status.get("replicaStatuses") or {}).items()):
        shown = {k: v for k, v in counts.items() if k in ("active", "succeeded", "failed") and v}
        if key is None:
            parts.append(f"{rtype}: " + (", ".join(f"{v} {k}" for k, v in sorted(shown.items())) or "none"))
        elif shown.get(key):
            parts.append(f"{rtype}: {shown[key]} {key}")
    return "; ".join(parts)


def _conditions_text(status: dict) -> str:
    return "; ".join(
        f"{c.get('type')}={c.get('reason', '')}: {c.get('message', '')}" for c in status.get("conditions") or []
    )


class PyTorchJobRunner:
    """Create a PyTorchJob, wait for Succeeded/Failed/timeout, always delete it afterwards."""

    def __init__(
        self,
        api: client.CustomObjectsApi,
        core_api: client.CoreV1Api | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api, self._core, self._sleep, self._clock = api, core_api, sleep, clock

    def run(self, manifest: dict, timeout_seconds: float, poll_seconds: float) -> dict:
        """Return the final status of a Succeeded job; raise PyTorchJobFailedError/PyTorchJobTimeoutError."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        self._create(ns, name, manifest)
        try:
            return self._wait(ns, name, timeout_seconds, poll_seconds)
        finally:
            self._delete(ns, name)

    def _create(self, ns: str, name: str, manifest: dict) -> None:
        try:
            self._api.create_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, manifest, _request_timeout=_REQUEST_TIMEOUT
            )
        except ApiException as exc:
            hint = {
                404: f"the PyTorchJob CRD ({GROUP}/{VERSION}) is not installed (or namespace {ns!r} is missing): "
                "install the Kubeflow Training Operator",
                403: f"RBAC: grant create, get, delete on {PLURAL}.{GROUP}, list on pods and get on pods/log in {ns!r}",
                409: f"a PyTorchJob named {name!r} already exists in {ns!r}",
            }.get(exc.status, "the API server rejected the PyTorchJob")
            raise PyTorchJobFailedError(
                f"Creating PyTorchJob {ns}/{name} failed ({exc.status} {exc.reason}: {_api_message(exc)}): {hint}"
            ) from exc
        logger.info("Created PyTorchJob %s/%s", ns, name)

    def _wait(self, ns: str, name: str, timeout_seconds: float, poll_seconds: float) -> dict:
        deadline = self._clock() + timeout_seconds
        status: dict = {}
        last_seen: tuple | None = None
        while True:
            status = self._get_status(ns, name, status)
            cond = _latest_condition(status)
            seen = (cond.get("type"), cond.get("reason"), _replica_summary(status))
            if seen != last_seen:
                logger.info("PyTorchJob %s/%s: %s (%s) [%s]", ns, name, seen[0] or "Pending", seen[1] or "", seen[2])
                last_seen = seen
            if cond.get("type") == "Succeeded":
                return status
            if cond.get("type") == "Failed":
                raise PyTorchJobFailedError(self._failure_message(ns, name, status))
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise PyTorchJobTimeoutError(
                    f"PyTorchJob {ns}/{name} did not finish within {timeout_seconds:g}s; last conditions: "
                    f"{_conditions_text(status) or 'none'}. Check: kubectl -n {ns} describe pytorchjob {name}"
                )
            self._sleep(min(poll_seconds, remaining))

    def _get_status(self, ns: str, name: str, previous: dict) -> dict:
        """The job's status; on a transient API error, log it and keep the previous status."""
        try:
            obj = self._api.get_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, _request_timeout=_REQUEST_TIMEOUT
            )
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            if getattr(exc, "status", None) == 404:
                raise PyTorchJobFailedError(f"PyTorchJob {ns}/{name} disappeared (deleted by someone else?)") from exc
            logger.warning("Polling PyTorchJob %s/%s failed (%s); retrying", ns, name, exc)
            return previous
        return obj.get("status") or {}

    def _failure_message(self, ns: str, name: str, status: dict) -> str:
        lines = [
            f"PyTorchJob {ns}/{name} failed: {_replica_summary(status, 'failed') or 'no replica reported failed'}",
            f"Conditions: {_conditions_text(status)}",
        ]
        lines += self._failed_pod_logs(ns, name)
        lines.append(f"Check: kubectl -n {ns} describe pytorchjob {name}; kubectl -n {ns} logs -l {JOB_LABEL}={name}")
        return "\n".join(lines)

    def _failed_pod_logs(self, ns: str, name: str) -> list[str]:
        """Log tails of pods whose training container exited non-zero (diagnostic only; never raises)."""
        if self._core is None:
            return []
        out: list[str] = []
        try:
            pods = self._core.list_namespaced_pod(
                ns, label_selector=f"{JOB_LABEL}={name}", _request_timeout=_REQUEST_TIMEOUT
            )
            for pod in pods.items:
                for cs in pod.status.container_statuses or []:
                    now, last = cs.state and cs.state.terminated, cs.last_state and cs.last_state.terminated
                    failed = now if now and now.exit_code else last if last and last.exit_code else None
                    if cs.name != CONTAINER or failed is None:
                        continue
                    text = self._core.read_namespaced_pod_log(
                        pod.metadata.name, ns, container=CONTAINER, tail_lines=_LOG_TAIL_LINES,
                        previous=failed is not now, _request_timeout=_REQUEST_TIMEOUT,
                    )  # fmt: skip
                    rtype = (pod.metadata.labels or {}).get(REPLICA_LABEL, "?")
                    out.append(f"--- {rtype} pod {pod.metadata.name} (exit code {failed.exit_code}), log tail:")
                    out.append(str(text).rstrip())
        except Exception as exc:  # the job already failed; missing logs must not hide that
            logger.warning("Could not read the failed pods' logs of %s/%s: %s", ns, name, exc)
        return out

    def _delete(self, ns: str, name: str) -> None:
        try:
            self._api.delete_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"), _request_timeout=_REQUEST_TIMEOUT,
            )  # fmt: skip
            logger.info("Deleted PyTorchJob %s/%s", ns, name)
        except ApiException as exc:
            if exc.status != 404:
                logger.warning(
                    "Deleting PyTorchJob %s/%s failed (%s %s): delete it by hand: kubectl -n %s delete pytorchjob %s",
                    ns, name, exc.status, exc.reason, ns, name,
                )  # fmt: skip


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
