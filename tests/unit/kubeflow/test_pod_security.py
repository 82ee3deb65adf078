"""Every pod the project's Kubernetes manifests create passes Pod Security "restricted", so a locked-down
namespace admits them; the one exception is the root chown fallback, which says it needs "baseline". (The
training pods are built in code and checked in tests/unit/components/torch_trainer/test_trainjob.py and
test_pytorchjob.py; KFP's step pods are the backend's: kubeflow/README.md, Locked-down namespaces.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.paths import PROJECT_ROOT
from tests.unit.kubeflow.test_storage_manifests import pod_security_violations

KUBEFLOW = PROJECT_ROOT / "kubeflow"
BASELINE_ONLY = {"storage/shared-volume-chown.yaml"}  # a chown needs root and CAP_CHOWN


def _pod_specs(doc: dict) -> list[dict]:
    """The pod specs of a workload document (Deployment, Job, ...), found by their ``containers``."""
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if "containers" in node:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found


def _manifests() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(KUBEFLOW.rglob("*.yaml")):
        name = path.relative_to(KUBEFLOW).as_posix()
        if name == "pools.yaml":
            continue  # the project's config, not a manifest
        docs += [(name, d) for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and _pod_specs(d)]
    return docs


MANIFESTS = _manifests()


def test_the_manifests_with_pods_are_found():
    assert {name for name, _ in MANIFESTS} == {
        "serving/tf-serving.yaml",
        "storage/shared-volume.yaml",
        "storage/shared-volume-chown.yaml",
    }


@pytest.mark.parametrize(("name", "doc"), MANIFESTS, ids=[f"{n}:{d['kind']}" for n, d in MANIFESTS])
def test_every_pod_passes_the_level_it_declares(name: str, doc: dict):
    level = "baseline" if name in BASELINE_ONLY else "restricted"
    for pod in _pod_specs(doc):
        assert pod_security_violations(pod, level) == [], f"{name}: {doc['kind']}"


def test_the_baseline_exception_says_so_in_its_header():
    header = Path(KUBEFLOW / next(iter(BASELINE_ONLY))).read_text().split("apiVersion", 1)[0]
    assert "baseline" in header
