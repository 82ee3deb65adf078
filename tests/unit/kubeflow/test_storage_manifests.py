"""kubeflow/storage/, checked statically (no cluster here): the claim is the one every step, PyTorchJob replica
and TF Serving mount, ReadWriteMany; the init Job, which passes Pod Security "restricted", has a fresh volume's
root made writable for the UID every step runs as (KFP sets no fsGroup on a step's pod, so nothing else would)
and checks it; the root chown fallback needs "baseline"; the LimitRange gives every container of the namespace
an ephemeral-storage request, which KFP cannot."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import yaml
from kubernetes import client

from tests.paths import PROJECT_ROOT
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.pipeline.kfp.config import load_kubeflow_settings

STORAGE = PROJECT_ROOT / "kubeflow" / "storage"
MANIFEST = STORAGE / "shared-volume.yaml"
SETTINGS = load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml")
DOCS = {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}
PVC, JOB = DOCS["PersistentVolumeClaim"], DOCS["Job"]
POD = JOB["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
CHOWN_JOB = yaml.safe_load((STORAGE / "shared-volume-chown.yaml").read_text())
CHOWN_POD = CHOWN_JOB["spec"]["template"]["spec"]
(CHOWN_CONTAINER,) = CHOWN_POD["containers"]
LIMIT_RANGE = yaml.safe_load((STORAGE / "ephemeral-storage.yaml").read_text())
# Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards): capabilities "baseline"
# lets a container add, and the only one "restricted" does.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}


def _setting(pod: dict, container: dict, key: str):
    """A container's security setting, else its pod's (how Kubernetes resolves it)."""
    value = (container.get("securityContext") or {}).get(key)
    return value if value is not None else (pod.get("securityContext") or {}).get(key)


def pod_security_violations(pod: dict, level: str) -> list[str]:
    """What the Pod Security admission at ``level`` (baseline or restricted) refuses in ``pod``: the checks that
    apply to these pods (no host namespaces, ports or paths appear in them)."""
    problems = []
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container.get("securityContext") or {}
        added = set((context.get("capabilities") or {}).get("add", []))
        seccomp = (_setting(pod, container, "seccompProfile") or {}).get("type")
        if context.get("privileged"):
            problems.append("privileged")
        if added - BASELINE_CAPABILITIES:
            problems.append(f"capabilities {sorted(added - BASELINE_CAPABILITIES)}")
        if seccomp == "Unconfined":
            problems.append("seccomp Unconfined")
        if level != "restricted":
            continue
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append("no seccompProfile RuntimeDefault")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append("allowPrivilegeEscalation")
        if "ALL" not in (context.get("capabilities") or {}).get("drop", []) or added - {"NET_BIND_SERVICE"}:
            problems.append("capabilities not dropped")
        if _setting(pod, container, "runAsNonRoot") is not True or _setting(pod, container, "runAsUser") == 0:
            problems.append("runs as root")
    return problems


def _image_uid() -> int:
    """The UID the step image runs as (kubeflow/Dockerfile)."""
    dockerfile = (PROJECT_ROOT / "kubeflow" / "Dockerfile").read_text()
    uid = int(re.search(r"^ARG APP_UID=(\d+)$", dockerfile, re.M).group(1))
    assert re.search(r"^USER \$\{APP_UID\}:\$\{APP_UID\}$", dockerfile, re.M)
    return uid


def _claims(node) -> list[str]:
    if isinstance(node, dict):
        return [node["claimName"]] if "claimName" in node else [c for v in node.values() for c in _claims(v)]
    return [c for v in node for c in _claims(v)] if isinstance(node, list) else []


def test_the_claim_is_the_pipelines_shared_volume_and_read_write_many():
    (volume,) = SETTINGS.volumes
    assert PVC["metadata"]["name"] == volume.claim_name
    assert PVC["spec"]["accessModes"] == ["ReadWriteMany"]
    serving = list(yaml.safe_load_all((PROJECT_ROOT / "kubeflow" / "serving" / "tf-serving.yaml").read_text()))
    assert _claims(serving) == [volume.claim_name]  # TF Serving reads the Promoter's files from this claim


def test_the_init_job_passes_pod_security_restricted():
    """A locked-down namespace refuses any pod that could run as root, keep capabilities or escalate."""
    assert pod_security_violations(POD, "restricted") == []
    assert POD["restartPolicy"] == "Never" and JOB["spec"]["backoffLimit"] >= 1
    image, _, tag = CONTAINER["image"].rpartition(":")
    assert image and tag and tag != "latest"


def test_the_init_job_makes_the_volume_root_the_group_of_the_uid_every_step_runs_as_and_checks_it():
    """No chown under "restricted": fsGroup has the kubelet give the root to the steps' group (where the storage
    supports it), and the Job fails unless UID 1000 can then create a file there."""
    (volume,) = SETTINGS.volumes
    (mount,) = CONTAINER["volumeMounts"]
    (pod_volume,) = POD["volumes"]
    assert pod_volume["persistentVolumeClaim"]["claimName"] == volume.claim_name == PVC["metadata"]["name"]
    assert mount == {"name": pod_volume["name"], "mountPath": volume.mount_path}
    uid = _image_uid()
    context = POD["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (uid, uid, uid)
    assert context["fsGroupChangePolicy"] == "OnRootMismatch"  # quick on a volume already full of runs
    # The PyTorchJob replicas write the same volume as the same user.
    assert PyTorchJobSettings(image="img:1", num_nodes=2).run_as_user == uid
    script = CONTAINER["command"][-1]
    assert f"touch {volume.mount_path}/" in script and "exit 1" in script and "chown" not in script


def test_the_chown_fallback_needs_baseline_and_gets_only_what_a_chown_needs():
    """A chown needs root and CAP_CHOWN, which "restricted" never allows: the fallback passes "baseline" with
    everything else locked down, and says how an admin runs it once."""
    assert pod_security_violations(CHOWN_POD, "baseline") == []
    assert "runs as root" in pod_security_violations(CHOWN_POD, "restricted")
    context = CHOWN_CONTAINER["securityContext"]
    assert context["runAsUser"] == 0 and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    assert CHOWN_POD["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (volume,) = SETTINGS.volumes
    uid = _image_uid()
    owner = re.search(r"chown (\d+):(\d+) (\S+)", CHOWN_CONTAINER["command"][-1])
    assert (int(owner.group(1)), int(owner.group(2)), owner.group(3)) == (uid, uid, volume.mount_path)
    assert "-R" not in CHOWN_CONTAINER["command"][-1]  # idempotent and quick on a volume already full of runs
    assert CHOWN_POD["volumes"] == POD["volumes"] and CHOWN_CONTAINER["volumeMounts"] == CONTAINER["volumeMounts"]
    assert "pod-security.kubernetes.io/enforce=baseline" in (STORAGE / "shared-volume-chown.yaml").read_text()


def test_the_limit_range_requests_ephemeral_storage_and_limits_nothing():
    """KFP gives a step no ephemeral-storage request at any backend; the namespace's LimitRange gives every
    container one, and no limit that would evict a step holding large inputs."""
    (limit,) = LIMIT_RANGE["spec"]["limits"]
    assert limit["type"] == "Container" and set(limit) == {"type", "defaultRequest"}
    assert set(limit["defaultRequest"]) == {"ephemeral-storage"}


def test_both_documents_survive_the_kubernetes_models():
    """Real kubernetes client models: each document deserializes and serializes back unchanged, so no field
    is misspelled or dropped."""
    api = client.ApiClient()
    documents = ((PVC, "V1PersistentVolumeClaim"), (JOB, "V1Job"), (CHOWN_JOB, "V1Job"), (LIMIT_RANGE, "V1LimitRange"))
    for document, model in documents:
        parsed = api.deserialize(SimpleNamespace(data=json.dumps(document)), model)
        assert api.sanitize_for_serialization(parsed) == document, model
