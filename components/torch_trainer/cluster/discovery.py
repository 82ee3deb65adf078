"""Which multi-node API this cluster has, asked at run time: Kubeflow Trainer v2's TrainJob
(trainer.kubeflow.org/v1alpha1, the default from Kubeflow 1.11, preferred) or the Training Operator v1's PyTorchJob
(kubeflow.org/v1, kept for clusters that only have it), and for a TrainJob, which pod-override field the installed
Trainer release line serves (trainjob_manifest.SHAPES).

The question is "does the group/version serve the resource" (GET /apis/<group>/<version>, an APIResourceList), not
"is the group served": kubeflow.org/v1 is also served by Kubeflow's own Notebook and Profile CRDs on clusters without
the Training Operator. The TrainJob's schema comes from the OpenAPI v3 document of trainer.kubeflow.org/v1alpha1
(GET /openapi/v3/apis/trainer.kubeflow.org/v1alpha1), where a CRD's schema carries its
``x-kubernetes-group-version-kind``. Both are discovery URLs that the built-in ``system:discovery`` ClusterRole lets
every authenticated service account read, so they need no Role (kubeflow/rbac/torchtfx-trainer.yaml).
"""

from __future__ import annotations

import logging

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from torchtfx.components.torch_trainer.cluster import pytorchjob_manifest, trainjob_manifest
from torchtfx.components.torch_trainer.cluster.job_runner import ClusterJobFailedError, ClusterJobRunner, api_message
from torchtfx.components.torch_trainer.cluster.pytorchjob_runner import PyTorchJobRunner
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.cluster.trainjob_manifest import SHAPES, OverrideShape
from torchtfx.components.torch_trainer.cluster.trainjob_runner import TrainJobRunner

logger = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 30
TRAINJOB = (trainjob_manifest.GROUP, trainjob_manifest.VERSION, trainjob_manifest.PLURAL)
PYTORCHJOB = (pytorchjob_manifest.GROUP, pytorchjob_manifest.VERSION, pytorchjob_manifest.PLURAL)
NEITHER = (
    "This cluster serves neither trainjobs.trainer.kubeflow.org/v1alpha1 (Kubeflow Trainer v2, the default from "
    "Kubeflow 1.11) nor pytorchjobs.kubeflow.org/v1 (the Kubeflow Training Operator v1), so multi-node training "
    "cannot start. Install Kubeflow Trainer v2 with its torch-distributed ClusterTrainingRuntime "
    "(kubeflow/manifests applications/trainer), or the Training Operator v1 (applications/training-operator), "
    "or train on one node (trainer.num_nodes: 1)"
)


def serves(api: client.CustomObjectsApi, group: str, version: str, plural: str) -> bool:
    """Whether the API server serves ``plural`` in ``group/version`` (404: it does not)."""
    try:
        resources = api.get_api_resources(group, version, _request_timeout=_REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise ClusterJobFailedError(
            f"Asking the API server whether it serves {plural}.{group}/{version} failed ({exc.status} "
            f"{exc.reason}: {api_message(exc)}): discovery (GET /apis/{group}/{version}) is open to every "
            "authenticated account unless the cluster removed the system:discovery binding"
        ) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise ClusterJobFailedError(f"The Kubernetes API server could not be reached: {exc}") from exc
    return any(r.name == plural for r in resources.resources or [])


def trainjob_shape(api_client: client.ApiClient) -> OverrideShape:
    """The pod-override field of the TrainJob schema the cluster serves (newest first)."""
    group, version, _ = TRAINJOB
    path = f"/openapi/v3/apis/{group}/{version}"
    try:
        document = api_client.call_api(
            path,
            "GET",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            response_type="object",
            _return_http_data_only=True,
            _request_timeout=_REQUEST_TIMEOUT,
        )
    except (ApiException, urllib3.exceptions.HTTPError) as exc:
        raise ClusterJobFailedError(
            f"Reading the TrainJob schema (GET {path}) failed ({exc}): it tells which pod-override field this "
            "Kubeflow Trainer serves; the OpenAPI v3 endpoint is on by default from Kubernetes 1.24"
        ) from exc
    fields = _trainjob_spec_fields(document or {})
    for shape in SHAPES:
        if shape.field in fields:
            return shape
    raise ClusterJobFailedError(
        f"The TrainJob schema at {path} has none of the pod-override fields "
        f"{[s.field for s in SHAPES]} (its spec fields: {sorted(fields)}): this Kubeflow Trainer release is not "
        "one torchtfx knows (v2.0 to v2.3); use a supported release or the Training Operator v1"
    )


def _trainjob_spec_fields(document: dict) -> set[str]:
    for schema in ((document.get("components") or {}).get("schemas") or {}).values():
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if any(g.get("group") == TRAINJOB[0] and g.get("kind") == trainjob_manifest.KIND for g in gvks):
            return set(((schema.get("properties") or {}).get("spec") or {}).get("properties") or {})
    return set()


def select_runner(
    settings: PyTorchJobSettings, api: client.CustomObjectsApi, core_api: client.CoreV1Api
) -> ClusterJobRunner:
    """TrainJob where served (unless elastic settings or a backoff_limit ask for what only a PyTorchJob has and it
    is served too), else PyTorchJob; neither is an error that names both."""
    has_trainjob, has_pytorchjob = serves(api, *TRAINJOB), serves(api, *PYTORCHJOB)
    needs_pytorchjob = settings.elastic or settings.backoff_limit is not None
    if has_trainjob and not (needs_pytorchjob and has_pytorchjob):
        shape = trainjob_shape(api.api_client)
        logger.info("Multi-node training as a TrainJob (Kubeflow Trainer %s line: spec.%s)", shape.since, shape.field)
        return TrainJobRunner(api, core_api, shape=shape)
    if has_pytorchjob:
        why = "elastic/backoff_limit settings need it" if has_trainjob else "no Kubeflow Trainer v2 here"
        logger.info("Multi-node training as a PyTorchJob (Training Operator v1): %s", why)
        return PyTorchJobRunner(api, core_api)
    raise ClusterJobFailedError(NEITHER)
