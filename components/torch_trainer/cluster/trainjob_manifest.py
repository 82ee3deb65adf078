"""The trainer.kubeflow.org/v1alpha1 TrainJob manifest (Kubeflow Trainer v2) for multi-node DDP on the
``torch-distributed`` ClusterTrainingRuntime, each node running the same torchrun entry point as the local path.

API facts (github.com/kubeflow/trainer, file:line@tag):
- TrainJob spec: runtimeRef {name, apiGroup, kind} (pkg/apis/trainer/v1alpha1/trainjob_types.go:136-151@v2.0.0),
  trainer {image, command, env, numNodes, resourcesPerNode, numProcPerNode}
  (trainjob_types.go:202-231@v2.0.0, :247-289@v2.3.0; numProcPerNode an IntOrString up to v2.1, an int32 from v2.2).
- The runtime: ClusterTrainingRuntime ``torch-distributed``, one replicated job ``node`` whose container is ``node``
  (manifests/base/runtimes/torch_distributed.yaml:4,15,24@v2.1.0; installed by Kubeflow 1.11:
  kubeflow/manifests applications/trainer/upstream/base/runtimes/torch_distributed.yaml:4@v1.11.0, which ships
  Trainer v2.1.0: README.md:66@v1.11.0, example/kustomization.yaml:96@v1.11.0, the Training Operator v1 line
  commented out at :94).
- The torch plugin sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job completion index), PET_MASTER_ADDR
  (``<trainjob>-node-0-0.<trainjob>``) and PET_MASTER_PORT (29500) on the ``node`` container
  (pkg/runtime/framework/plugins/torch/torch.go:135-158@v2.1.0; pkg/constants/constants.go:53,56,122-135@v2.1.0)
  and rejects those names in spec.trainer.env (torch.go:73-84@v2.1.0, constants.go:217@v2.1.0).
- Env can be set on the ``node`` container only through spec.trainer.env, not through pod overrides
  (pkg/runtime/framework/plugins/jobset/jobset.go:141@v2.1.0).

Pod overrides: three API shapes, told apart by the TrainJob schema the cluster serves (discovery.py):
- ``spec.podSpecOverrides`` (v2.0: trainjob_types.go:115,234-293@v2.0.0): serviceAccountName, nodeSelector,
  tolerations, volumes, containers {name, env, volumeMounts}; no securityContext, no imagePullSecrets, no pod
  metadata.
- ``spec.podTemplateOverrides`` (v2.1, Kubeflow 1.11's: trainjob_types.go:127,267-363@v2.1.0): adds pod metadata
  and imagePullSecrets; still no securityContext (pod or container), so its pods are not "restricted"-compliant
  unless the runtime's own template is; merged by a strategic merge patch
  (pkg/runtime/core/trainingruntime.go:190-238@v2.1.0).
- ``spec.runtimePatches`` (v2.2+: trainjob_types.go:124,293-494@v2.3.0, the same at v2.2.0): pod and container
  securityContext and imagePullSecrets too; each patch names a domain-prefixed ``manager``
  (pkg/runtime/framework/plugins/jobset/jobset.go:129@v2.2.0); ``spec.activeDeadlineSeconds`` from v2.2
  (trainjob_types.go:139@v2.3.0).

Elastic training: Trainer v2 has none. TrainJob's numNodes is a fixed count (trainjob_types.go:220-222@v2.0.0,
:275-278@v2.3.0: "TODO ... dynamic num of nodes ... `--nnodes=1:4`"), the torch plugin ignores the runtime's
``elasticPolicy`` (torch.go:96@v2.1.0, :109@v2.3.0: "TODO: Add support for PyTorch elastic when JobSet supports
Elastic Jobs"), and ``torch-distributed`` sets no JobSet failurePolicy, so JobSet's default (maxRestarts 0:
jobset api/jobset/v1alpha2/jobset_types.go:376-379@v0.10.1) fails the whole JobSet, and so the TrainJob, when one
node's Job fails; JobSet defaults the pods to restartPolicy OnFailure (pkg/webhooks/jobset_webhook.go:124-127@v0.10.1)
so a crashed container restarts in place until its Job's backoffLimit. What still works is torchrun's
``--max-restarts`` inside each node (worker_command), which restarts the worker processes after a worker failure;
elastic settings (elastic_min_nodes/elastic_max_nodes) need the PyTorchJob path (discovery.py refuses them here).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from torchtfx.components.torch_trainer.cluster import pod_spec
from torchtfx.components.torch_trainer.cluster.pytorchjob_manifest import job_namespace
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError, PyTorchJobSettings

GROUP, VERSION, PLURAL, KIND = "trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"
RUNTIME = "torch-distributed"  # ClusterTrainingRuntime name (torch_distributed.yaml:4@v2.1.0)
NODE = "node"  # replicated job and container name in that runtime (torch_distributed.yaml:15,24@v2.1.0)
# JobSet names its JobSet after the TrainJob (trainer pkg/runtime/framework/plugins/jobset/jobset.go:284@v2.1.0) and
# labels each Job's pod template with these (jobset pkg/controllers/jobset_controller.go:706,765-771@v0.10.1;
# keys: api/jobset/v1alpha2/jobset_types.go:23,31@v0.10.1).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
PATCH_MANAGER = "torchtfx.io/trainer"  # runtimePatches[].manager must be a domain-prefixed path

# No Trainer v2 TrainJob field reaches a node Job's backoffLimit or the JobSet's failurePolicy: v2.1's pod
# overrides are pod-level (trainjob_types.go:267-363@v2.1.0), v2.2+'s JobSpecPatch holds only the pod template and
# JobSetSpecPatch only replicatedJobs (trainjob_types.go:330-368@v2.2.0, :336-375@v2.3.0), and torch-distributed
# sets neither, so each node's Job keeps Kubernetes' default of 6 (the runtime CRD's JobSpec.backoffLimit doc:
# manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml:941@v2.1.0) and one failed Job fails the
# JobSet (maxRestarts 0: jobset api/jobset/v1alpha2/jobset_types.go:376-379@v0.10.1).
BACKOFF_LIMIT_REFUSED = (
    "trainer.backoff_limit: {} is set, but this cluster runs multi-node training as a Kubeflow Trainer v2 TrainJob, "
    "which has no backoff limit to set (each node's Job keeps Kubernetes' default of 6 pod failures, and one failed "
    "node fails the TrainJob). Remove trainer.backoff_limit (trainer.hyperparameters.max_restarts sets torchrun's "
    "restarts within each node), or install the Kubeflow Training Operator v1, whose PyTorchJob has "
    "runPolicy.backoffLimit"
)

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class OverrideShape:
    """One release line's field for per-pod settings and what it can carry."""

    field: str  # the TrainJob spec field
    since: str  # first Trainer release that serves it
    pod_keys: frozenset[str]  # pod-spec fields it accepts
    container_keys: frozenset[str]  # container fields it accepts (env excluded: the node container takes none)
    pod_metadata: bool
    deadline: bool  # spec.activeDeadlineSeconds served alongside


_BASE_POD_KEYS = frozenset({"serviceAccountName", "nodeSelector", "tolerations", "volumes", "containers"})
RUNTIME_PATCHES = OverrideShape(
    "runtimePatches",
    "v2.2.0",
    _BASE_POD_KEYS | {"imagePullSecrets", "securityContext"},
    frozenset({"name", "volumeMounts", "securityContext"}),
    pod_metadata=True,
    deadline=True,
)
POD_TEMPLATE_OVERRIDES = OverrideShape(
    "podTemplateOverrides",
    "v2.1.0",
    _BASE_POD_KEYS | {"imagePullSecrets"},
    frozenset({"name", "volumeMounts"}),
    pod_metadata=True,
    deadline=False,
)
POD_SPEC_OVERRIDES = OverrideShape(
    "podSpecOverrides",
    "v2.0.0",
    _BASE_POD_KEYS,
    frozenset({"name", "volumeMounts"}),
    pod_metadata=False,
    deadline=False,
)
SHAPES = (RUNTIME_PATCHES, POD_TEMPLATE_OVERRIDES, POD_SPEC_OVERRIDES)  # newest first


def pod_override(settings: PyTorchJobSettings, labels: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Everything the project wants on a training pod beyond the runtime's template: (metadata, spec)."""
    container = {
        "name": NODE,
        "volumeMounts": pod_spec.volume_mounts(settings),
        "securityContext": pod_spec.container_security_context(),
    }
    spec = {
        **pod_spec.scheduling(settings),
        "volumes": pod_spec.volumes(settings),
        "containers": [container],
        "securityContext": pod_spec.pod_security_context(settings),
    }
    return {"labels": dict(labels), "annotations": dict(pod_spec.POD_ANNOTATIONS)}, spec


def _fit(shape: OverrideShape, metadata: dict, spec: dict) -> tuple[dict | None, dict, list[str]]:
    """``metadata`` and ``spec`` cut to what ``shape`` carries, and the names of what it could not."""
    dropped = sorted(k for k in spec if k not in shape.pod_keys)
    fitted = {k: v for k, v in spec.items() if k in shape.pod_keys}
    containers = []
    for c in fitted.get("containers", []):
        dropped += sorted(f"containers[{c['name']}].{k}" for k in c if k not in shape.container_keys)
        containers.append({k: v for k, v in c.items() if k in shape.container_keys})
    fitted["containers"] = containers
    if not shape.pod_metadata:
        dropped.append("metadata (labels, annotations)")
    return (metadata if shape.pod_metadata else None), fitted, dropped


def _overrides(shape: OverrideShape, metadata: dict | None, spec: dict) -> list[dict[str, Any]]:
    template: dict[str, Any] = {"spec": spec} if metadata is None else {"metadata": metadata, "spec": spec}
    if shape is RUNTIME_PATCHES:
        replicated = {"name": NODE, "template": {"spec": {"template": template}}}
        patch = {"template": {"spec": {"replicatedJobs": [replicated]}}}
        return [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": patch}]
    if shape is POD_TEMPLATE_OVERRIDES:
        return [{"targetJobs": [{"name": NODE}], **template}]
    return [{"targetJobs": [{"name": NODE}], **spec}]


def _check_shape(settings: PyTorchJobSettings, shape: OverrideShape, dropped: list[str]) -> None:
    if settings.image_pull_secrets and "imagePullSecrets" in dropped:
        raise PyTorchJobConfigError(
            f"image_pull_secrets {list(settings.image_pull_secrets)}: this cluster's Kubeflow Trainer ({shape.since} "
            f"line, TrainJob spec.{shape.field}) cannot set imagePullSecrets on the training pods. Upgrade Kubeflow "
            "Trainer to v2.1.0 or newer, or attach the secret to the pods' service account (service_account)"
        )
    if dropped:
        logger.warning(
            "TrainJob spec.%s (Kubeflow Trainer %s line) cannot set %s on the training pods: a namespace that "
            "enforces Pod Security 'restricted' rejects them. Upgrade Kubeflow Trainer to v2.2.0 or newer "
            "(spec.runtimePatches), or run the Training Operator v1 (PyTorchJob)",
            shape.field,
            shape.since,
            ", ".join(dropped),
        )


def build_trainjob(
    settings: PyTorchJobSettings,
    name: str,
    command: list[str],
    labels: dict[str, str],
    shape: OverrideShape = RUNTIME_PATCHES,
) -> dict:
    """A trainer.kubeflow.org/v1alpha1 TrainJob on ``torch-distributed`` with ``num_nodes`` fixed nodes."""
    if settings.elastic:
        raise PyTorchJobConfigError(
            "elastic_min_nodes/elastic_max_nodes: Kubeflow Trainer v2 (TrainJob) has no elastic training (a fixed "
            "numNodes); remove them (torchrun --max-restarts still restarts failed workers within each node) or "
            "install the Kubeflow Training Operator v1, whose PyTorchJob has an elasticPolicy"
        )
    if settings.backoff_limit is not None:
        raise PyTorchJobConfigError(BACKOFF_LIMIT_REFUSED.format(settings.backoff_limit))
    metadata, spec = pod_override(settings, labels)
    fitted_metadata, fitted_spec, dropped = _fit(shape, metadata, spec)
    _check_shape(settings, shape, dropped)
    trainer = {
        "image": settings.image,
        "command": command,
        "env": pod_spec.container_env(settings),
        "numNodes": settings.num_nodes,
        "numProcPerNode": settings.nproc_per_node,
        "resourcesPerNode": pod_spec.resources(settings),
    }
    job_spec: dict[str, Any] = {
        "runtimeRef": {"name": RUNTIME, "apiGroup": GROUP, "kind": "ClusterTrainingRuntime"},
        "trainer": trainer,
        shape.field: _overrides(shape, fitted_metadata, fitted_spec),
    }
    if shape.deadline:
        job_spec["activeDeadlineSeconds"] = settings.timeout_seconds
    metadata = {"name": name, "namespace": job_namespace(settings.namespace), "labels": dict(labels)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": metadata, "spec": job_spec}
