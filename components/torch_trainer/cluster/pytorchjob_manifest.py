"""The kubeflow.org/v1 PyTorchJob manifest for multi-node DDP: Master + Workers (or elastic Workers), each pod
running the same torchrun entry point as the local path."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from torchtfx.components.torch_trainer.cluster.lifeline import MODULE as LIFELINE_MODULE
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings, cpu_cores
from torchtfx.components.torch_trainer.constants import WORKER_MODULE

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
CONTAINER = "pytorch"  # the operator finds the training container (and its port) by this exact name
JOB_LABEL, REPLICA_LABEL = "training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"
_MAX_NAME = 48  # pods/services are named <job>-worker-<i> and must stay DNS-1035 labels (<= 63 chars)
_TTL_AFTER_FINISHED = 3600  # backstop: the operator removes a finished job even if this process died
# The pod's own namespace, mounted with its service account token; the KFP driver finds the run's namespace
# the same way (backend/src/v2/config/env.go, InPodNamespace).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

logger = logging.getLogger(__name__)


def job_namespace(configured: str | None) -> str:
    """``configured``, else the namespace of the pod this runs in: a KFP step runs in the run's namespace, where
    its PVCs and secrets are (on multi-user Kubeflow, the user's profile namespace, not ``kubeflow``). Outside a
    pod, the kubeconfig's current context's namespace, else ``default``, as kubectl chooses."""
    if configured:
        return configured
    try:
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        namespace = ""
    if not namespace:
        namespace = _kubeconfig_namespace() or "default"
        logger.info("Not in a pod (no %s): PyTorchJob namespace %s", SERVICE_ACCOUNT_NAMESPACE, namespace)
    return namespace


def _kubeconfig_namespace() -> str | None:
    from kubernetes import config

    try:
        _, active = config.list_kube_config_contexts(os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config")))
    except (config.ConfigException, OSError):
        return None
    return (active or {}).get("context", {}).get("namespace")


def job_name(prefix: str, unique: str) -> str:
    """A DNS-1035 label: sanitized ``prefix`` plus a hash of ``unique``, short enough for pod/service names."""
    digest = hashlib.sha256(unique.encode()).hexdigest()[:10]
    base = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    if not base[:1].isalpha():  # DNS-1035: the operator's webhook wants a leading letter
        base = f"job-{base}"
    base = re.sub(r"-{2,}", "-", base)[: _MAX_NAME - len(digest) - 1].strip("-")
    return f"{base}-{digest}"


def worker_command(job_path: str, max_restarts: int, fatal_marker: str) -> list[str]:
    """The same entry point as the local path, minus --standalone/--nnodes/--nproc-per-node: each worker starts
    through the lifeline, which refuses to start it again after a failure that a restart would only repeat
    (``fatal_marker``, on the shared volume, written by the failing worker: worker/fatal.py)."""
    # On a PyTorchJob the operator sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and
    # PET_MASTER_PORT (PET_RDZV_* for elastic jobs); torchrun reads PET_<OPTION> as each option's default.
    return [
        "python", "-m", "torch.distributed.run", f"--max-restarts={max_restarts}",
        "-m", LIFELINE_MODULE, "--unless-exists", fatal_marker,
        "python", "-u", "-m", WORKER_MODULE, "--job", job_path,
    ]  # fmt: skip


def _container(settings: PyTorchJobSettings, command: list[str]) -> dict[str, Any]:
    resources = {"cpu": settings.cpu, "memory": settings.memory}
    limits = dict(resources)
    if settings.gpus_per_node > 0:
        limits[settings.gpu_resource] = str(settings.gpus_per_node)  # a quantity; requests default to limits
    threads = max(1, int(cpu_cores(settings.cpu)) // settings.nproc_per_node)
    env: list[dict[str, Any]] = [
        {"name": "OMP_NUM_THREADS", "value": str(threads)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    env += [
        {"name": r.env, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}}
        for r in settings.env_from_secrets
    ]
    mounts = [{"name": f"data-{i}", "mountPath": v.mount_path} for i, v in enumerate(settings.volumes)]
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
        {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": v.claim_name}}
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
        spec["tolerations"] = [t.to_k8s() for t in settings.tolerations]
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    # An Istio sidecar would keep finished pods alive and intercept the rendezvous traffic.
    metadata = {"labels": dict(labels), "annotations": {"sidecar.istio.io/inject": "false"}}
    return {"metadata": metadata, "spec": spec}


def build_manifest(settings: PyTorchJobSettings, name: str, command: list[str], labels: dict[str, str]) -> dict:
    """A kubeflow.org/v1 PyTorchJob: Master (1) + Worker (num_nodes - 1), or Workers only when elastic."""

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
    metadata = {"name": name, "namespace": job_namespace(settings.namespace), "labels": dict(labels)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}
