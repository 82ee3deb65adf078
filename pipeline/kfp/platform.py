"""The kfp-kubernetes PlatformSpec that ``torchtfx compile`` appends to the pipeline spec: node pool,
tolerations, volumes, secrets, image pull secrets, shared memory and (backend 2.16+) the container's user per
executor label.

Only fields of ``kubernetes_executor_config.proto`` that the configured backend (``kfp_backend``) knows are
written: the 2.1-2.4 drivers parse each executor's config strictly (``jsonpb.UnmarshalString``) and fail the
step on an unknown field; 2.5 drops it; from 2.14 the API server's workflow compiler parses it with a strict
``protojson.Unmarshal`` and refuses the run (backend/src/v2/compiler/argocompiler/container.go:285@2.14.0,
:309@2.15.0). ``torchtfx submit`` refuses a package compiled for a newer backend than the server's (submit.py).
tests/unit/pipeline/kfp/test_platform_spec.py checks the keys against the proto's field names at those backends."""

from __future__ import annotations

from typing import Any

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.public import PyTorchJobSettings
from torchtfx.pipeline.kfp.config import KubeflowSettings

# A memory-backed /dev/shm for DDP workers sharing one pod: a pod gets 64 MiB, and NCCL's intra-node
# transport (and DataLoader workers) need more. Same volume as the PyTorchJob pods' (pytorchjob_manifest.py).
SHM_MOUNT = {"volumeName": "dshm", "mountPath": "/dev/shm", "medium": "Memory"}
# The user every step runs as (kubeflow/Dockerfile APP_UID, the PyTorchJob pods' run_as_user). Pod Security
# "restricted" needs runAsNonRoot; from 2.16 the backend itself adds seccompProfile RuntimeDefault, no privilege
# escalation and drops all capabilities (backend/src/v2/compiler/argocompiler/security_context.go@2.16.0,
# applied to executor pods at container.go:568@2.16.0; the driver drops ALL again at k8s.go:758@2.16.0).
IMAGE_UID = PyTorchJobSettings.default_of("run_as_user")
STEP_SECURITY_CONTEXT = {"runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID, "runAsNonRoot": True}


def executor_label(component_id: str) -> str:
    """The deploymentSpec key TFX emits for a component."""
    return f"{component_id}_executor"


def mlflow_secret_env(settings: KubeflowSettings) -> list[dict[str, Any]]:
    mlflow = settings.mlflow
    if not mlflow.credentials_secret:
        return []
    keys = [{"secretKey": key, "envVar": env} for key, env in sorted(mlflow.secret_keys.items())]
    return [{"secretName": mlflow.credentials_secret, "keyToEnv": keys}]


def image_pull_secrets(settings: KubeflowSettings) -> list[dict[str, str]]:
    """``imagePullSecret``: read by every backend this project supports (backend/src/v2/driver/driver.go:589-590
    @2.1.0 ... k8s.go:492-512@2.17.0, where ``secretName`` is deprecated in favour of a parameter but still
    honoured)."""
    return [{"secretName": name} for name in settings.image_pull_secrets]


def _trains_in_pod(settings: KubeflowSettings, component_id: str) -> bool:
    return component_id == contracts.TRAINER_ID and settings.trainer.num_nodes == 1


def _executor_config(settings: KubeflowSettings, component_id: str) -> dict[str, Any]:
    in_pod = _trains_in_pod(settings, component_id)
    pool = settings.node_pools[settings.trainer.node_pool if in_pod else "cpu"]
    config: dict[str, Any] = {}
    if pool.node_selector:
        config["nodeSelector"] = {"labels": dict(pool.node_selector)}
    if pool.tolerations:
        config["tolerations"] = [t.to_k8s() for t in pool.tolerations]
    if settings.volumes:
        config["pvcMount"] = [{"constant": v.claim_name, "mountPath": v.mount_path} for v in settings.volumes]
    if component_id in contracts.MLFLOW_STEP_IDS and mlflow_secret_env(settings):
        config["secretAsEnv"] = mlflow_secret_env(settings)
    if in_pod and settings.trainer.gpus_per_node > 1:
        # KubeflowSettings refuses this combination on a backend that cannot mount it.
        config["emptyDirMounts"] = [dict(SHM_MOUNT)]
    if settings.image_pull_secrets:
        config["imagePullSecret"] = image_pull_secrets(settings)
    if settings.sets_security_context:
        config["securityContext"] = dict(STEP_SECURITY_CONTEXT)
    return config


def platform_spec(settings: KubeflowSettings, component_ids: list[str]) -> dict[str, Any]:
    """The PlatformSpec document: one kubernetes executor config per executor label."""
    executors = {executor_label(c): _executor_config(settings, c) for c in component_ids}
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}
