"""The kubeflow.org/v1 PyTorchJob manifest for multi-node DDP (Training Operator v1): Workers only, with an
``elasticPolicy`` (c10d rendezvous), each pod running the same torchrun entry point as the local path. Also the
naming, namespace and command helpers that the TrainJob manifest (trainjob_manifest.py) shares.

Why no Master: when a job has a Master the operator adds an ``init-pytorch`` init container to every Worker
(pkg/controller.v1/pytorch/initcontainer.go:116-133@v1.9.2) from a built-in template (initcontainer.go:35-46@v1.9.2:
image ``alpine:3.10``, pkg/config/config.go:28@v1.9.2, and no securityContext), which Pod Security "restricted"
refuses (allowPrivilegeEscalation and capabilities unset), and which an air-gapped registry cannot pull. Only the
cluster admin can change it (the operator's --pytorch-init-container-template-file/-image flags,
cmd/training-operator.v1/main.go:104-109@v1.9.2), so the job avoids it: "No master is specified, skip setting init
container" (initcontainer.go:116-120@v1.9.2). A fixed-size job is an elastic job with minReplicas = maxReplicas =
num_nodes: PET_NNODES "n:n" (pkg/controller.v1/pytorch/elastic.go:139-143@v1.9.2), the rendezvous at
``<name>-worker-0:<pytorchjob-port>`` (elastic.go:146-168@v1.9.2), the node ranks assigned by torchrun's c10d
rendezvous, so global rank 0 (the side effects) may run on any Worker pod.

API facts (github.com/kubeflow/trainer at v1.9.2, the Training Operator v1):
- group/version/plural kubeflow.org/v1 pytorchjobs; ``nprocPerNode`` is a *string
  (pkg/apis/kubeflow.org/v1/pytorch_types.go:95@v1.9.2);
- ``elasticPolicy`` (pytorch_types.go:82@v1.9.2) with ``rdzvBackend`` c10d (pytorch_types.go:107,146@v1.9.2) and
  ``maxRestarts`` (pytorch_types.go:123@v1.9.2): elastic restarts live here, and only here (Trainer v2 has none);
- pod labels training.kubeflow.org/job-name and training.kubeflow.org/replica-type
  (pkg/apis/kubeflow.org/v1/common_types.go:28,34@v1.9.2);
- without a Master the operator sets no PET_NODE_RANK/PET_MASTER_ADDR (pkg/controller.v1/pytorch/envvar.go:66-97@
  v1.9.2) but PET_RDZV_ENDPOINT/PET_RDZV_BACKEND/PET_NNODES (elastic.go:78-91@v1.9.2);
- with an elasticPolicy the job is Succeeded once any Worker succeeds (pytorchjob_controller.go:404-417@v1.9.2):
  torchrun's exit barrier keeps each node's agent until every node's workers are done (torch 2.14
  distributed/elastic/agent/server/api.py:936-938,976-1013, exit_barrier_timeout 300 s).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from torchtfx.components.torch_trainer.cluster import pod_spec
from torchtfx.components.torch_trainer.cluster.lifeline import MODULE as LIFELINE_MODULE
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import DEFAULT_BACKOFF_LIMIT, PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.constants import WORKER_MODULE

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
        logger.info("Not in a pod (no %s): job namespace %s", SERVICE_ACCOUNT_NAMESPACE, namespace)
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
    # On a PyTorchJob (Workers + elasticPolicy) the operator sets PET_NNODES "min:max", PET_NPROC_PER_NODE,
    # PET_RDZV_ENDPOINT, PET_RDZV_BACKEND and PET_MAX_RESTARTS (pytorch/envvar.go:99-116, elastic.go:78-98@v1.9.2);
    # on a TrainJob the torch plugin sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT
    # (trainer pkg/runtime/framework/plugins/torch/torch.go:135-158@v2.1.0). torchrun reads PET_<OPTION> as each
    # option's default.
    return [
        "python",
        "-m",
        "torch.distributed.run",
        f"--max-restarts={max_restarts}",
        "-m",
        LIFELINE_MODULE,
        "--unless-exists",
        fatal_marker,
        "python",
        "-u",
        "-m",
        WORKER_MODULE,
        "--job",
        job_path,
    ]


def _container(settings: PyTorchJobSettings, command: list[str]) -> dict[str, Any]:
    return {
        "name": CONTAINER,
        "image": settings.image,
        "command": command,
        "env": pod_spec.container_env(settings),
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
        "resources": pod_spec.resources(settings),
        "volumeMounts": pod_spec.volume_mounts(settings),
        "securityContext": pod_spec.container_security_context(),
    }


def _pod_template(settings: PyTorchJobSettings, command: list[str], labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [_container(settings, command)],
        "volumes": pod_spec.volumes(settings),
        "securityContext": pod_spec.pod_security_context(settings),
        **pod_spec.scheduling(settings),
    }
    metadata = {"labels": dict(labels), "annotations": dict(pod_spec.POD_ANNOTATIONS)}
    return {"metadata": metadata, "spec": spec}


def build_manifest(settings: PyTorchJobSettings, name: str, command: list[str], labels: dict[str, str]) -> dict:
    """A kubeflow.org/v1 PyTorchJob: ``num_nodes`` Workers and an elasticPolicy (no Master: see the module doc),
    bounded by elastic_min/max_nodes, or fixed at num_nodes (min = max) when those are not set."""
    template = _pod_template(settings, command, labels)
    worker = {"replicas": settings.num_nodes, "restartPolicy": "OnFailure", "template": template}
    spec: dict[str, Any] = {
        "nprocPerNode": str(settings.nproc_per_node),  # the v1 API types it as *string
        "pytorchReplicaSpecs": {"Worker": worker},
        "elasticPolicy": {
            "minReplicas": settings.elastic_min_nodes if settings.elastic else settings.num_nodes,
            "maxReplicas": settings.elastic_max_nodes if settings.elastic else settings.num_nodes,
            "rdzvBackend": "c10d",
            "maxRestarts": settings.max_restarts,
        },
    }
    # cleanPodPolicy None: pods stay until PyTorchJobRunner deletes the job, so a failed replica's log can be
    # read first (with OnFailure a crashed container restarts in place and its pod never leaves Running).
    spec["runPolicy"] = {
        "backoffLimit": DEFAULT_BACKOFF_LIMIT if settings.backoff_limit is None else settings.backoff_limit,
        "activeDeadlineSeconds": settings.timeout_seconds,
        "cleanPodPolicy": "None",
        "ttlSecondsAfterFinished": _TTL_AFTER_FINISHED,
    }
    metadata = {"name": name, "namespace": job_namespace(settings.namespace), "labels": dict(labels)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}
