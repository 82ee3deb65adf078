"""kubeflow/serving/tf-serving.yaml, checked statically (no cluster and no tensorflow_model_server binary on
these machines): the server reads the files the Promoter writes, on the volume and at the paths of
kubeflow/pools.yaml, under the model name the pipeline serves; those files parse as the messages TF Serving
2.16 reads them into; the pod is non-root and read-only; the image, ports, probes, threads and Prometheus
settings agree with each other."""

from __future__ import annotations

import importlib.metadata
import posixpath
import re
from pathlib import Path

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from tests.paths import PROJECT_ROOT
from torchtfx.components.tf_serving import batching, model_config
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.model_config import ServedState
from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.pipeline.kfp.config import load_kubeflow_settings

MANIFEST = PROJECT_ROOT / "kubeflow" / "serving" / "tf-serving.yaml"
SETTINGS = load_kubeflow_settings(PROJECT_ROOT / "kubeflow" / "pools.yaml")
# What the pipeline serves under: pipeline/kfp/compile.py passes serving_model_name=dataset.name.
MODEL_NAME = load_dataset_config(SETTINGS.dataset).name

# Flags of tensorflow_model_server 2.16.1 this manifest may use (tensorflow_serving/model_servers/main.cc at
# tag 2.16.1); the server exits at start on an unknown one.
KNOWN_FLAGS = {
    "port",
    "rest_api_port",
    "rest_api_num_threads",
    "rest_api_timeout_in_ms",
    "enable_batching",
    "allow_version_labels_for_unavailable_models",
    "batching_parameters_file",
    "model_config_file",
    "model_config_file_poll_wait_seconds",
    "file_system_poll_wait_seconds",
    "tensorflow_intra_op_parallelism",
    "tensorflow_inter_op_parallelism",
    "grpc_max_threads",
    "enable_model_warmup",
    "monitoring_config_file",
    "per_process_gpu_memory_fraction",
    "enable_grpc_healthcheck_service",
    "max_num_load_retries",
}


def _documents() -> dict[str, dict]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs) == 3, [d["kind"] for d in docs]
    return by_kind


DOCS = _documents()
DEPLOYMENT, SERVICE, CONFIGMAP = DOCS["Deployment"], DOCS["Service"], DOCS["ConfigMap"]
POD = DEPLOYMENT["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]


def _flags() -> dict[str, str]:
    flags = {}
    for arg in CONTAINER["args"]:
        match = re.fullmatch(r"--([a-z_]+)=(\S+)", arg)
        assert match, f"{arg!r}: every argument is --name=value"
        assert match.group(1) not in flags, f"--{match.group(1)} given twice"
        flags[match.group(1)] = match.group(2)
    return flags


FLAGS = _flags()


def _mount_for(path: str) -> dict:
    """The container's volume mount that holds ``path``."""
    mounts = [m for m in CONTAINER["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert len(mounts) == 1, f"{path} is on {len(mounts)} mounts of {CONTAINER['volumeMounts']}"
    return mounts[0]


def _volume(name: str) -> dict:
    (volume,) = [v for v in POD["volumes"] if v["name"] == name]
    return volume


def _message_class(file_name: str, messages: dict[str, list[tuple[str, int, str, bool]]]):
    """Message classes of a tensorflow.serving .proto the pip package does not ship, built field for field
    (name, number, type, repeated) in a private pool, so a text proto is parsed as the server parses it."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    proto = descriptor_pb2.FileDescriptorProto(
        name=file_name, package="tensorflow.serving", syntax="proto3", dependency=["google/protobuf/wrappers.proto"]
    )
    field = descriptor_pb2.FieldDescriptorProto
    for message_name, fields in messages.items():
        message = proto.message_type.add(name=message_name)
        for name, number, kind, repeated in fields:
            entry = message.field.add(
                name=name, number=number, label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            )
            if kind.startswith("."):
                entry.type, entry.type_name = field.TYPE_MESSAGE, kind
            else:
                entry.type = getattr(field, kind)
    pool.Add(proto)
    factory = message_factory.MessageFactory(pool)
    return {n: factory.GetPrototype(pool.FindMessageTypeByName(f"tensorflow.serving.{n}")) for n in messages}


# tensorflow_serving/config/monitoring_config.proto at tag 2.16.1.
MONITORING = _message_class(
    "tensorflow_serving/config/monitoring_config.proto",
    {
        "PrometheusConfig": [("enable", 1, "TYPE_BOOL", False), ("path", 2, "TYPE_STRING", False)],
        "MonitoringConfig": [("prometheus_config", 1, ".tensorflow.serving.PrometheusConfig", False)],
    },
)["MonitoringConfig"]
# BatchingParameters of tensorflow_serving/servables/tensorflow/session_bundle_config.proto at tag 2.16.1 (all
# of its fields, independently of batching.batching_message_class).
_INT64, _STRING, _BOOL = ".google.protobuf.Int64Value", ".google.protobuf.StringValue", ".google.protobuf.BoolValue"
BATCHING = _message_class(
    "tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
    {
        "BatchingParameters": [
            ("max_batch_size", 1, _INT64, False),
            ("batch_timeout_micros", 2, _INT64, False),
            ("max_enqueued_batches", 3, _INT64, False),
            ("num_batch_threads", 4, _INT64, False),
            ("thread_pool_name", 5, _STRING, False),
            ("allowed_batch_sizes", 6, "TYPE_INT64", True),
            ("pad_variable_length_inputs", 7, "TYPE_BOOL", False),
            ("enable_large_batch_splitting", 8, _BOOL, False),
            ("max_execution_batch_size", 9, _INT64, False),
        ],
    },
)["BatchingParameters"]


def _cpu(quantity) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


# -- what the pipeline writes is what the server reads -----------------------------------------------------
def test_the_server_reads_models_config_and_batching_file_from_the_promoters_serving_dir():
    serving_dir = SETTINGS.serving_dir
    assert FLAGS["model_config_file"] == posixpath.join(serving_dir, model_config.MODELS_CONFIG)
    assert FLAGS["batching_parameters_file"] == posixpath.join(serving_dir, batching.BATCHING_CONFIG)
    assert FLAGS["enable_batching"] == "true"
    # The file is polled, so a promotion or rollback written without a server address still reaches the server.
    assert int(FLAGS["model_config_file_poll_wait_seconds"]) > 0
    assert "model_name" not in FLAGS and "model_base_path" not in FLAGS  # ignored beside --model_config_file
    assert CONTAINER["command"] == ["/usr/bin/tensorflow_model_server"]  # not the image's entrypoint script


def test_the_serving_volume_is_the_pipelines_claim_at_the_same_path_read_only():
    """models.config names base_path as the Promoter sees it, so the claim is mounted where the steps mount it."""
    (volume,) = [v for v in SETTINGS.volumes if SETTINGS.serving_dir.startswith(v.mount_path.rstrip("/") + "/")]
    for flag in ("model_config_file", "batching_parameters_file"):
        mount = _mount_for(FLAGS[flag])
        assert mount["mountPath"] == volume.mount_path
        assert mount["readOnly"] is True
        claim = _volume(mount["name"])["persistentVolumeClaim"]
        assert claim == {"claimName": volume.claim_name, "readOnly": True}


def test_the_models_config_the_promoter_writes_names_this_model_under_the_mounted_volume():
    state = ServedState(frozenset({1, 2}), {model_config.STABLE: 1, model_config.CANARY: 2})
    written = model_config.to_proto(MODEL_NAME, Path(SETTINGS.serving_dir), state)
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(text_format.MessageToString(written), config)
    (model,) = config.model_config_list.config
    assert model.name == MODEL_NAME and model.model_platform == "tensorflow"
    assert _mount_for(model.base_path + "/1/saved_model.pb")["readOnly"] is True
    assert dict(model.version_labels) == {"stable": 1, "canary": 2}


def test_the_batching_file_the_promoter_writes_parses_as_tf_servings_batching_parameters(tmp_path):
    params = BatchingParams()
    batching.write_batching(tmp_path, params)
    message = BATCHING()
    text_format.Parse((tmp_path / batching.BATCHING_CONFIG).read_text(), message)  # strict: unknown fields fail
    assert message.max_batch_size.value == params.max_batch_size
    assert message.batch_timeout_micros.value == params.batch_timeout_micros
    assert message.num_batch_threads.value == params.num_batch_threads
    assert message.max_enqueued_batches.value == params.max_enqueued_batches
    # The project's own message class agrees with the proto's field numbers for every field it writes.
    ours = batching.batching_message_class().DESCRIPTOR
    for field in ours.fields:
        assert BATCHING.DESCRIPTOR.fields_by_name[field.name].number == field.number
    # Its batch threads fit the CPUs the server gets.
    assert params.num_batch_threads <= _cpu(CONTAINER["resources"]["limits"]["cpu"])


def test_probes_ask_for_the_model_the_pipeline_serves():
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = CONTAINER[probe]["httpGet"]
        assert get["path"] == f"/v1/models/{MODEL_NAME}" and get["port"] == "http", probe


def test_the_promoters_serving_address_if_configured_is_this_service():
    if SETTINGS.serving_address is None:
        pytest.skip("kubeflow/pools.yaml sets no serving_address (label moves wait for `promote --finish`)")
    host, port = SETTINGS.serving_address.rsplit(":", 1)
    assert host.split(".")[0] == SERVICE["metadata"]["name"]
    assert int(port) == _service_port("grpc")["port"]


# -- flags ---------------------------------------------------------------------------------------------------
def test_every_flag_is_one_tensorflow_model_server_2_16_defines():
    assert set(FLAGS) <= KNOWN_FLAGS, sorted(set(FLAGS) - KNOWN_FLAGS)


def test_a_restarted_server_can_start_from_a_labelled_models_config():
    """A fresh server applies version_labels before it loads any version (ServerCore::ReloadConfig calls
    UpdateModelVersionLabelMap first), so without this flag it exits on the models.config every promotion
    leaves ("Request to assign label to version N ... not currently available for inference"). The flag admits
    only labels new to the server: an existing label is still never moved onto a version that is not
    AVAILABLE, which is what the Promoter's two-phase change relies on."""
    assert FLAGS["allow_version_labels_for_unavailable_models"] == "true"


def test_thread_flags_match_the_cpu_limit():
    limits, requests = CONTAINER["resources"]["limits"], CONTAINER["resources"]["requests"]
    cpus = _cpu(limits["cpu"])
    assert cpus.is_integer() and _cpu(requests["cpu"]) == cpus  # whole CPUs, Guaranteed QoS
    assert int(FLAGS["tensorflow_intra_op_parallelism"]) == cpus
    assert 1 <= int(FLAGS["tensorflow_inter_op_parallelism"]) <= cpus
    # TF Serving's default is 4 x the node's CPUs; here 1 to 4 x the container's.
    assert cpus <= int(FLAGS["rest_api_num_threads"]) <= 4 * cpus
    assert "memory" in limits and "memory" in requests


# -- monitoring ----------------------------------------------------------------------------------------------
def test_monitoring_config_is_a_monitoring_config_proto_delivered_by_the_configmap():
    path = FLAGS["monitoring_config_file"]
    mount = _mount_for(path)
    assert mount["readOnly"] is True
    assert _volume(mount["name"])["configMap"]["name"] == CONFIGMAP["metadata"]["name"]
    key = posixpath.relpath(path, mount["mountPath"])
    config = MONITORING()
    text_format.Parse(CONFIGMAP["data"][key], config)
    assert config.prometheus_config.enable is True
    assert config.prometheus_config.path == "/monitoring/prometheus/metrics"
    annotations = SERVICE["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == config.prometheus_config.path
    # Metrics are served on the REST port.
    assert int(annotations["prometheus.io/port"]) == int(FLAGS["rest_api_port"]) == _service_port("http")["port"]


# -- ports, image, pod -----------------------------------------------------------------------------------------
def _container_port(name: str) -> dict:
    (port,) = [p for p in CONTAINER["ports"] if p["name"] == name]
    return port


def _service_port(name: str) -> dict:
    (port,) = [p for p in SERVICE["spec"]["ports"] if p["name"] == name]
    return port


def test_ports_match_the_flags_and_the_service():
    assert FLAGS["port"] == "8500" and FLAGS["rest_api_port"] == "8501"
    for name, flag in (("grpc", "port"), ("http", "rest_api_port")):
        assert _container_port(name)["containerPort"] == int(FLAGS[flag])
        service = _service_port(name)
        assert service["targetPort"] in (name, int(FLAGS[flag]))
        assert service["port"] == int(FLAGS[flag])
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert SERVICE["spec"]["selector"].items() <= labels.items()
    assert DEPLOYMENT["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_image_is_pinned_to_the_tf_serving_release_of_the_projects_tensorflow():
    image = CONTAINER["image"]
    repository, tag = image.split("@")[0].rsplit(":", 1)
    assert repository == "tensorflow/serving" and tag != "latest" and "latest" not in tag
    # The same release as the tensorflow-serving-api the Promoter talks to it with, and tensorflow's minor.
    assert tag == importlib.metadata.version("tensorflow-serving-api")
    assert tag.split(".")[:2] == importlib.metadata.version("tensorflow").split(".")[:2]


def test_runs_as_the_pipelines_non_root_user_with_a_read_only_root():
    uid = int(re.search(r"^ARG APP_UID=(\d+)$", (PROJECT_ROOT / "kubeflow" / "Dockerfile").read_text(), re.M)[1])
    pod, container = POD["securityContext"], CONTAINER["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == uid != 0
    assert container["runAsNonRoot"] is True and container["runAsUser"] == uid
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"]["drop"] == ["ALL"] and "add" not in container["capabilities"]
    assert POD["automountServiceAccountToken"] is False
    # The only writable mount is an emptyDir scratch; the serving volume and the ConfigMap are read-only.
    writable = [m for m in CONTAINER["volumeMounts"] if not m.get("readOnly")]
    assert all("emptyDir" in _volume(m["name"]) for m in writable)


def test_one_replica_on_the_cpu_pool():
    """The Promoter confirms a version on the one server its address reaches (kubeflow/serving/README.md: Why
    one replica)."""
    assert DEPLOYMENT["spec"]["replicas"] == 1
    assert DEPLOYMENT["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert POD["nodeSelector"] == SETTINGS.node_pools["cpu"].node_selector
