"""Run a trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2) through the shared runner (job_runner.py):
create it, wait for Complete/Failed/timeout, explain a failure with the failed pods' logs, and always delete it
(Foreground, so its JobSet, Jobs and pods go with it: nothing like the PyTorchJob's ttlSecondsAfterFinished exists
in v1alpha1, so this deletion is the only clean-up).

Status (pkg/apis/trainer/v1alpha1/trainjob_types.go@v2.1.0 / @v2.3.0, github.com/kubeflow/trainer):
- ``conditions`` are metav1.Conditions keyed by type (trainjob_types.go:504@v2.3.0); the terminal ones are
  ``Complete`` and ``Failed`` (trainjob_types.go:56-60@v2.0.0, :60-64@v2.3.0), copied from the JobSet's
  Completed/Failed conditions with their reason and message (pkg/runtime/framework/plugins/jobset/jobset.go:316-322
  @v2.1.0); ``Failed`` is also set when the runtime is unsupported or, from v2.2, on activeDeadlineSeconds
  (reason DeadlineExceeded: trainjob_types.go:83@v2.3.0).
- ``jobsStatus`` lists each replicated job (``node``) with ready/succeeded/failed/active/suspended counts of its
  child Jobs (trainjob_types.go:312-332@v2.0.0, :526-559@v2.3.0).
- Pods carry jobset.sigs.k8s.io/jobset-name=<trainjob> (the JobSet is named after the TrainJob): see
  trainjob_manifest.py for the sources.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from kubernetes import client

from torchtfx.components.torch_trainer.cluster.job_runner import ClusterJobRunner, JobKind
from torchtfx.components.torch_trainer.cluster.trainjob_manifest import (
    GROUP,
    JOBSET_NAME_LABEL,
    KIND,
    NODE,
    PLURAL,
    REPLICATED_JOB_LABEL,
    RUNTIME_PATCHES,
    VERSION,
    OverrideShape,
    build_trainjob,
)

_COUNTERS = ("active", "ready", "succeeded", "failed", "suspended")


def _jobs_summary(status: dict, key: str | None = None) -> str:
    parts = []
    for job in sorted(status.get("jobsStatus") or [], key=lambda j: str(j.get("name"))):
        shown = {k: job.get(k) for k in _COUNTERS if job.get(k)}
        if key is None:
            parts.append(f"{job.get('name')}: " + (", ".join(f"{v} {k}" for k, v in shown.items()) or "none"))
        elif shown.get(key):
            parts.append(f"{job.get('name')}: {shown[key]} {key}")
    return "; ".join(parts)


def trainjob_kind(shape: OverrideShape = RUNTIME_PATCHES) -> JobKind:
    """The TrainJob as the runner knows it, building manifests in ``shape`` (the cluster's Trainer release line)."""
    return JobKind(
        kind=KIND,
        group=GROUP,
        version=VERSION,
        plural=PLURAL,
        succeeded="Complete",
        failed="Failed",
        pod_label=JOBSET_NAME_LABEL,
        role_label=REPLICATED_JOB_LABEL,
        container=NODE,
        missing_hint="install Kubeflow Trainer v2 (its torch-distributed ClusterTrainingRuntime included), or the "
        "Training Operator v1 (PyTorchJob)",
        summary=_jobs_summary,
        build=functools.partial(build_trainjob, shape=shape),
    )


class TrainJobRunner(ClusterJobRunner):
    """Create a TrainJob, wait for Complete/Failed/timeout, always delete it afterwards."""

    def __init__(
        self,
        api: client.CustomObjectsApi,
        core_api: client.CoreV1Api | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        shape: OverrideShape = RUNTIME_PATCHES,
    ) -> None:
        super().__init__(trainjob_kind(shape), api, core_api, sleep, clock)
