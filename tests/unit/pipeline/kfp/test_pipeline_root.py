"""The pipeline root on multi-user Kubeflow Pipelines 2.15+: compile refuses a root no namespace may write,
submit fills in ``{namespace}`` and refuses another namespace's root (the submit side runs against the fake KFP
API in test_submit.py; the upload rule itself is enforced by the launcher emulation, tests/e2e)."""

from __future__ import annotations

import pytest
import yaml

from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.kfp.config import KubeflowConfigError, settings_from_dict
from torchtfx.pipeline.kfp.pipeline_root import DEFAULT_MULTI_USER_ROOT, namespace_in_root, root_for_namespace

SINGLE_USER_ROOT = "minio://mlpipeline/v2/artifacts/torchtfx"  # what pools.yaml shipped before KFP 2.15


def settings(**overrides):
    raw = yaml.safe_load((PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text())
    return settings_from_dict({**raw, **overrides}, "pools.yaml")


def test_the_shipped_root_is_per_namespace_under_the_profiles_private_prefix():
    assert settings().pipeline_root == DEFAULT_MULTI_USER_ROOT
    assert settings().multi_user


@pytest.mark.parametrize("backend", ["2.15", "2.17"])
def test_a_root_no_namespace_may_write_is_refused_at_compile_with_the_rule(backend):
    with pytest.raises(KubeflowConfigError, match=r"cannot be written: on multi-user .* private-artifacts/<namespace>"):
        settings(kfp_backend=backend, pipeline_root=SINGLE_USER_ROOT)


@pytest.mark.parametrize(
    "overrides",
    [
        {"kfp_backend": "2.14", "pipeline_root": SINGLE_USER_ROOT},  # no per-namespace policy before 2.15
        {"kfp_backend": "2.15", "pipeline_root": SINGLE_USER_ROOT, "multi_user": False},
        {"kfp_backend": "2.15", "pipeline_root": "gs://team-bucket/torchtfx"},  # not the in-cluster store
        {"kfp_backend": "2.15", "pipeline_root": "minio://mlpipeline/shared/torchtfx"},
        {"kfp_backend": "2.15", "pipeline_root": "minio://mlpipeline/private/team-a/torchtfx"},
    ],
)
def test_roots_the_policy_allows_or_does_not_govern_compile(overrides):
    assert settings(**overrides).pipeline_root == overrides["pipeline_root"]


def test_submit_fills_the_namespace_and_refuses_another_namespaces_root():
    assert root_for_namespace(DEFAULT_MULTI_USER_ROOT, "team-a") == (
        "minio://mlpipeline/private-artifacts/team-a/v2/artifacts/torchtfx"
    )
    with pytest.raises(ValueError, match="is per namespace: pass --namespace"):
        root_for_namespace(DEFAULT_MULTI_USER_ROOT, None)
    other = "minio://mlpipeline/private/team-b/x"
    assert namespace_in_root(other) == "team-b"
    with pytest.raises(ValueError, match="belongs to namespace 'team-b', but the run goes to 'team-a'"):
        root_for_namespace(other, "team-a")
    assert root_for_namespace(other, None) == other  # single-user: nothing to check against
    assert root_for_namespace("gs://b/private-artifacts/team-b/x", "team-a") == "gs://b/private-artifacts/team-b/x"
