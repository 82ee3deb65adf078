"""kubeflow/rbac/torchtfx-trainer.yaml grants exactly what the multi-node runners ask the API server for.

The needed (group, resource, verb) triples are derived from the requests the real runners send, over HTTP through
the real kubernetes client, to fake API servers (tests/fakes/trainer_api.py for a TrainJob, test_pytorchjob's
FakeKubernetes for a PyTorchJob) in a run that exercises every call: discovery, create, polls, a failure with pod
logs, delete. Discovery URLs are checked to be discovery only (system:discovery grants them)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from kubernetes import client

from tests.fakes.http_server import http_server
from tests.fakes.trainer_api import LocalTrainer
from tests.unit.components.torch_trainer import test_pytorchjob as pj
from torchtfx.components.torch_trainer.cluster import discovery, job_runner
from torchtfx.components.torch_trainer.cluster import trainjob_manifest as tj_manifest

RBAC = Path(__file__).resolve().parents[4] / "kubeflow" / "rbac" / "torchtfx-trainer.yaml"
_RESOURCE = re.compile(
    r"/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)/namespaces/[^/]+/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>[^/]+))?"
)
_DISCOVERY = re.compile(r"/apis/[^/]+/[^/]+|/openapi/v3/apis/[^/]+/[^/]+")
_VERBS = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}


def triple(method: str, path: str) -> tuple[str, str, str] | None:
    """(group, resource[/subresource], verb) of a resource request; None for a discovery URL."""
    if _DISCOVERY.fullmatch(path):
        return None
    m = _RESOURCE.fullmatch(path)
    assert m, f"neither a namespaced resource nor discovery: {method} {path}"
    resource = m["res"] + (f"/{m['sub']}" if m["sub"] else "")
    verb = _VERBS.get(method) or ("get" if m["name"] else "list")
    return m["group"] or "", resource, verb


def trainjob_requests(tmp_path: Path) -> list[tuple[str, str]]:
    state = LocalTrainer(tmp_path, served=("trainjobs", "pytorchjobs"))
    with http_server(state.handle) as url:
        api = client.ApiClient(client.Configuration(host=url))
        runner = discovery.select_runner(
            pj.settings(image_pull_secrets=()), client.CustomObjectsApi(api), client.CoreV1Api(api)
        )
        manifest = runner.build_manifest(pj.settings(), "rbac-check", [sys.executable, "-c", "raise SystemExit(2)"], {})
        try:
            runner.run(manifest, 60, 0.05)
        except job_runner.ClusterJobFailedError as err:
            assert "log tail" in str(err)  # the pod list and pod log calls were made
        api.close()
    assert manifest["kind"] == tj_manifest.KIND
    return state.requests


def pytorchjob_requests() -> list[tuple[str, str]]:
    fake = pj.FakeKubernetes()
    fake.statuses = [pj.status("Created", "Failed", message="boom", Worker={"failed": 1})]
    fake.pods, fake.log_text = [pj.worker_pod(exit_code=1)], "Traceback\n"
    with http_server(fake.handle) as url:
        api = client.ApiClient(client.Configuration(host=url))
        runner = pj.runners.PyTorchJobRunner(client.CustomObjectsApi(api), client.CoreV1Api(api))
        try:
            runner.run(pj.manifest(), 60, 0.01)
        except job_runner.ClusterJobFailedError as err:
            assert "log tail" in str(err)
        api.close()
    return [(r["method"], r["path"]) for r in fake.requests]


def granted() -> set[tuple[str, str, str]]:
    docs = list(yaml.safe_load_all(RBAC.read_text()))
    (role,) = [d for d in docs if d["kind"] == "Role"]
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "default-editor", "namespace": "PROFILE_NAMESPACE"}
    ]
    assert "namespace" not in role["metadata"]  # set by `kubectl apply -n`
    return {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


def test_role_grants_exactly_what_the_runners_call(tmp_path):
    needed = {t for m, p in trainjob_requests(tmp_path) + pytorchjob_requests() if (t := triple(m, p))}
    assert needed == granted()
    assert ("trainer.kubeflow.org", "trainjobs", "create") in needed and ("", "pods/log", "get") in needed
