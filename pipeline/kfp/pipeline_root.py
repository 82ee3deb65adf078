"""The pipeline root on multi-user Kubeflow: one per profile namespace, under the prefixes that namespace's
object-store credentials may write.

From KFP 2.15 (the Kubeflow 1.11 default, with SeaweedFS as the object store: kubeflow/manifests
``README.md:79,418@v1.11.0``) the profile controller gives each namespace S3 credentials whose policy allows
``s3:Put*``/``s3:Get*``/``s3:List*`` only on ``mlpipeline/artifacts/*``, ``mlpipeline/private-artifacts/<ns>/*``,
``mlpipeline/private/<ns>/*`` and ``mlpipeline/shared/*``
(``manifests/kustomize/base/installs/multi-user/pipelines-profile-controller/sync.py:362-373@2.15.0``; the same
prefixes at 2.17.0), and writes ``defaultPipelineRoot: minio://mlpipeline/private-artifacts/<ns>/v2/artifacts``
into the namespace's ``kfp-launcher`` ConfigMap (``sync.py:181@2.15.0``). A root outside those prefixes (the
single-user ``minio://mlpipeline/v2/artifacts``) fails the first upload of every run.

The run's root is the one it was created with, else the ConfigMap's (``root_dag.go:79-112@2.15.0``), so the
compiled root may hold ``{namespace}``, which ``torchtfx submit`` fills with the run's namespace."""

from __future__ import annotations

import re

NAMESPACE_PLACEHOLDER = "{namespace}"
# The first backend whose multi-user install enforces per-namespace object-store credentials.
MULTI_USER_POLICY_BACKEND = (2, 15)
IN_CLUSTER_BUCKET = "minio://mlpipeline/"
SHARED_PREFIXES = ("artifacts/", "shared/")
NAMESPACED_PREFIXES = ("private-artifacts/", "private/")
DEFAULT_MULTI_USER_ROOT = f"{IN_CLUSTER_BUCKET}private-artifacts/{NAMESPACE_PLACEHOLDER}/v2/artifacts/torchtfx"
_NAMESPACED = re.compile(r"^(private-artifacts|private)/([^/]+)/")

RULE = (
    "on multi-user Kubeflow Pipelines 2.15+ a namespace's credentials write only under "
    "minio://mlpipeline/{artifacts, private-artifacts/<namespace>, private/<namespace>, shared}/ "
    "(the profile controller's policy)"
)


def _bucket_key(root: str) -> str | None:
    """The object-key prefix of a root in the in-cluster bucket (``/``-terminated); None for any other root."""
    return root[len(IN_CLUSTER_BUCKET) :] + "/" if root.startswith(IN_CLUSTER_BUCKET) else None


def namespace_in_root(root: str) -> str | None:
    """The namespace a ``minio://mlpipeline/private…/<ns>/`` root is bound to (the placeholder included)."""
    key = _bucket_key(root)
    match = _NAMESPACED.match(key) if key is not None else None
    return match.group(2) if match else None


def check_multi_user_root(root: str) -> str:
    """At compile: a root in the in-cluster bucket must lie under a prefix some namespace may write."""
    key = _bucket_key(root)
    if key is None:
        return root  # gs:// or an external s3:// bucket: the profile's policy does not apply
    if key.startswith(SHARED_PREFIXES) or _NAMESPACED.match(key):
        return root
    raise ValueError(
        f"'pipeline_root' {root!r} cannot be written: {RULE}. Use {DEFAULT_MULTI_USER_ROOT!r} (torchtfx submit "
        "fills in the namespace), or set multi_user: false for a single-user install"
    )


def root_for_namespace(root: str, namespace: str | None) -> str:
    """At submit: ``root`` with ``{namespace}`` filled in; refuses a root bound to another namespace."""
    if NAMESPACE_PLACEHOLDER in root:
        if not namespace:
            raise ValueError(
                f"the pipeline root {root!r} is per namespace: pass --namespace (the Kubeflow profile namespace "
                "the run goes to), or set the namespace in the kfp client's context"
            )
        return root.replace(NAMESPACE_PLACEHOLDER, namespace)
    bound = namespace_in_root(root)
    if namespace and bound and bound != namespace:
        raise ValueError(
            f"the pipeline root {root!r} belongs to namespace {bound!r}, but the run goes to {namespace!r}: {RULE}. "
            f"Compile with pipeline_root: {DEFAULT_MULTI_USER_ROOT!r}"
        )
    return root
