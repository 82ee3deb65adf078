"""The pod-spec pieces every multi-node job shares, whichever API creates the pods (kubeflow.org/v1 PyTorchJob or
trainer.kubeflow.org/v1alpha1 TrainJob): the training container's environment, resources and mounts, the volumes,
scheduling, image pull secrets, and the security contexts that Pod Security "restricted" admits.

Pod Security "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards) wants runAsNonRoot, a
RuntimeDefault (or Localhost) seccomp profile, allowPrivilegeEscalation false and all capabilities dropped; the image
runs as UID 1000 (kubeflow/Dockerfile: USER ${APP_UID}). Each container carries its own copy, so a container-level
context alone is enough where an API can only set that one.
"""

from __future__ import annotations

from typing import Any

from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings, cpu_cores

SHM_VOLUME = "dshm"  # NCCL and DataLoader workers need more than the 64Mi /dev/shm a pod gets
# An Istio sidecar would keep finished pods alive and intercept the rendezvous traffic.
POD_ANNOTATIONS = {"sidecar.istio.io/inject": "false"}
RUNTIME_DEFAULT_SECCOMP = {"type": "RuntimeDefault"}


def pod_security_context(settings: PyTorchJobSettings) -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": settings.run_as_user, "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP),
    }


def container_env(settings: PyTorchJobSettings) -> list[dict[str, Any]]:
    """OMP threads per worker process, unbuffered output, and the secrets as env (never their values)."""
    threads = max(1, int(cpu_cores(settings.cpu)) // settings.nproc_per_node)
    env: list[dict[str, Any]] = [
        {"name": "OMP_NUM_THREADS", "value": str(threads)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    env += [
        {"name": r.env, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}}
        for r in settings.env_from_secrets
    ]
    return env


def resources(settings: PyTorchJobSettings) -> dict[str, dict[str, str]]:
    requests = {"cpu": settings.cpu, "memory": settings.memory}
    limits = dict(requests)
    if settings.gpus_per_node > 0:
        limits[settings.gpu_resource] = str(settings.gpus_per_node)  # a quantity; requests default to limits
    return {"limits": limits, "requests": requests}


def volume_mounts(settings: PyTorchJobSettings) -> list[dict[str, str]]:
    mounts = [{"name": f"data-{i}", "mountPath": v.mount_path} for i, v in enumerate(settings.volumes)]
    return [*mounts, {"name": SHM_VOLUME, "mountPath": "/dev/shm"}]


def volumes(settings: PyTorchJobSettings) -> list[dict[str, Any]]:
    claims = [
        {"name": f"data-{i}", "persistentVolumeClaim": {"claimName": v.claim_name}}
        for i, v in enumerate(settings.volumes)
    ]
    return [*claims, {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]


def scheduling(settings: PyTorchJobSettings) -> dict[str, Any]:
    """nodeSelector, tolerations, serviceAccountName and imagePullSecrets, each only when set."""
    spec: dict[str, Any] = {}
    if settings.node_selector:
        spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        spec["tolerations"] = [t.to_k8s() for t in settings.tolerations]
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    return spec
