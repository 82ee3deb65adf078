"""The PlatformSpec's executor configs against the fields the KFP backend's driver knows.

The KFP SDK cannot check them: ``PlatformDeploymentConfig.executors`` is ``map<string, Struct>``, so any key
parses. The backend then parses each executor's config into ``KubernetesExecutorConfig``:
- 2.1-2.4: the driver, strictly (``jsonpb.UnmarshalString`` in backend/src/v2/cmd/driver/main.go:138@2.1.0), so
  an unknown field fails the step;
- 2.5: the driver drops it (``util.UnmarshalString``, ``DiscardUnknown``/``AllowUnknownFields``:
  backend/src/common/util/json.go:72-75@2.5.0), and so does the API server's workflow compiler, which ignores a
  config it cannot parse (``if err == nil``, backend/src/v2/compiler/argocompiler/container.go:446@2.5.0);
- 2.14-2.17: the API server's compiler parses it with a strict ``protojson.Unmarshal`` and refuses the run
  ("failed to unmarshal kubernetes config": container.go:285@2.14.0, :309@2.15.0, :320@2.16.0, :326@2.17.0;
  kubeflow/pipelines#12049), though the driver still drops it (json.go:72-77@2.16.0).
So a field of a newer backend's proto is refused by 2.14 and 2.15 (``torchtfx submit`` checks the server's
version first: test_submit.py). The field names below are vendored from the proto the backend was built with:
the ``github.com/kubeflow/pipelines/kubernetes_platform`` version that the backend's go.mod pins, in-tree from
2.5.0."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.kfp.compile import compile_pipeline, executor_label
from torchtfx.pipeline.kfp.config import settings_from_dict

POOLS = PROJECT_ROOT / "kubeflow" / "pools.yaml"

# kubernetes_platform/proto/kubernetes_executor_config.proto at 19a24e3e99db, the version go.mod pins at backend
# tag 2.1.0 (the oldest backend kubeflow/README.md supports). "field:Message" recurses into Message; plain names
# are scalars, maps or Structs. Only messages reachable from KubernetesExecutorConfig.
FIELDS_2_1 = {
    "KubernetesExecutorConfig": (
        "secret_as_volume:SecretAsVolume",
        "secret_as_env:SecretAsEnv",
        "pvc_mount:PvcMount",
        "node_selector:NodeSelector",
        "pod_metadata:PodMetadata",
        "image_pull_secret:ImagePullSecret",
        "image_pull_policy",
        "config_map_as_volume:ConfigMapAsVolume",
        "config_map_as_env:ConfigMapAsEnv",
        "active_deadline_seconds",
        "field_path_as_env:FieldPathAsEnv",
        "tolerations:Toleration",
    ),
    "SecretAsVolume": ("secret_name", "mount_path"),
    "SecretAsEnv": ("secret_name", "key_to_env:SecretAsEnv.SecretKeyToEnvMap"),
    "SecretAsEnv.SecretKeyToEnvMap": ("secret_key", "env_var"),
    "TaskOutputParameterSpec": ("producer_task", "output_parameter_key"),
    "PvcMount": (
        "task_output_parameter:TaskOutputParameterSpec",
        "constant",
        "component_input_parameter",
        "mount_path",
    ),
    "NodeSelector": ("labels",),
    "PodMetadata": ("labels", "annotations"),
    "ConfigMapAsVolume": ("config_map_name", "mount_path"),
    "ConfigMapAsEnv": ("config_map_name", "key_to_env:ConfigMapAsEnv.ConfigMapKeyToEnvMap"),
    "ConfigMapAsEnv.ConfigMapKeyToEnvMap": ("config_map_key", "env_var"),
    "ImagePullSecret": ("secret_name",),
    "FieldPathAsEnv": ("name", "field_path"),
    "Toleration": ("key", "operator", "value", "effect", "toleration_seconds"),
}
# The same proto at d911c8b73b49, pinned by backend tags 2.3.0 and 2.4.0, whose driver also mounts
# emptyDirMounts (backend/src/v2/driver/driver.go). What it adds to the 2.1 fields (fields are only ever
# added, so 2.2's pin, 8b2a099e8c9f, lies between the two):
FIELDS_2_3 = {
    **FIELDS_2_1,
    "KubernetesExecutorConfig": (
        *FIELDS_2_1["KubernetesExecutorConfig"],
        "generic_ephemeral_volume:GenericEphemeralVolume",
        "node_affinity:NodeAffinityTerm",
        "pod_affinity:PodAffinityTerm",
        "enabled_shared_memory:EnabledSharedMemory",
        "empty_dir_mounts:EmptyDirMount",
    ),
    "SecretAsVolume": ("secret_name", "mount_path", "optional"),
    "ConfigMapAsVolume": ("config_map_name", "mount_path", "optional"),
    "GenericEphemeralVolume": (
        "volume_name",
        "mount_path",
        "access_modes",
        "size",
        "default_storage_class",
        "storage_class_name",
        "metadata:PodMetadata",
    ),
    "SelectorRequirement": ("key", "operator", "values"),
    "NodeAffinityTerm": ("match_expressions:SelectorRequirement", "match_fields:SelectorRequirement", "weight"),
    "PodAffinityTerm": (
        "match_pod_expressions:SelectorRequirement",
        "match_pod_labels",
        "topology_key",
        "namespaces",
        "match_namespace_expressions:SelectorRequirement",
        "match_namespace_labels",
        "weight",
        "anti",
    ),
    "EnabledSharedMemory": ("volume_name", "size"),
    "EmptyDirMount": ("volume_name", "mount_path", "medium", "size_limit"),
}
# In-tree from 2.5.0 (go.mod replaces the module with ./kubernetes_platform). At 2.14.0 the names became parameters
# too (secret_name, constant, ... deprecated but still read: backend/src/v2/driver/k8s.go:374-395@2.14.0); 2.16.0
# adds the container's securityContext (proto line 43, message at 277; applied at k8s.go:724-762@2.16.0), the same
# at 2.17.0. Only the messages this project writes, and what they gained:
# 2.14.0 and 2.15.0: KubernetesExecutorConfig ends at empty_dir_mounts = 17, no securityContext
# (kubernetes_executor_config.proto:24-43@2.15.0).
FIELDS_2_14 = {**FIELDS_2_3, "ImagePullSecret": ("secret_name", "secret_name_parameter")}
FIELDS_2_16 = {
    **FIELDS_2_14,
    "KubernetesExecutorConfig": (*FIELDS_2_3["KubernetesExecutorConfig"], "security_context:SecurityContext"),
    "SecurityContext": ("run_as_user", "run_as_group", "run_as_non_root"),
}
FIELDS_BY_BACKEND = {
    "2.1": FIELDS_2_1,
    "2.2": FIELDS_2_1,
    "2.3": FIELDS_2_3,
    "2.4": FIELDS_2_3,
    "2.14": FIELDS_2_14,
    "2.15": FIELDS_2_14,
    "2.16": FIELDS_2_16,
    "2.17": FIELDS_2_16,
}


def _json_name(field: str) -> str:
    """protoc's JSON name: lowerCamelCase (jsonpb accepts it and the proto name)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field)


def unknown_fields(value: dict, message: str, fields: dict[str, tuple[str, ...]]) -> list[str]:
    """Every key of ``value`` (recursively) that ``message`` of ``fields`` does not have, as a dotted key path."""
    allowed: dict[str, str] = {}
    for entry in fields[message]:
        name, _, sub_message = entry.partition(":")
        allowed[name] = allowed[_json_name(name)] = sub_message
    problems = []
    for key, item in value.items():
        if key not in allowed:
            problems.append(key)
        elif allowed[key]:
            for element in item if isinstance(item, list) else [item]:
                problems += [f"{key}.{p}" for p in unknown_fields(element, allowed[key], fields)]
    return problems


def executor_configs(raw: dict, tmp_path) -> dict[str, dict]:
    out = compile_pipeline(settings_from_dict(raw, "pools.yaml"), tmp_path / "pipeline.yaml")
    _, platform = yaml.safe_load_all(out.read_text())
    return platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def pools_raw(**trainer) -> dict:
    raw = yaml.safe_load(POOLS.read_text())
    raw["trainer"].update(trainer)
    return raw


def test_the_check_names_a_misspelled_or_unknown_field():
    config = {"pvcMounts": [], "nodeSelector": {"label": {}}, "secretAsEnv": [{"keyToEnv": [{"envVariable": "X"}]}]}
    assert unknown_fields(config, "KubernetesExecutorConfig", FIELDS_2_1) == [
        "pvcMounts",
        "nodeSelector.label",
        "secretAsEnv.keyToEnv.envVariable",
    ]
    assert unknown_fields({"emptyDirMounts": [{"volumeName": "x"}]}, "KubernetesExecutorConfig", FIELDS_2_1)
    assert not unknown_fields({"empty_dir_mounts": [{"volume_name": "x"}]}, "KubernetesExecutorConfig", FIELDS_2_3)


@pytest.mark.parametrize(
    ("backend", "trainer"),
    [
        ("2.1", {}),  # kubeflow/pools.yaml as shipped
        ("2.1", {"num_nodes": 2, "gpus_per_node": 4}),  # PyTorchJob: the Trainer step on the CPU pool
        ("2.2", {"gpus_per_node": 0}),
        ("2.3", {"gpus_per_node": 4}),  # several GPUs in one pod: a memory-backed /dev/shm
        ("2.4", {"gpus_per_node": 8}),
        ("2.14", {"gpus_per_node": 2}),  # the first backend whose server refuses an unknown field
        ("2.15", {}),  # Kubeflow 1.11
        ("2.15", {"num_nodes": 2, "gpus_per_node": 4}),
        ("2.16", {"gpus_per_node": 2}),  # and the container's user (securityContext)
        ("2.17", {"num_nodes": 2}),
    ],
)
def test_every_executor_config_uses_only_fields_its_backend_knows(backend, trainer, tmp_path):
    raw = {**pools_raw(**trainer), "kfp_backend": backend, "image_pull_secrets": ["regcred", "mirror.io"]}
    for label, config in executor_configs(raw, tmp_path).items():
        assert unknown_fields(config, "KubernetesExecutorConfig", FIELDS_BY_BACKEND[backend]) == [], label


def test_several_gpus_in_one_pod_get_a_memory_backed_dev_shm(tmp_path):
    executors = executor_configs({**pools_raw(gpus_per_node=4), "kfp_backend": "2.3"}, tmp_path)
    trainer = executors.pop(executor_label("TorchTrainer"))
    assert trainer["emptyDirMounts"] == [{"volumeName": "dshm", "mountPath": "/dev/shm", "medium": "Memory"}]
    assert not [label for label, config in executors.items() if "emptyDirMounts" in config]
    # The oldest backend would fail the Trainer step on this field: compile refuses the combination there.
    assert unknown_fields(trainer, "KubernetesExecutorConfig", FIELDS_2_1) == ["emptyDirMounts"]


@pytest.mark.parametrize("backend", ["2.1", "2.16"])
def test_every_step_gets_the_image_pull_secrets(backend, tmp_path):
    """imagePullSecret is read by the driver from 2.1.0 (driver.go:589-590@2.1.0) to 2.17.0 (k8s.go:492-512)."""
    raw = {**pools_raw(), "kfp_backend": backend, "image_pull_secrets": ["regcred", "mirror.io"]}
    for label, config in executor_configs(raw, tmp_path).items():
        assert config["imagePullSecret"] == [{"secretName": "regcred"}, {"secretName": "mirror.io"}], label
    assert not [c for c in executor_configs(pools_raw(), tmp_path).values() if "imagePullSecret" in c]


def test_from_2_16_every_step_runs_as_the_images_user_and_non_root(tmp_path):
    """Pod Security "restricted" needs runAsNonRoot; 2.16+ adds the rest itself (seccomp RuntimeDefault, no
    privilege escalation, capabilities dropped). Older backends have no such field (2.1-2.4 would fail on it)."""
    from torchtfx.pipeline.kfp.platform import IMAGE_UID

    dockerfile = (PROJECT_ROOT / "kubeflow" / "Dockerfile").read_text()
    assert int(re.search(r"^ARG APP_UID=(\d+)$", dockerfile, re.M).group(1)) == IMAGE_UID
    for config in executor_configs({**pools_raw(), "kfp_backend": "2.16"}, tmp_path).values():
        assert config["securityContext"] == {"runAsUser": IMAGE_UID, "runAsGroup": IMAGE_UID, "runAsNonRoot": True}
    for backend in ("2.1", "2.3", "2.15"):
        configs = executor_configs({**pools_raw(), "kfp_backend": backend}, tmp_path).values()
        assert not [c for c in configs if "securityContext" in c], backend


def test_what_2_16_adds_is_what_a_2_15_server_would_refuse(tmp_path):
    """The run a 2.15 server refuses (container.go:309@2.15.0): the 2.16 package's securityContext, on every step."""
    for label, config in executor_configs({**pools_raw(), "kfp_backend": "2.16"}, tmp_path).items():
        refused = unknown_fields(config, "KubernetesExecutorConfig", FIELDS_BY_BACKEND["2.15"])
        assert refused == ["securityContext"], label
