"""Plain checks of single values in the Kubeflow configuration (memory quantities, locations, the pipeline
root, the backend version), each raising ``ValueError`` with what is wrong and what to write instead."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from torchtfx.components.torch_trainer.public import is_secret_name
from torchtfx.pipeline.kfp.pipeline_root import NAMESPACE_PLACEHOLDER

REMOTE_SCHEMES = ("gs://", "s3://", "minio://")
# The KFP launcher's bucket URI (backend/src/v2/objectstore ParseBucketConfig, 2.1.0 to 2.14.3): a scheme it
# knows, then a bucket name, then an optional prefix.
_BUCKET_URI = re.compile(r"^(gs|s3|minio)://[^/?]+(/[^?]*)?$")
# The oldest open-source KFP backend this project supports (kubeflow/README.md), and the first whose driver
# mounts the PlatformSpec's emptyDirMounts (backend/src/v2/driver/driver.go at tag 2.3.0; the 2.1 and 2.2
# drivers parse the executor config strictly and fail the step on that field).
OLDEST_BACKEND = (2, 1)
EMPTY_DIR_BACKEND = (2, 3)
# The first backend whose PlatformSpec has a container securityContext (runAsUser, runAsGroup, runAsNonRoot:
# kubernetes_platform/proto/kubernetes_executor_config.proto:43@2.16.0, applied by backend/src/v2/driver/k8s.go:
# 724-762@2.16.0); 2.1-2.4 fail the step on it, 2.5 drops it, and 2.14-2.15 refuse the run (the API server's
# strict protojson.Unmarshal, backend/src/v2/compiler/argocompiler/container.go:309@2.15.0).
SECURITY_CONTEXT_BACKEND = (2, 16)
# Data roots the step image can read: ExampleGen globs with tf.io.gfile (tfx.dsl.io.fileio) and opens with Beam's
# FileSystems (components/csv_input/executor.py:split_files, decode.py:open_input). TF 2.16 has local paths and
# gs:// (tensorflow-io-gcs-filesystem, constraints.txt); s3:// needs tensorflow-io, which the image does not
# install ("File system scheme 's3' not implemented"), and Beam's S3 file system needs boto3 (not installed
# either); minio:// is no file system scheme at all, only the KFP launcher's name for its artifact store.
READABLE_DATA_SCHEMES = ("gs://",)
_BACKEND = re.compile(r"^(\d+)\.(\d+)$")
_MEMORY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$")


def parse_memory_gb(value: Any) -> float:
    """A Kubernetes memory quantity in decimal gigabytes: the unit of PipelineSpec's ResourceSpec.memory_limit."""
    match = _MEMORY.match(str(value).strip())
    if not match:
        raise ValueError(f"memory {value!r} is not a quantity like 16Gi, 512Mi or 8G")
    number, unit = float(match.group(1)), match.group(2)
    return round(number * _MEMORY_UNITS.get(unit, 1) / 1e9, 3) if unit else round(number / 1e9, 3)


def memory_quantity(memory: Any) -> str:
    parse_memory_gb(memory)
    return str(memory)


def check_location(value: str, key: str, *, filesystem_only: bool = False) -> str:
    """An absolute POSIX path (normalized) or, unless ``filesystem_only``, a gs://, s3:// or minio:// URI."""
    if not value:
        raise ValueError(f"'{key}' is required")
    if value.startswith(REMOTE_SCHEMES) and not filesystem_only:
        return value.rstrip("/")
    if not value.startswith("/"):
        allowed = "an absolute path" + ("" if filesystem_only else f" or a {', '.join(REMOTE_SCHEMES)} URI")
        raise ValueError(f"'{key}' must be {allowed}, got {value!r}")
    normalized = posixpath.normpath(value)
    if normalized != value.rstrip("/"):
        raise ValueError(f"'{key}' {value!r} is not normalized (did you mean {normalized!r}?)")
    return normalized


def check_data_root(value: str) -> str:
    """A location ExampleGen can read in the step image: an absolute path or a gs:// URI."""
    location = check_location(value, "data_root")
    if location.startswith(REMOTE_SCHEMES) and not location.startswith(READABLE_DATA_SCHEMES):
        scheme = location.split("://", 1)[0]
        raise ValueError(
            f"'data_root' {value!r}: the step image has no file system for {scheme}:// (TensorFlow 2.16 reads "
            "only local paths and gs:// without tensorflow-io, Beam's S3 file system needs boto3, and minio:// is "
            "the KFP launcher's artifact-store name, not a file system). Copy the data onto the shared volume and "
            "set data_root to its path there (e.g. /mnt/torchtfx/data/taxi), or use a gs:// bucket"
        )
    return location


def check_requests(cpu: float, cpu_request: float | None, memory: str, memory_request: str | None) -> None:
    """Requests no larger than the limits: Kubernetes refuses a pod whose request exceeds its limit."""
    if cpu_request is not None and cpu_request > cpu:
        raise ValueError(
            f"cpu_request {cpu_request:g} is larger than cpu {cpu:g} (the limit); Kubernetes refuses "
            "such a pod. Lower cpu_request or raise cpu"
        )
    if memory_request is not None and parse_memory_gb(memory_request) > parse_memory_gb(memory):
        raise ValueError(
            f"memory_request {memory_request} is larger than memory {memory} (the limit); Kubernetes "
            "refuses such a pod. Lower memory_request or raise memory"
        )


def check_secret_name(name: str) -> str:
    """A Kubernetes Secret's name (a DNS-1123 subdomain)."""
    if not is_secret_name(name):
        raise ValueError(
            f"image_pull_secrets: {name!r} is not a Kubernetes secret name (lower-case letters, digits, '-' and "
            "'.'; e.g. regcred)"
        )
    return name


def is_bucket_uri(value: str) -> bool:
    return bool(_BUCKET_URI.match(value or ""))


def check_pipeline_root(value: str) -> str:
    """A bucket URI the KFP launcher can store artifacts in: gs://, s3:// or minio://, with a bucket; it may
    hold ``{namespace}``, which ``torchtfx submit`` fills in (pipeline_root.py)."""
    if is_bucket_uri((value or "").replace(NAMESPACE_PLACEHOLDER, "namespace").rstrip("/")):
        return value.rstrip("/")
    raise ValueError(
        f"'pipeline_root' must be a gs://, s3:// or minio:// bucket URI, got {value!r}: the KFP launcher stores "
        "artifacts only there (any other root fails every step with 'unsupported Cloud bucket', "
        "backend/src/v2/objectstore), so a path on a volume cannot work. Use the bucket KFP already uses, "
        "e.g. minio://mlpipeline/v2/artifacts/torchtfx"
    )


def parse_backend(value: str) -> tuple[int, int]:
    """``"2.3"`` -> (2, 3); refuses a backend older than the oldest this project supports."""
    match = _BACKEND.match(str(value).strip())
    if not match:
        raise ValueError(f"'kfp_backend' must be a MAJOR.MINOR version such as '2.1', got {value!r}")
    version = (int(match.group(1)), int(match.group(2)))
    if version < OLDEST_BACKEND:
        raise ValueError("'kfp_backend': torchtfx needs Kubeflow Pipelines backend 2.1 or newer")
    return version
