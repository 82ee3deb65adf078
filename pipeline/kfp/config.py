"""The Kubeflow deployment configuration (``kubeflow/pools.yaml``): image, storage, node pools, resources,
Beam args and the Trainer's GPUs, as typed dataclasses validated before anything is compiled."""

from __future__ import annotations

import dataclasses
import posixpath
import re
from pathlib import Path
from typing import Any

import yaml

from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE, UNREACHABLE_POLICIES
from torchtfx.components.torch_trainer.hparams import HParamsError, TrainerHParams

REMOTE_SCHEMES = ("gs://", "s3://", "minio://")
_MEMORY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
# Keys and values that must never reach a compiled spec: credentials belong in Kubernetes secrets.
_CREDENTIAL = re.compile(r"(password|passwd|secret|token|api[_-]?key|access[_-]?key|credential)", re.I)
_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@]+@", re.I)
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class KubeflowConfigError(ValueError):
    """The Kubeflow configuration file is invalid; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Resources:
    cpu: float
    memory_gb: float  # decimal gigabytes: the unit of PipelineSpec's ResourceSpec.memory_limit


@dataclasses.dataclass(frozen=True)
class NodePool:
    node_selector: dict[str, str]
    tolerations: tuple[dict[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Volume:
    claim_name: str
    mount_path: str


@dataclasses.dataclass(frozen=True)
class TrainerDeployment:
    node_pool: str
    gpu_type: str
    gpus_per_node: int
    resources: Resources
    num_nodes: int
    namespace: str
    elastic: tuple[int, int] | None  # (min_nodes, max_nodes)
    max_restarts: int
    backoff_limit: int
    timeout_minutes: int
    hparams: TrainerHParams


@dataclasses.dataclass(frozen=True)
class MlflowDeployment:
    tracking_uri: str
    credentials_secret: str | None
    secret_keys: dict[str, str]  # secret key -> environment variable
    unreachable: str = "fail"  # fail | continue, see torchtfx.components.shared.mlflow_client


@dataclasses.dataclass(frozen=True)
class KubeflowSettings:
    image: str
    project_root: str
    dataset: str
    pipeline_root: str
    data_root: str
    serving_dir: str
    volumes: tuple[Volume, ...]
    mlflow: MlflowDeployment
    node_pools: dict[str, NodePool]
    resources: dict[str, Resources]  # component id (or "default") -> limits
    beam_args: tuple[str, ...]
    trainer: TrainerDeployment
    source: str = "<dict>"

    def resources_for(self, component_id: str) -> Resources:
        return self.resources.get(component_id, self.resources["default"])


def parse_memory_gb(value: Any, where: str) -> float:
    match = _MEMORY.match(str(value).strip())
    if not match:
        raise KubeflowConfigError(f"{where}: memory {value!r} is not a quantity like 16Gi, 512Mi or 8G")
    number, unit = float(match.group(1)), match.group(2)
    return round(number * _MEMORY_UNITS.get(unit, 1) / 1e9, 3) if unit else round(number / 1e9, 3)


def _resources(raw: Any, where: str) -> Resources:
    if not isinstance(raw, dict) or set(raw) - {"cpu", "memory"} or not {"cpu", "memory"} <= set(raw):
        raise KubeflowConfigError(f"{where}: expected {{cpu: <cores>, memory: <quantity>}}, got {raw!r}")
    try:
        cpu = float(raw["cpu"])
    except (TypeError, ValueError):
        raise KubeflowConfigError(f"{where}: cpu {raw['cpu']!r} is not a number of cores") from None
    if cpu <= 0:
        raise KubeflowConfigError(f"{where}: cpu must be > 0, got {cpu}")
    return Resources(cpu=cpu, memory_gb=parse_memory_gb(raw["memory"], where))


def _toleration(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict) or "key" not in raw:
        raise KubeflowConfigError(f"{where}: a toleration needs at least 'key', got {raw!r}")
    operator = raw.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        raise KubeflowConfigError(f"{where}: toleration operator {operator!r} is not one of {TOLERATION_OPERATORS}")
    effect = raw.get("effect")
    if effect is not None and effect not in TOLERATION_EFFECTS:
        raise KubeflowConfigError(f"{where}: toleration effect {effect!r} is not one of {TOLERATION_EFFECTS}")
    return {k: str(v) for k, v in raw.items() if k in ("key", "operator", "value", "effect")} | {"operator": operator}


def _node_pools(raw: Any, where: str) -> dict[str, NodePool]:
    if not isinstance(raw, dict) or "cpu" not in raw:
        raise KubeflowConfigError(f"{where}: node_pools needs at least a 'cpu' pool, got {raw!r}")
    pools = {}
    for name, pool in raw.items():
        if not isinstance(pool, dict) or not isinstance(pool.get("node_selector", {}), dict):
            raise KubeflowConfigError(f"{where}: node_pools.{name} needs a node_selector mapping")
        tolerations = tuple(_toleration(t, f"{where}: node_pools.{name}") for t in pool.get("tolerations") or ())
        selector = {str(k): str(v) for k, v in (pool.get("node_selector") or {}).items()}
        pools[name] = NodePool(node_selector=selector, tolerations=tolerations)
    return pools


def check_location(value: Any, key: str, where: str, *, filesystem_only: bool = False) -> str:
    """An absolute POSIX path (normalized) or, unless ``filesystem_only``, a gs://, s3:// or minio:// URI."""
    if not isinstance(value, str) or not value:
        raise KubeflowConfigError(f"{where}: '{key}' is required")
    if value.startswith(REMOTE_SCHEMES) and not filesystem_only:
        return value.rstrip("/")
    if not value.startswith("/"):
        allowed = "an absolute path" + ("" if filesystem_only else f" or a {', '.join(REMOTE_SCHEMES)} URI")
        raise KubeflowConfigError(f"{where}: '{key}' must be {allowed}, got {value!r}")
    normalized = posixpath.normpath(value)
    if normalized != value.rstrip("/"):
        raise KubeflowConfigError(f"{where}: '{key}' {value!r} is not normalized (did you mean {normalized!r}?)")
    return normalized


def _volumes(raw: Any, where: str) -> tuple[Volume, ...]:
    volumes = []
    for item in raw or ():
        if not isinstance(item, dict) or not item.get("claim_name"):
            raise KubeflowConfigError(f"{where}: each volume needs claim_name and mount_path, got {item!r}")
        volumes.append(Volume(str(item["claim_name"]), check_location(item.get("mount_path"), "mount_path", where)))
    return tuple(volumes)


def _mlflow(raw: Any, where: str) -> MlflowDeployment:
    raw = raw or {}
    uri = str(raw.get("tracking_uri", ""))
    if not uri:
        raise KubeflowConfigError(f"{where}: mlflow.tracking_uri is required (the MLflow server's address)")
    if _USERINFO.match(uri):
        raise KubeflowConfigError(
            f"{where}: mlflow.tracking_uri carries credentials (user:password@); put them in the Kubernetes "
            "secret named by mlflow.credentials_secret instead"
        )
    keys = {str(k): str(v) for k, v in (raw.get("secret_keys") or {}).items()}
    policy = str(raw.get("unreachable", FAIL_IF_UNREACHABLE))
    if policy not in UNREACHABLE_POLICIES:
        raise KubeflowConfigError(f"{where}: mlflow.unreachable must be one of {UNREACHABLE_POLICIES}, got {policy!r}")
    return MlflowDeployment(uri, raw.get("credentials_secret"), keys, policy)


def _trainer(raw: Any, pools: dict[str, NodePool], where: str) -> TrainerDeployment:
    raw = dict(raw or {})
    pool = raw.get("node_pool", "gpu")
    if pool not in pools:
        raise KubeflowConfigError(f"{where}: trainer.node_pool {pool!r} is not defined under node_pools")
    elastic = raw.get("elastic")
    if elastic is not None:
        elastic = (int(elastic["min_nodes"]), int(elastic["max_nodes"]))
    try:
        hparams = TrainerHParams.from_dict(dict(raw.get("hyperparameters") or {}))
    except (HParamsError, TypeError) as err:
        raise KubeflowConfigError(f"{where}: trainer.hyperparameters: {err}") from None
    trainer = TrainerDeployment(
        node_pool=pool,
        gpu_type=str(raw.get("gpu_type", "nvidia.com/gpu")),
        gpus_per_node=int(raw.get("gpus_per_node", 1)),
        resources=_resources({"cpu": raw.get("cpu", 8), "memory": raw.get("memory", "32Gi")}, f"{where}: trainer"),
        num_nodes=int(raw.get("num_nodes", 1)),
        namespace=str(raw.get("namespace", "kubeflow")),
        elastic=elastic,
        max_restarts=int(raw.get("max_restarts", 0)),
        backoff_limit=int(raw.get("backoff_limit", 3)),
        timeout_minutes=int(raw.get("timeout_minutes", 240)),
        hparams=hparams,
    )
    if trainer.num_nodes < 1 or trainer.gpus_per_node < 0 or trainer.max_restarts < 0:
        raise KubeflowConfigError(f"{where}: trainer needs num_nodes >= 1, gpus_per_node >= 0, max_restarts >= 0")
    if elastic and not 1 <= elastic[0] <= elastic[1]:
        raise KubeflowConfigError(f"{where}: trainer.elastic needs 1 <= min_nodes <= max_nodes, got {elastic}")
    return trainer


def _reject_credentials(beam_args: tuple[str, ...], where: str) -> None:
    for arg in beam_args:
        flag = arg.split("=", 1)[0]
        if _CREDENTIAL.search(flag) or _USERINFO.match(arg.split("=", 1)[-1]):
            raise KubeflowConfigError(
                f"{where}: beam_args {flag!r} looks like a credential; compiled specs must not carry secrets. "
                "Use the pod's service account (workload identity) or a Kubernetes secret instead."
            )


_KNOWN_KEYS = {
    "image", "project_root", "dataset", "pipeline_root", "data_root", "serving_dir", "volumes", "mlflow",
    "node_pools", "resources", "beam_args", "trainer",
}  # fmt: skip


def settings_from_dict(raw: dict[str, Any], where: str = "<dict>") -> KubeflowSettings:
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise KubeflowConfigError(f"{where}: unknown keys {unknown}; known: {', '.join(sorted(_KNOWN_KEYS))}")
    image = str(raw.get("image", ""))
    if not image or image.endswith(":latest") or (":" not in image.rsplit("/", 1)[-1] and "@" not in image):
        raise KubeflowConfigError(f"{where}: 'image' must be pinned to a tag or digest (not :latest), got {image!r}")
    pools = _node_pools(raw.get("node_pools"), where)
    resources = {str(k): _resources(v, f"{where}: resources.{k}") for k, v in (raw.get("resources") or {}).items()}
    resources.setdefault("default", Resources(cpu=2.0, memory_gb=parse_memory_gb("8Gi", where)))
    beam_args = tuple(str(a) for a in raw.get("beam_args") or ())
    _reject_credentials(beam_args, where)
    settings = KubeflowSettings(
        image=image,
        project_root=check_location(raw.get("project_root"), "project_root", where, filesystem_only=True),
        dataset=str(raw.get("dataset", "taxi")),
        pipeline_root=check_location(raw.get("pipeline_root"), "pipeline_root", where),
        data_root=check_location(raw.get("data_root"), "data_root", where),
        serving_dir=check_location(raw.get("serving_dir"), "serving_dir", where, filesystem_only=True),
        volumes=_volumes(raw.get("volumes"), where),
        mlflow=_mlflow(raw.get("mlflow"), where),
        node_pools=pools,
        resources=resources,
        beam_args=beam_args,
        trainer=_trainer(raw.get("trainer"), pools, where),
        source=where,
    )
    # Also guarantees the shared volume that multi-node training stages its data on.
    _check_on_volume(settings, "serving_dir", settings.serving_dir)
    if not settings.pipeline_root.startswith(REMOTE_SCHEMES):
        _check_on_volume(settings, "pipeline_root", settings.pipeline_root)
    return settings


def _check_on_volume(settings: KubeflowSettings, key: str, path: str) -> None:
    mounts = [v.mount_path for v in settings.volumes]
    if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
        raise KubeflowConfigError(
            f"{settings.source}: '{key}' {path} is not on a mounted volume ({', '.join(mounts) or 'no volumes'}); "
            "a path outside the volumes vanishes with the step's pod. Add a volume or move the path into one."
        )


def load_kubeflow_settings(path: Path) -> KubeflowSettings:
    path = Path(path)
    if not path.is_file():
        raise KubeflowConfigError(f"Kubeflow config {path} does not exist (start from kubeflow/pools.yaml)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise KubeflowConfigError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise KubeflowConfigError(f"{path}: expected a mapping at the top level")
    return settings_from_dict(raw, str(path))
