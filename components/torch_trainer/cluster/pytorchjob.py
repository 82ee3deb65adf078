"""Multi-node DDP through the Kubeflow Training Operator: build a PyTorchJob (kubeflow.org/v1), run it, clean up."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

logger = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
CONTAINER = "pytorch"  # the operator finds the training container (and its port) by this exact name
JOB_LABEL, REPLICA_LABEL = "training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_NAME = 48  # pods/services are named <job>-worker-<i> and must stay DNS-1035 labels (<= 63 chars)
_REQUEST_TIMEOUT = 30  # seconds per API call, so a hung API server cannot stall the poll loop forever
_TTL_AFTER_FINISHED = 3600  # backstop: the operator removes a finished job even if this process died
_LOG_TAIL_LINES = 40


class PyTorchJobConfigError(ValueError):
    """The PyTorchJob settings (or the Kubernetes client configuration) are unusable."""


class PyTorchJobFailedError(RuntimeError):
    """The PyTorchJob could not be created or ended Failed; the message says why and what to check."""


class PyTorchJobTimeoutError(PyTorchJobFailedError):
    """The PyTorchJob did not finish within the timeout."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PyTorchJobSettings:
    """Where and how the DDP replicas run; PVCs in ``volumes`` hold the job file, arrays and outputs."""

    namespace: str = "kubeflow"
    image: str
    num_nodes: int
    nproc_per_node: int = 1
    gpus_per_node: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "4"
    memory: str = "16Gi"
    node_selector: dict[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[dict, ...] = ()  # each {key, operator, value?, effect}
    volumes: tuple[dict, ...] = ()  # each {"claim_name", "mount_path"}
    env_from_secrets: tuple[dict, ...] = ()  # each {"secret", "key", "env"}
    elastic_min_nodes: int | None = None
    elastic_max_nodes: int | None = None
    max_restarts: int = 0
    backoff_limit: int = 3
    timeout_seconds: int = 24 * 3600
    poll_seconds: float = 10.0
    service_account: str | None = None
    run_as_user: int = 1000

    @property
    def elastic(self) -> bool:
        return self.elastic_min_nodes is not None or self.elastic_max_nodes is not None

    def validate(self) -> None:
        """Raise PyTorchJobConfigError naming the first invalid setting."""
        lo, hi, n = self.elastic_min_nodes, self.elastic_max_nodes, self.num_nodes
        bad_vol = [v for v in self.volumes if not v.get("claim_name") or not str(v.get("mount_path")).startswith("/")]
        bad_op = [t for t in self.tolerations if t.get("operator", "Equal") not in ("Equal", "Exists")]
        bad_effect = [t for t in self.tolerations if t.get("effect", "") not in _EFFECTS]
        bad_exists = [t for t in self.tolerations if t.get("operator") == "Exists" and t.get("value")]
        bad_secret = [r for r in self.env_from_secrets if not all(r.get(k) for k in ("secret", "key", "env"))]
        checks = [
            (bool(self.image.strip()), "image must be a non-empty container image reference"),
            (bool(_DNS1123.match(self.namespace)) and len(self.namespace) <= 63,
             f"namespace {self.namespace!r} is not a DNS-1123 label (lowercase alphanumerics and '-', <= 63)"),
            (n >= 2, f"num_nodes must be >= 2 for a PyTorchJob (got {n}); one node uses the local torchrun path"),
            (self.nproc_per_node >= 1, f"nproc_per_node must be >= 1 (got {self.nproc_per_node})"),
            (self.gpus_per_node >= 0, f"gpus_per_node must be >= 0 (got {self.gpus_per_node})"),
            (self.max_restarts >= 0 and self.backoff_limit >= 0, "max_restarts and backoff_limit must be >= 0"),
            (self.timeout_seconds > 0 and self.poll_seconds > 0, "timeout_seconds and poll_seconds must be > 0"),
            (_cpu_cores(self.cpu) > 0, f"cpu {self.cpu!r} is not a positive Kubernetes CPU quantity"),
            ((lo is None) == (hi is None), "elastic_min_nodes and elastic_max_nodes must be set together"),
            (lo is None or hi is None or 1 <= lo <= hi, f"elastic nodes need 1 <= min <= max (got {lo}, {hi})"),
            (lo is None or hi is None or lo <= n <= hi, f"num_nodes={n} must lie within elastic [{lo}, {hi}]"),
            (not bad_vol, f"volume {bad_vol[:1]} needs a claim_name and an absolute mount_path"),
            (not bad_op, f"toleration {bad_op[:1]}: operator must be Equal or Exists"),
            (not bad_effect, f"toleration {bad_effect[:1]}: effect must be one of {_EFFECTS[1:]} or empty"),
            (not bad_exists, f"toleration {bad_exists[:1]}: operator Exists takes no value"),
            (not bad_secret, f"env_from_secrets entry {bad_secret[:1]} needs secret, key and env"),
        ]  # fmt: skip
        for ok, message in checks:
            if not ok:
                raise PyTorchJobConfigError(message)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PyTorchJobSettings:
        raw = json.loads(text)
        for name in ("tolerations", "volumes", "env_from_secrets"):
            raw[name] = tuple(raw.get(name, ()))
        return cls(**raw)


def _cpu_cores(quantity: str) -> float:
    try:
        return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return 0.0


def job_name(prefix: str, unique: str) -> str:
    """A DNS-1035 label: sanitized ``prefix`` plus a hash of ``unique``, short enough for pod/service names."""
    digest = hashlib.sha256(unique.encode()).hexdigest()[:10]
    base = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    if not base[:1].isalpha():  # DNS-1035: the operator's webhook wants a leading letter
        base = f"job-{base}"
    base = re.sub(r"-{2,}", "-", base)[: _MAX_NAME - len(digest) - 1].strip("-")
    return f"{base}-{digest}"


def worker_command(job_path: str, max_restarts: int) -> list[str]:
    """The same entry point as the local path, minus --standalone/--nnodes/--nproc-per-node."""
    # On a PyTorchJob the operator sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and
    # PET_MASTER_PORT (PET_RDZV_* for elastic jobs); torchrun reads PET_<OPTION> as each option's default.
    return [
        "python", "-m", "torch.distributed.run", f"--max-restarts={max_restarts}",
        "-m", "torchtfx.components.torch_trainer.worker.train", "--job", job_path,
    ]  # fmt: skip


def _container(settings: PyTorchJobSettings, command: list[str]) -> dict[str, Any]:
    resources = {"cpu": settings.cpu, "memory": settings.memory}
    limits = dict(resources)
    if settings.gpus_per_node > 0:
        limits[settings.gpu_resource] = str(settings.gpus_per_node)  # a quantity; requests default to limits
    threads = max(1, int(_cpu_cores(settings.cpu)) // settings.nproc_per_node)
    env: list[dict[str, Any]] = [
        {"name": "OMP_NUM_THREADS", "value": str(threads)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    env += [
        {"name": r["env"], "valueFrom": {"secretKeyRef": {"name": r["secret"], "key": r["key"]}}}
        for r in settings.env_from_secrets
    ]
    mounts = [{"name": f"data-{i}", "mountPath": v["mount_path"]} for i, v in enumerate(settings.volumes)]
    return {
        "name": CONTAINER,
        "image": settings.image,
        "command": command,
        "env": env,
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
        "resources": {"limits": limits, "requests": resources},
        "volumeMounts": [*mounts, {"name": "dshm", "mountPath": "/dev/shm"}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _pod_template(settings: PyTorchJobSettings, command: list[str], labels: dict[str, str]) -> dict[str, Any]:
    volumes = [
        {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": v["claim_name"]}}
        for i, v in enumerate(settings.volumes)
    ]
    volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})  # NCCL/DataLoader need more than 64Mi shm
    spec: dict[str, Any] = {
        "containers": [_container(settings, command)],
        "volumes": volumes,
        "securityContext": {"runAsNonRoot": True, "runAsUser": settings.run_as_user},
    }
    if settings.node_selector:
        spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        spec["tolerations"] = [dict(t) for t in settings.tolerations]
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    # An Istio sidecar would keep finished pods alive and intercept the rendezvous traffic.
    metadata = {"labels": dict(labels), "annotations": {"sidecar.istio.io/inject": "false"}}
    return {"metadata": metadata, "spec": spec}


def build_manifest(settings: PyTorchJobSettings, name: str, command: list[str], labels: dict[str, str]) -> dict:
    """A kubeflow.org/v1 PyTorchJob: Master (1) + Worker (num_nodes - 1), or Workers only when elastic."""
    settings.validate()

    def replica(count: int) -> dict[str, Any]:
        template = _pod_template(settings, command, labels)
        return {"replicas": count, "restartPolicy": "OnFailure", "template": template}

    spec: dict[str, Any] = {"nprocPerNode": str(settings.nproc_per_node)}  # the v1 API types it as *string
    if settings.elastic:
        # Elastic rendezvous runs at <name>-worker-0 and min/maxReplicas bound the Worker count,
        # so every node is a Worker (a Master would be a node outside those bounds).
        spec["pytorchReplicaSpecs"] = {"Worker": replica(settings.num_nodes)}
        spec["elasticPolicy"] = {
            "minReplicas": settings.elastic_min_nodes,
            "maxReplicas": settings.elastic_max_nodes,
            "rdzvBackend": "c10d",
            "maxRestarts": settings.max_restarts,
        }
    else:
        spec["pytorchReplicaSpecs"] = {"Master": replica(1), "Worker": replica(settings.num_nodes - 1)}
    # cleanPodPolicy None: pods stay until PyTorchJobRunner deletes the job, so a failed replica's log can be
    # read first (with OnFailure a crashed container restarts in place and its pod never leaves Running).
    spec["runPolicy"] = {
        "backoffLimit": settings.backoff_limit,
        "activeDeadlineSeconds": settings.timeout_seconds,
        "cleanPodPolicy": "None",
        "ttlSecondsAfterFinished": _TTL_AFTER_FINISHED,
    }
    metadata = {"name": name, "namespace": settings.namespace, "labels": dict(labels)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


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
