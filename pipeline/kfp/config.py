"""The Kubeflow deployment configuration (``kubeflow/pools.yaml``): image, storage, node pools, resources,
Beam args and the Trainer's GPUs, parsed by the project's one config mechanism before anything is compiled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pydantic

from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE, UNREACHABLE_POLICIES, redact
from torchtfx.components.torch_trainer.public import Toleration, TrainerHParams, VolumeMount
from torchtfx.data.config.strict import ConfigError, StrictConfig, load_yaml, one_of
from torchtfx.pipeline.kfp.beam_workers import WORKERS_FLAG, is_node_wide_worker_count
from torchtfx.pipeline.kfp.checkpoints import kubeflow_checkpoint_fix
from torchtfx.pipeline.kfp.pipeline_root import MULTI_USER_POLICY_BACKEND, check_multi_user_root
from torchtfx.pipeline.kfp.values import (
    EMPTY_DIR_BACKEND,
    SECURITY_CONTEXT_BACKEND,
    check_data_root,
    check_location,
    check_pipeline_root,
    check_requests,
    check_secret_name,
    memory_quantity,
    parse_backend,
    parse_memory_gb,
)
from torchtfx.pipeline.settings.declared import KUBEFLOW
from torchtfx.pipeline.settings.layers import Layer
from torchtfx.pipeline.settings.resolve import ResolvedSettings, pools_layer, resolve_settings, show_path

# Keys and values that must never reach a compiled spec: credentials belong in Kubernetes secrets.
_CREDENTIAL = re.compile(r"(password|passwd|secret|token|api[_-]?key|access[_-]?key|credential)", re.I)


class KubeflowConfigError(ConfigError):
    """The Kubeflow configuration file is invalid; the message names the key."""


class _KubeflowSection(StrictConfig):
    config_error = KubeflowConfigError


def _memory_fields(*fields: str):
    """Kubernetes memory quantities; an optional one (a request) may be None."""
    return pydantic.field_validator(*fields, mode="before")(
        staticmethod(lambda value: value if value is None else memory_quantity(value))
    )


class _CpuMemory(_KubeflowSection):
    """CPU and memory of a pod: ``cpu``/``memory`` are the limits; ``cpu_request``/``memory_request`` what the
    scheduler reserves (default: the limits, which is what Kubernetes makes of a limit without a request)."""

    cpu: pydantic.PositiveFloat
    memory: str
    cpu_request: pydantic.PositiveFloat | None = None
    memory_request: str | None = None

    _memory = _memory_fields("memory", "memory_request")

    @pydantic.model_validator(mode="after")
    def _requests_within_limits(self) -> _CpuMemory:
        check_requests(self.cpu, self.cpu_request, self.memory, self.memory_request)
        return self


class Resources(_CpuMemory):
    """A step's CPU and memory (limits and requests)."""

    @property
    def memory_gb(self) -> float:
        return parse_memory_gb(self.memory)

    @property
    def memory_request_gb(self) -> float | None:
        return None if self.memory_request is None else parse_memory_gb(self.memory_request)

    @property
    def scheduled_cpu(self) -> float:
        """The CPUs the scheduler reserves: the request, else the limit."""
        return self.cpu if self.cpu_request is None else self.cpu_request

    @property
    def scheduled_memory_gb(self) -> float:
        return self.memory_gb if self.memory_request_gb is None else self.memory_request_gb


DEFAULT_RESOURCES = Resources(cpu=2, memory="8Gi")


class NodePool(_KubeflowSection):
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()


class ElasticNodes(_KubeflowSection):
    min_nodes: pydantic.PositiveInt
    max_nodes: pydantic.PositiveInt

    @pydantic.model_validator(mode="after")
    def _ordered(self) -> ElasticNodes:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"needs 1 <= min_nodes <= max_nodes, got ({self.min_nodes}, {self.max_nodes})")
        return self


class TrainerDeployment(_CpuMemory):
    node_pool: str = "gpu"
    gpu_type: str = "nvidia.com/gpu"
    gpus_per_node: pydantic.NonNegativeInt = 1
    cpu: pydantic.PositiveFloat = 8  # limit
    memory: str = "32Gi"  # limit
    num_nodes: pydantic.PositiveInt = 1  # > 1: the Trainer step runs a PyTorchJob
    # The PyTorchJob's namespace; None: the Trainer step's own (the run's namespace, where its PVC and secrets
    # are on multi-user Kubeflow), read at run time from the pod's service account.
    namespace: str | None = None
    elastic: ElasticNodes | None = None
    # The PyTorchJob's runPolicy.backoffLimit; None: 3 there. A TrainJob has no such field (kubeflow/README.md),
    # so a value set here makes the Trainer step use the PyTorchJob where served, and refuse a TrainJob.
    backoff_limit: pydantic.NonNegativeInt | None = None
    timeout_minutes: pydantic.PositiveInt = 240
    hyperparameters: TrainerHParams = TrainerHParams()

    @property
    def resources(self) -> Resources:
        return Resources(
            cpu=self.cpu, memory=self.memory, cpu_request=self.cpu_request, memory_request=self.memory_request
        )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _one_home_for_restarts(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_restarts" in data:
            raise ValueError(
                "trainer.max_restarts is set under trainer.hyperparameters.max_restarts (one setting, for local and "
                "Kubeflow runs alike: torchrun's restarts per pod after a worker dies); move it there"
            )
        return data


class MlflowDeployment(_KubeflowSection):
    tracking_uri: str  # the address only; credentials come from credentials_secret
    credentials_secret: str | None = None
    secret_keys: dict[str, str] = {}  # secret key -> environment variable
    unreachable: str = FAIL_IF_UNREACHABLE  # or CONTINUE_IF_UNREACHABLE

    @pydantic.field_validator("tracking_uri")
    @classmethod
    def _address_only(cls, uri: str) -> str:
        if not uri:
            raise ValueError("mlflow.tracking_uri is required (the MLflow server's address)")
        # The logs' redaction rule decides, so a password holding an unencoded '/' or '#' is caught here too.
        if redact(uri) != uri:
            raise ValueError(
                "mlflow.tracking_uri carries credentials (user:password@ or a secret query parameter); put them "
                "in the Kubernetes secret named by mlflow.credentials_secret instead"
            )
        return uri

    _known_policy = one_of("unreachable", UNREACHABLE_POLICIES)


def _location(key: str, *, filesystem_only: bool = False):
    def check(cls, value: str) -> str:
        return check_location(value, key, filesystem_only=filesystem_only)

    return pydantic.field_validator(key)(classmethod(check))


class KubeflowSettings(_KubeflowSection):
    image: str
    # The open-source KFP backend version of the cluster: which PlatformSpec fields compile may use.
    kfp_backend: str = "2.1"
    project_root: str  # where the image holds the project (schemas, dataset configs)
    dataset: str = "taxi"
    # May hold {namespace}, filled in by `torchtfx submit` (pipeline_root.py).
    pipeline_root: str
    # Multi-user Kubeflow (profile namespaces; the Kubeflow default): from backend 2.15 a namespace writes only
    # under its allowed prefixes of the in-cluster bucket, which the pipeline root must respect.
    multi_user: bool = True
    data_root: str
    serving_dir: str
    # The TF Serving deployment's gRPC address (kubeflow/serving/tf-serving.yaml): the Promoter moves the
    # stable/canary labels only once it reports the new version AVAILABLE. None: the move waits for
    # `torchtfx promote --finish`.
    serving_address: str | None = None
    volumes: tuple[VolumeMount, ...] = ()
    mlflow: MlflowDeployment
    node_pools: dict[str, NodePool]
    resources: dict[str, Resources] = {}  # component id (or "default") -> limits and requests
    beam_args: tuple[str, ...] = ()
    # Secrets (type kubernetes.io/dockerconfigjson) in the run's namespace for pulling the image: every step's
    # pod (PlatformSpec imagePullSecret) and the Trainer's PyTorchJob pods.
    image_pull_secrets: tuple[str, ...] = ()
    trainer: TrainerDeployment = TrainerDeployment()
    _source: str = pydantic.PrivateAttr("<dict>")
    _raw: dict[str, Any] = pydantic.PrivateAttr(default_factory=dict)  # the file as read: which keys it names

    _project_root = _location("project_root", filesystem_only=True)
    _serving_dir = _location("serving_dir", filesystem_only=True)

    @pydantic.field_validator("image")
    @classmethod
    def _pinned(cls, image: str) -> str:
        if not image or image.endswith(":latest") or (":" not in image.rsplit("/", 1)[-1] and "@" not in image):
            raise ValueError(f"'image' must be pinned to a tag or digest (not :latest), got {image!r}")
        return image

    @pydantic.field_validator("data_root")
    @classmethod
    def _readable(cls, value: str) -> str:
        return check_data_root(value)

    @pydantic.field_validator("pipeline_root")
    @classmethod
    def _bucket(cls, value: str) -> str:
        return check_pipeline_root(value)

    @pydantic.field_validator("kfp_backend", mode="before")
    @classmethod
    def _known_backend(cls, value: Any) -> str:
        if not isinstance(value, str):  # YAML reads 2.10 as the number 2.1
            raise ValueError(f"'kfp_backend' must be quoted, e.g. \"2.3\" (YAML reads an unquoted {value} as a number)")
        parse_backend(value)
        return value.strip()

    @pydantic.field_validator("node_pools")
    @classmethod
    def _has_cpu_pool(cls, pools: dict[str, NodePool]) -> dict[str, NodePool]:
        if "cpu" not in pools:
            raise ValueError(f"node_pools needs at least a 'cpu' pool, got {sorted(pools)}")
        return pools

    @pydantic.field_validator("resources")
    @classmethod
    def _with_default(cls, resources: dict[str, Resources]) -> dict[str, Resources]:
        return {"default": DEFAULT_RESOURCES, **resources}

    @pydantic.field_validator("beam_args")
    @classmethod
    def _no_credentials(cls, beam_args: tuple[str, ...]) -> tuple[str, ...]:
        for arg in beam_args:
            flag = arg.split("=", 1)[0]
            if _CREDENTIAL.search(flag) or redact(arg) != arg:
                raise ValueError(
                    f"{flag!r} looks like a credential; compiled specs must not carry secrets. "
                    "Use the pod's service account (workload identity) or a Kubernetes secret instead."
                )
        if is_node_wide_worker_count(beam_args):
            raise ValueError(
                f"beam_args: {WORKERS_FLAG}=0 starts one Beam worker per CPU of the node (multiprocessing."
                "cpu_count() in a container is the node's), not of the step's pod, and runs it out of memory. "
                f"Remove it: each step sets {WORKERS_FLAG} from its own pod's CPU limit at run time "
                "(pipeline/kfp/beam_workers.py); or give a fixed positive count"
            )
        return beam_args

    @pydantic.field_validator("image_pull_secrets")
    @classmethod
    def _secret_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_secret_name(name) for name in names)

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> KubeflowSettings:
        if self.trainer.node_pool not in self.node_pools:
            raise ValueError(f"trainer.node_pool {self.trainer.node_pool!r} is not defined under node_pools")
        # Also guarantees the shared volume that multi-node training stages its data on.
        self._check_on_volume("serving_dir", self.serving_dir)
        if self.multi_user and parse_backend(self.kfp_backend) >= MULTI_USER_POLICY_BACKEND:
            check_multi_user_root(self.pipeline_root)
        trainer = self.trainer
        if trainer.num_nodes == 1 and trainer.gpus_per_node > 1 and not self.mounts_shm:
            # A pod's /dev/shm is 64 MiB; NCCL's intra-node transport and DataLoader workers need far more.
            raise ValueError(
                f"trainer: gpus_per_node: {trainer.gpus_per_node} with num_nodes: 1 runs {trainer.gpus_per_node} "
                "DDP workers in one pod, which needs a memory-backed /dev/shm larger than the 64 MiB a pod gets "
                "(NCCL fails without it). Backends before 2.3 cannot mount one (no emptyDirMounts). Set "
                "kfp_backend: '2.3' (or the newer version the cluster runs), or gpus_per_node: 1, or "
                "num_nodes: 2 or more (a PyTorchJob, whose pods get one)"
            )
        return self

    def _check_on_volume(self, key: str, path: str) -> None:
        mounts = [v.mount_path for v in self.volumes]
        if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
            raise ValueError(
                f"'{key}' {path} is not on a mounted volume ({', '.join(mounts) or 'no volumes'}); "
                "a path outside the volumes vanishes with the step's pod. Add a volume or move the path into one."
            )

    @property
    def source(self) -> str:
        """The file these settings came from, for messages."""
        return self._source

    @property
    def raw(self) -> dict[str, Any]:
        """The file as read, for which settings it names (pipeline/settings/layers.py)."""
        return self._raw

    @property
    def mounts_shm(self) -> bool:
        """Whether the backend mounts PlatformSpec emptyDirMounts (a memory-backed /dev/shm)."""
        return parse_backend(self.kfp_backend) >= EMPTY_DIR_BACKEND

    @property
    def sets_security_context(self) -> bool:
        """Whether the backend applies a PlatformSpec securityContext (runAsUser/runAsGroup/runAsNonRoot)."""
        return parse_backend(self.kfp_backend) >= SECURITY_CONTEXT_BACKEND

    def resources_for(self, component_id: str) -> Resources:
        return self.resources.get(component_id, self.resources["default"])


def settings_from_dict(raw: dict[str, Any], where: str = "<dict>") -> KubeflowSettings:
    settings = KubeflowSettings.parse(raw, where)
    settings._source = where
    settings._raw = raw
    return settings


def load_kubeflow_settings(path: Path, kfp_backend: str | None = None) -> KubeflowSettings:
    """``path``'s settings; ``kfp_backend`` (``compile --kfp-backend``) replaces the file's, checked the same way."""
    path = Path(path)
    if not path.is_file():
        raise KubeflowConfigError(f"Kubeflow config {path} does not exist (start from kubeflow/pools.yaml)")
    raw = load_yaml(path, KubeflowConfigError)
    return settings_from_dict(raw if kfp_backend is None else {**raw, "kfp_backend": kfp_backend}, str(path))


def resolved_for_kubeflow(settings: KubeflowSettings, command_line: Layer | None = None) -> ResolvedSettings:
    """Every setting of a Kubeflow run: ``command_line`` over these ``pools.yaml`` settings over the dataset YAML
    over the default (pipeline/settings/resolve.py)."""
    pools = pools_layer(show_path(settings.source), settings.raw, settings)
    with kubeflow_checkpoint_fix():
        return resolve_settings(KUBEFLOW, command_line, pools)
