"""Run a kubeflow.org/v1 PyTorchJob (Training Operator v1) through the shared runner (job_runner.py): create it,
wait for Succeeded/Failed/timeout, explain a failure with the failed pods' logs, and always delete it.

Condition types Succeeded and Failed: pkg/apis/kubeflow.org/v1/common_types.go:151,159@v1.9.2 (kubeflow/trainer).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from torchtfx.components.torch_trainer.cluster.job_runner import (
    ClusterJobFailedError,
    ClusterJobRunner,
    ClusterJobTimeoutError,
    JobKind,
    _latest_condition,  # noqa: F401  (re-exported for callers that read a final status)
    load_kubernetes_apis,  # noqa: F401  (re-exported: the historical home of the credentials loader)
)
from torchtfx.components.torch_trainer.cluster.pytorchjob_manifest import (
    CONTAINER,
    GROUP,
    JOB_LABEL,
    PLURAL,
    REPLICA_LABEL,
    VERSION,
    build_manifest,
)

# The names pipeline/cli/errors.py lists as stage failures; TrainJob failures raise the same classes.
PyTorchJobFailedError = ClusterJobFailedError
PyTorchJobTimeoutError = ClusterJobTimeoutError


def _replica_summary(status: dict, key: str | None = None) -> str:
    parts = []
    for rtype, counts in sorted((status.get("replicaStatuses") or {}).items()):
        shown = {k: v for k, v in counts.items() if k in ("active", "succeeded", "failed") and v}
        if key is None:
            parts.append(f"{rtype}: " + (", ".join(f"{v} {k}" for k, v in sorted(shown.items())) or "none"))
        elif shown.get(key):
            parts.append(f"{rtype}: {shown[key]} {key}")
    return "; ".join(parts)


PYTORCHJOB = JobKind(
    kind="PyTorchJob",
    group=GROUP,
    version=VERSION,
    plural=PLURAL,
    succeeded="Succeeded",
    failed="Failed",
    pod_label=JOB_LABEL,
    role_label=REPLICA_LABEL,
    container=CONTAINER,
    missing_hint="install the Kubeflow Training Operator v1, or use Kubeflow Trainer v2 (TrainJob)",
    summary=_replica_summary,
    build=build_manifest,
)


class PyTorchJobRunner(ClusterJobRunner):
    """Create a PyTorchJob, wait for Succeeded/Failed/timeout, always delete it afterwards."""

    def __init__(
        self,
        api: client.CustomObjectsApi,
        core_api: client.CoreV1Api | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(PYTORCHJOB, api, core_api, sleep, clock)
