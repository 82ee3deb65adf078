"""kubeflow/storage/shared-volume.yaml, checked statically (no cluster here): the claim is the one every step,
PyTorchJob replica and TF Serving mount, ReadWriteMany; the init Job makes a fresh volume's root writable for
the UID every step runs as (KFP sets no fsGroup on a step's pod, so nothing else would)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import yaml
from kubernetes import client

from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.data.config.dataset import PROJECT_ROOT
from torchtfx.pipeline.kfp.config import load_kubeflow_settings

MANIFEST = PROJECT_ROOT / "kubeflow" / "storage" / "shared-volume.yaml"
SETTINGS = load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml")
DOCS = {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}
PVC, JOB = DOCS["PersistentVolumeClaim"], DOCS["Job"]
POD = JOB["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]


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


def test_the_init_job_gives_the_volume_root_to_the_uid_every_step_runs_as():
    (volume,) = SETTINGS.volumes
    (mount,) = CONTAINER["volumeMounts"]
    (pod_volume,) = POD["volumes"]
    assert pod_volume["persistentVolumeClaim"]["claimName"] == volume.claim_name == PVC["metadata"]["name"]
    assert mount == {"name": pod_volume["name"], "mountPath": volume.mount_path}
    script = CONTAINER["command"][-1]
    owner = re.search(r"chown (\d+):(\d+) (\S+)", script)
    uid = _image_uid()
    assert (int(owner.group(1)), int(owner.group(2)), owner.group(3)) == (uid, uid, volume.mount_path)
    # The PyTorchJob replicas write the same volume as the same user.
    assert PyTorchJobSettings(image="img:1", num_nodes=2).run_as_user == uid
    assert "-R" not in script  # idempotent and quick on a volume already full of runs
    assert f"chmod 2775 {volume.mount_path}" in script


def test_the_init_job_runs_once_as_root_with_only_the_capabilities_it_needs():
    assert POD["restartPolicy"] == "Never" and JOB["spec"]["backoffLimit"] >= 1
    context = CONTAINER["securityContext"]
    assert context["runAsUser"] == 0 and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    image, _, tag = CONTAINER["image"].rpartition(":")
    assert image and tag and tag != "latest"


def test_both_documents_survive_the_kubernetes_models():
    """Real kubernetes client models: each document deserializes and serializes back unchanged, so no field
    is misspelled or dropped."""
    api = client.ApiClient()
    for document, model in ((PVC, "V1PersistentVolumeClaim"), (JOB, "V1Job")):
        parsed = api.deserialize(SimpleNamespace(data=json.dumps(document)), model)
        assert api.sanitize_for_serialization(parsed) == document, model
