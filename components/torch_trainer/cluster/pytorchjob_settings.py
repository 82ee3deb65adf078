"""Where and how the nodes of a multi-node job (PyTorchJob or TrainJob) run: typed, validated settings (one config
mechanism, shared with kubeflow/pools.yaml's node pools, whose tolerations are these)."""

from __future__ import annotations

import re

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_secret_name(name: str) -> bool:
    """A Kubernetes Secret's name: a DNS-1123 subdomain of at most 253 characters."""
    return bool(_DNS1123_SUBDOMAIN.match(name or "")) and len(name) <= 253


TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class PyTorchJobConfigError(ConfigError):
    """The multi-node job settings (or the Kubernetes client configuration) are unusable."""


class _ClusterSection(StrictConfig):
    config_error = PyTorchJobConfigError


class Toleration(_ClusterSection):
    """A Kubernetes toleration, checked by the API server's rules."""

    model_config = pydantic.ConfigDict(coerce_numbers_to_str=True)

    key: str
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None

    @pydantic.model_validator(mode="after")
    def _kubernetes_rules(self) -> Toleration:
        if self.operator not in TOLERATION_OPERATORS:
            raise ValueError(f"toleration {self.to_k8s()}: operator must be Equal or Exists")
        if self.effect not in (None, "", *TOLERATION_EFFECTS):
            raise ValueError(f"toleration {self.to_k8s()}: effect must be one of {TOLERATION_EFFECTS} or empty")
        if self.operator == "Exists" and self.value:
            raise ValueError(f"toleration {self.to_k8s()}: operator Exists takes no value")
        return self

    @pydantic.model_serializer(mode="wrap")
    def _as_kubernetes_writes_it(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict[str, str]:
        return {k: v for k, v in handler(self).items() if v is not None}  # no "value: null" in specs

    def to_k8s(self) -> dict[str, str]:
        return self.model_dump()


class VolumeMount(_ClusterSection):
    """A PersistentVolumeClaim mounted at the same path in every step and replica."""

    claim_name: pydantic.constr(min_length=1)
    mount_path: str

    @pydantic.field_validator("mount_path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"volume mount_path {path!r}: needs a claim_name and an absolute mount_path")
        return path


class SecretEnv(_ClusterSection):
    """An environment variable filled from a Kubernetes secret's key (the value never enters a spec)."""

    secret: str = ""
    key: str = ""
    env: str = ""

    @pydantic.model_validator(mode="after")
    def _complete(self) -> SecretEnv:
        if not (self.secret and self.key and self.env):
            raise ValueError(f"env_from_secrets entry {self.model_dump()} needs secret, key and env")
        return self


DEFAULT_BACKOFF_LIMIT = 3


def cpu_cores(quantity: str) -> float:
    try:
        return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return 0.0


class PyTorchJobSettings(_ClusterSection):
    """Where and how the DDP replicas run; PVCs in ``volumes`` hold the job file, arrays and outputs."""

    # None: the namespace of the pod that creates the job (the KFP run's namespace; see job_namespace).
    namespace: str | None = None
    image: str
    num_nodes: int
    nproc_per_node: int = 1
    gpus_per_node: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "4"
    memory: str = "16Gi"
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    volumes: tuple[VolumeMount, ...] = ()
    env_from_secrets: tuple[SecretEnv, ...] = ()
    elastic_min_nodes: int | None = None
    elastic_max_nodes: int | None = None
    max_restarts: int = 3
    backoff_limit: int | None = None  # the PyTorchJob's runPolicy.backoffLimit; None: DEFAULT_BACKOFF_LIMIT
    timeout_seconds: int = 24 * 3600
    poll_seconds: float = 10.0
    service_account: str | None = None
    # Secrets (kubernetes.io/dockerconfigjson) in the job's namespace that let the nodes pull ``image``.
    image_pull_secrets: tuple[str, ...] = ()
    run_as_user: int = 1000

    @property
    def elastic(self) -> bool:
        return self.elastic_min_nodes is not None or self.elastic_max_nodes is not None

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> PyTorchJobSettings:
        """Name the first invalid setting."""
        lo, hi, n = self.elastic_min_nodes, self.elastic_max_nodes, self.num_nodes
        checks = [
            (bool(self.image.strip()), "image must be a non-empty container image reference"),
            (
                self.namespace is None or (bool(_DNS1123.match(self.namespace)) and len(self.namespace) <= 63),
                f"namespace {self.namespace!r} is not a DNS-1123 label (lowercase alphanumerics and '-', <= 63)",
            ),
            (n >= 2, f"num_nodes must be >= 2 for a multi-node job (got {n}); one node uses the local torchrun path"),
            (self.nproc_per_node >= 1, f"nproc_per_node must be >= 1 (got {self.nproc_per_node})"),
            (self.gpus_per_node >= 0, f"gpus_per_node must be >= 0 (got {self.gpus_per_node})"),
            (self.max_restarts >= 0 and (self.backoff_limit or 0) >= 0, "max_restarts and backoff_limit must be >= 0"),
            (self.timeout_seconds > 0 and self.poll_seconds > 0, "timeout_seconds and poll_seconds must be > 0"),
            (
                all(is_secret_name(s) for s in self.image_pull_secrets),
                f"image_pull_secrets {list(self.image_pull_secrets)}: each must be a Secret name (DNS-1123 subdomain)",
            ),
            (self.run_as_user > 0, f"run_as_user must be a non-root UID > 0 (got {self.run_as_user})"),
            (cpu_cores(self.cpu) > 0, f"cpu {self.cpu!r} is not a positive Kubernetes CPU quantity"),
            ((lo is None) == (hi is None), "elastic_min_nodes and elastic_max_nodes must be set together"),
            (lo is None or hi is None or 1 <= lo <= hi, f"elastic nodes need 1 <= min <= max (got {lo}, {hi})"),
            (lo is None or hi is None or lo <= n <= hi, f"num_nodes={n} must lie within elastic [{lo}, {hi}]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self
