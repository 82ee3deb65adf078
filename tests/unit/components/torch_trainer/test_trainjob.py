"""TrainJob path (Kubeflow Trainer v2): the manifest in each Trainer release line's shape, pod security on every pod
template the project creates, the runner's status handling, and discovery's choice between TrainJob and PyTorchJob.
The API server is a fake (tests/fakes/trainer_api.py, a real HTTP server spoken to by the real kubernetes client);
the runner, discovery and manifests are real."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from kubernetes import client

from tests.fakes.http_server import http_server
from tests.fakes.trainer_api import LocalTrainer
from torchtfx.components.torch_trainer.cluster import discovery, job_runner, pod_spec
from torchtfx.components.torch_trainer.cluster import pytorchjob_manifest as pj_manifest
from torchtfx.components.torch_trainer.cluster import trainjob_manifest as tj_manifest
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError, PyTorchJobSettings
from torchtfx.components.torch_trainer.cluster.trainjob_runner import TrainJobRunner

NS, NAME = "team-a", "torchtfx-train-0123456789"
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}


def settings(**overrides) -> PyTorchJobSettings:
    base = dict(
        namespace=NS,
        image="registry.example/torchtfx:1.0",
        num_nodes=3,
        nproc_per_node=2,
        gpus_per_node=2,
        cpu="8",
        node_selector={"pool": "gpu"},
        tolerations=({"key": "gpu", "operator": "Exists"},),
        volumes=({"claim_name": "shared", "mount_path": "/mnt/shared"},),
        service_account="trainer",
        env_from_secrets=({"secret": "mlflow", "key": "password", "env": "MLFLOW_TRACKING_PASSWORD"},),
        image_pull_secrets=("registry-pull",),
    )
    base.update(overrides)
    return PyTorchJobSettings(**base)


def trainjob(shape=tj_manifest.RUNTIME_PATCHES, command=("python", "-m", "x"), **overrides) -> dict:
    return tj_manifest.build_trainjob(settings(**overrides), NAME, list(command), {"app": "torchtfx"}, shape=shape)


def node_pod_template(m: dict) -> dict:
    """The pod template (metadata + spec) the manifest asks for on the ``node`` job, in whichever shape."""
    spec = m["spec"]
    if "runtimePatches" in spec:
        (patch,) = spec["runtimePatches"]
        (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert rjob["name"] == "node"
        return rjob["template"]["spec"]["template"]
    if "podTemplateOverrides" in spec:
        (override,) = spec["podTemplateOverrides"]
        assert override["targetJobs"] == [{"name": "node"}]
        return {k: v for k, v in override.items() if k != "targetJobs"}
    (override,) = spec["podSpecOverrides"]
    return {"spec": {k: v for k, v in override.items() if k != "targetJobs"}}


# ---------------------------------------------------------------- manifest


def test_trainjob_manifest_on_torch_distributed():
    """Real build_trainjob (nothing simulated): runtimeRef, the trainer block, no PET_* of our own, the deadline."""
    m = trainjob(command=pj_manifest.worker_command("/mnt/shared/job.json", 2, "/mnt/shared/fatal"))
    assert (m["apiVersion"], m["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert m["metadata"] == {"name": NAME, "namespace": NS, "labels": {"app": "torchtfx"}}
    spec = m["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 3 and trainer["numProcPerNode"] == 2 and trainer["image"].endswith(":1.0")
    assert trainer["command"][:4] == ["python", "-m", "torch.distributed.run", "--max-restarts=2"]
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2"}
    env = {e["name"]: e for e in trainer["env"]}
    assert not {n for n in env if n.startswith("PET_")}  # reserved: the torch plugin sets them
    assert env["MLFLOW_TRACKING_PASSWORD"]["valueFrom"] == {"secretKeyRef": {"name": "mlflow", "key": "password"}}
    assert spec["activeDeadlineSeconds"] == 24 * 3600


def test_every_pod_template_is_restricted_compliant():
    """Real manifests of both APIs: every pod template the project creates carries the restricted security contexts
    and the image pull secret (the TrainJob in the v2.2+ shape, the only one that can carry them)."""
    templates = [node_pod_template(trainjob())]
    for elastic in (False, True):
        extra = {"elastic_min_nodes": 2, "elastic_max_nodes": 4} if elastic else {}
        m = pj_manifest.build_manifest(settings(**extra), NAME, ["python"], {})
        templates += [r["template"] for r in m["spec"]["pytorchReplicaSpecs"].values()]
    assert len(templates) == 3  # PyTorchJobs are Workers only (no Master: test_pod_security.py)
    for template in templates:
        spec = template["spec"]
        assert spec["securityContext"] == RESTRICTED_POD
        assert spec["imagePullSecrets"] == [{"name": "registry-pull"}]
        assert all(c["securityContext"] == RESTRICTED_CONTAINER for c in spec["containers"])
        assert template["metadata"]["annotations"] == pod_spec.POD_ANNOTATIONS


def test_trainjob_pod_template_survives_the_kubernetes_models():
    """Real kubernetes client models: the v2.2+ pod patch is a subset of a PodTemplateSpec, so it deserializes into
    V1PodTemplateSpec and back unchanged (no misspelled or dropped field). Only the response wrapper is a stand-in."""
    template = node_pod_template(trainjob())
    api = client.ApiClient()
    model = api.deserialize(SimpleNamespace(data=json.dumps(template)), "V1PodTemplateSpec")
    assert model.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    assert api.sanitize_for_serialization(model) == template
    resources = api.deserialize(
        SimpleNamespace(data=json.dumps(trainjob()["spec"]["trainer"]["resourcesPerNode"])), "V1ResourceRequirements"
    )
    assert resources.limits["nvidia.com/gpu"] == "2"


def test_older_trainer_shapes_carry_what_they_can_and_say_what_not(caplog):
    """Real build_trainjob in the v2.1 (Kubeflow 1.11) and v2.0 shapes: the fields their API lacks are left out with a
    warning naming them; pull secrets the v2.0 API cannot carry are an error, not a pod that never pulls."""
    with caplog.at_level(logging.WARNING, logger=tj_manifest.__name__):
        m = trainjob(shape=tj_manifest.POD_TEMPLATE_OVERRIDES)
    template = node_pod_template(m)
    assert template["spec"]["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert "securityContext" not in template["spec"] and "activeDeadlineSeconds" not in m["spec"]
    assert {"name": "data-0", "mountPath": "/mnt/shared"} in template["spec"]["containers"][0]["volumeMounts"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "securityContext" in warning and "v2.2.0 or newer" in warning and "restricted" in warning
    with pytest.raises(PyTorchJobConfigError, match="cannot set imagePullSecrets"):
        trainjob(shape=tj_manifest.POD_SPEC_OVERRIDES)
    v20 = node_pod_template(trainjob(shape=tj_manifest.POD_SPEC_OVERRIDES, image_pull_secrets=()))
    assert v20["spec"]["nodeSelector"] == {"pool": "gpu"} and "metadata" not in v20


def test_elastic_settings_are_refused_for_a_trainjob():
    """Trainer v2 has no elastic policy: elastic settings name the PyTorchJob instead of being ignored."""
    with pytest.raises(PyTorchJobConfigError, match=r"no elastic training.*Training Operator v1"):
        trainjob(elastic_min_nodes=2, elastic_max_nodes=4)


def test_backoff_limit_is_refused_for_a_trainjob():
    """Trainer v2 has no backoff limit (no TrainJob field reaches the node Jobs or the JobSet's failurePolicy): a
    trainer.backoff_limit names why and what to use instead, rather than being dropped; unset, the TrainJob builds."""
    with pytest.raises(PyTorchJobConfigError) as err:
        trainjob(backoff_limit=5)
    text = str(err.value)
    for needle in ("trainer.backoff_limit: 5", "no backoff limit", "default of 6", "max_restarts", "runPolicy"):
        assert needle in text
    assert trainjob()["kind"] == "TrainJob"


# ------------------------------------------------------------- discovery


@pytest.fixture
def cluster(tmp_path) -> Iterator:
    """A factory of fake clusters serving the given APIs, each with the real kubernetes client pointed at it."""
    opened = []

    def make(served: tuple[str, ...], shape: str = "runtimePatches"):
        state = LocalTrainer(tmp_path, served=served, shape=shape)
        server = http_server(state.handle)
        api = client.ApiClient(client.Configuration(host=server.__enter__()))
        opened.append((server, api, state))
        return state, client.CustomObjectsApi(api), client.CoreV1Api(api)

    yield make
    for server, api, state in opened:
        api.close()
        server.__exit__(None, None, None)
        for name in list(state.procs):
            state.stop(name)


@pytest.mark.parametrize(
    ("served", "shape", "kind", "field"),
    [
        (("trainjobs", "pytorchjobs"), "runtimePatches", "TrainJob", "runtimePatches"),
        (("trainjobs",), "podTemplateOverrides", "TrainJob", "podTemplateOverrides"),
        (("trainjobs",), "podSpecOverrides", "TrainJob", "podSpecOverrides"),
        (("pytorchjobs",), "", "PyTorchJob", None),
    ],
)
def test_discovery_prefers_trainjob_and_reads_its_shape(cluster, served, shape, kind, field):
    """Real discovery over HTTP: TrainJob when served (also when PyTorchJob is), in the shape its schema has;
    PyTorchJob when only the Training Operator v1 is there."""
    _, api, core = cluster(served, shape)
    runner = discovery.select_runner(settings(image_pull_secrets=()), api, core)
    assert runner.kind.kind == kind
    m = runner.build_manifest(settings(image_pull_secrets=()), NAME, ["python"], {})
    assert m["kind"] == kind and (field is None or field in m["spec"])


def test_discovery_keeps_pytorchjob_for_elastic_settings(cluster):
    """Both served and elastic settings: the PyTorchJob, the API that has an elasticPolicy."""
    _, api, core = cluster(("trainjobs", "pytorchjobs"))
    assert discovery.select_runner(settings(elastic_min_nodes=2, elastic_max_nodes=4), api, core).kind.kind == (
        "PyTorchJob"
    )


def test_discovery_keeps_pytorchjob_for_a_backoff_limit(cluster):
    """Both served and trainer.backoff_limit set: the PyTorchJob, whose runPolicy carries it; only Trainer v2 served:
    the TrainJob refuses it before anything is created."""
    _, api, core = cluster(("trainjobs", "pytorchjobs"))
    runner = discovery.select_runner(settings(backoff_limit=5), api, core)
    assert runner.kind.kind == "PyTorchJob"
    assert (
        runner.build_manifest(settings(backoff_limit=5), NAME, ["python"], {})["spec"]["runPolicy"]["backoffLimit"] == 5
    )
    state, api, core = cluster(("trainjobs",))
    runner = discovery.select_runner(settings(backoff_limit=5, image_pull_secrets=()), api, core)
    with pytest.raises(PyTorchJobConfigError, match=r"trainer\.backoff_limit: 5"):
        runner.build_manifest(settings(backoff_limit=5, image_pull_secrets=()), NAME, ["python"], {})
    assert ("POST", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs") not in state.requests


def test_discovery_with_neither_names_both(cluster):
    """kubeflow.org/v1 is served (Kubeflow's Notebook/Profile CRDs) but without pytorchjobs, and no Trainer v2:
    the error names both APIs and what to install."""
    _, api, core = cluster(())
    with pytest.raises(job_runner.ClusterJobFailedError) as err:
        discovery.select_runner(settings(), api, core)
    text = str(err.value)
    for needle in (
        "trainjobs.trainer.kubeflow.org/v1alpha1",
        "pytorchjobs.kubeflow.org/v1",
        "Kubeflow Trainer v2",
        "torch-distributed",
        "Training Operator v1",
    ):
        assert needle in text


# ---------------------------------------------------------------- runner


def test_trainjob_runner_completes_and_deletes(cluster):
    """Real runner and client against the fake controller; the node processes are trivial real processes."""
    state, api, core = cluster(("trainjobs",))
    runner = TrainJobRunner(api, core)
    final = runner.run(trainjob(command=(sys.executable, "-c", "pass"), image_pull_secrets=()), 60, 0.05)
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in final["conditions"])
    assert final["jobsStatus"][0]["succeeded"] == 3 and state.jobs == {}
    assert ("DELETE", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}") in state.requests


def test_trainjob_runner_explains_a_failure(cluster):
    """A node that exits 3 after printing: the Failed condition, the failed count and its log tail."""
    state, api, core = cluster(("trainjobs",))
    code = "import sys; print('RuntimeError: gloo timeout', flush=True); sys.exit(3)"
    with pytest.raises(job_runner.ClusterJobFailedError) as err:
        TrainJobRunner(api, core).run(trainjob(command=(sys.executable, "-c", code), image_pull_secrets=()), 60, 0.05)
    text = str(err.value)
    assert re.search(r"failed: node: [1-3] failed", text) and "Failed=FailedJobs" in text
    assert "(exit code 3), log tail:" in text and "RuntimeError: gloo timeout" in text
    assert "kubectl -n team-a logs -l jobset.sigs.k8s.io/jobset-name=" in text and state.jobs == {}


def test_trainjob_runner_times_out_and_deletes(cluster):
    """Nodes that never finish: the timeout error names the TrainJob and points at events; the job is deleted."""
    state, api, core = cluster(("trainjobs",))
    code = "import time; time.sleep(60)"
    with pytest.raises(job_runner.ClusterJobTimeoutError, match=r"did not finish within 0\.3s.*get events"):
        TrainJobRunner(api, core).run(trainjob(command=(sys.executable, "-c", code), image_pull_secrets=()), 0.3, 0.1)
    assert state.jobs == {} and state.procs == {}


def test_trainjob_create_rejection_is_explained(cluster):
    """The fake's webhook rejects reserved PET_* env (as the torch plugin's validation does): the API message and
    the kind are in the error, and nothing is left to delete."""
    state, api, core = cluster(("trainjobs",))
    m = trainjob(image_pull_secrets=())
    m["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "2"})
    with pytest.raises(job_runner.ClusterJobFailedError, match=r"Creating TrainJob .*422.*reserved envs"):
        TrainJobRunner(api, core).run(m, 60, 0.05)
    assert not [r for r in state.requests if r[0] == "DELETE"]
