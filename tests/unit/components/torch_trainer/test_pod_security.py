"""Every pod our multi-node jobs make is admitted by Pod Security "restricted": the real manifests from
build_manifest/build_trainjob, expanded into pods as the controllers expand them and checked by the admission rules
of the Kubernetes sources (tests/fakes/pod_security.py; the controllers and the admission plugin are the doubles)."""

from __future__ import annotations

import copy

import pytest

from tests.fakes import pod_security
from torchtfx.components.torch_trainer.cluster import pytorchjob_manifest, trainjob_manifest
from torchtfx.components.torch_trainer.cluster import pytorchjob_settings as job_settings

NAME = "taxi-train-0123456789"
COMMAND = pytorchjob_manifest.worker_command("/mnt/pipeline/job.json", 1, "/mnt/pipeline/run/fatal_error.txt")
LABELS = {"app": "torchtfx"}


def settings(**overrides) -> job_settings.PyTorchJobSettings:
    base = dict(
        namespace="team-a",
        image="registry.example/torchtfx:1.0",
        num_nodes=3,
        nproc_per_node=2,
        gpus_per_node=2,
        volumes=({"claim_name": "pipeline-root", "mount_path": "/mnt/pipeline"},),
        env_from_secrets=({"secret": "mlflow", "key": "password", "env": "MLFLOW_TRACKING_PASSWORD"},),
        image_pull_secrets=("registry-pull",),
    )
    return job_settings.PyTorchJobSettings(**{**base, **overrides})


@pytest.mark.parametrize("elastic", [{}, {"elastic_min_nodes": 2, "elastic_max_nodes": 4}])
def test_every_pytorchjob_pod_is_admitted(elastic):
    """Fixed-size and elastic jobs alike: Workers only (so the operator adds no init-pytorch container) and every
    Worker pod passes "restricted"."""
    m = pytorchjob_manifest.build_manifest(settings(**elastic), NAME, COMMAND, LABELS)
    pods = pod_security.pytorchjob_pods(m)
    assert [p[0] for p in pods] == [f"{NAME}-worker-{i}" for i in range(3)]
    assert all("initContainers" not in spec for _, _, spec in pods)
    assert pod_security.refused(pods) == {}


def test_fixed_size_job_is_an_elastic_job_with_equal_bounds():
    """The operator's rendezvous for a Master-less job: PET_NNODES "3:3" (elastic.go:139-143@v1.9.2), c10d at
    <name>-worker-0, torchrun's restarts from hparams.max_restarts."""
    m = pytorchjob_manifest.build_manifest(settings(max_restarts=1), NAME, COMMAND, LABELS)
    assert set(m["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    assert m["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert m["spec"]["elasticPolicy"] == {"minReplicas": 3, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 1}


def test_the_operators_init_container_is_refused():
    """The double can refuse: a Master + Worker job (the shape before #44) gets init-pytorch on its Worker, which
    "restricted" refuses for privilege escalation and capabilities; the Master (no init container) passes."""
    m = pytorchjob_manifest.build_manifest(settings(), NAME, COMMAND, LABELS)
    replicas = m["spec"]["pytorchReplicaSpecs"]
    replicas["Master"] = {**copy.deepcopy(replicas["Worker"]), "replicas": 1}
    refused = pod_security.refused(pod_security.pytorchjob_pods(m))
    assert set(refused) == {f"{NAME}-worker-{i}" for i in range(replicas["Worker"]["replicas"])}
    checks = [v.split(":")[0] for v in refused[f"{NAME}-worker-0"]]
    assert checks == ["allowPrivilegeEscalation", "capabilities_restricted"]
    assert all("'init-pytorch'" in v and "'pytorch'" not in v for v in refused[f"{NAME}-worker-0"])


_MUTATIONS = {
    "hostNamespaces": lambda s: s.update(hostNetwork=True),
    "restrictedVolumes": lambda s: s["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
    "privileged": lambda s: s["containers"][0]["securityContext"].update(privileged=True),
    "capabilities_restricted": lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["BPF"]),
    "runAsNonRoot": lambda s: s["securityContext"].update(runAsNonRoot=False),
    "runAsUser": lambda s: s["containers"][0]["securityContext"].update(runAsUser=0),
    "seccompProfile_restricted": lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}),
    "hostPorts": lambda s: s["containers"][0]["ports"][0].update(hostPort=23456),
    "sysctls": lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
}


@pytest.mark.parametrize("check", sorted(_MUTATIONS))
def test_each_restricted_rule_refuses_its_field(check):
    """One field of our own Worker pod set as the Kubernetes policy forbids: that check, and only it, refuses."""
    m = pytorchjob_manifest.build_manifest(settings(), NAME, COMMAND, LABELS)
    spec = copy.deepcopy(m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"])
    _MUTATIONS[check](spec)
    assert [v.split(":")[0] for v in pod_security.violations({}, spec)] == [check]


def test_trainjob_pods_are_admitted_with_runtime_patches():
    """Trainer v2.2+ (spec.runtimePatches): the runtime's node container merged with our security contexts."""
    m = trainjob_manifest.build_trainjob(settings(), NAME, COMMAND, LABELS, trainjob_manifest.RUNTIME_PATCHES)
    pods = pod_security.trainjob_pods(m)
    assert len(pods) == 3 and pods[0][2]["containers"][0]["image"] == "registry.example/torchtfx:1.0"
    assert pod_security.refused(pods) == {}


@pytest.mark.parametrize("shape", [trainjob_manifest.POD_TEMPLATE_OVERRIDES, trainjob_manifest.POD_SPEC_OVERRIDES])
def test_trainjob_pods_before_v2_2_are_refused_for_the_fields_the_api_lacks(shape, caplog):
    """Trainer v2.0/v2.1 cannot carry a securityContext: the pods are refused for exactly those fields, as the
    warning the step logs says (its fix: Trainer v2.2+ or the PyTorchJob)."""
    m = trainjob_manifest.build_trainjob(settings(image_pull_secrets=()), NAME, COMMAND, LABELS, shape)
    refused = pod_security.refused(pod_security.trainjob_pods(m))
    checks = {v.split(":")[0] for v in refused[f"{NAME}-node-0-0"]}
    missing = {"allowPrivilegeEscalation", "capabilities_restricted", "runAsNonRoot", "seccompProfile_restricted"}
    assert checks == missing
    assert "securityContext" in caplog.text and "Pod Security 'restricted'" in caplog.text
