"""Compile the pipeline for Kubeflow Pipelines: TFX's KubeflowV2DagRunner writes the pipeline spec
(schema 2.1.0, a bare PipelineSpec, which is what the open-source KFP backend accepts), then the
PlatformSpec document with node selectors, tolerations, volumes and secrets is appended."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.public import CPU_WORKERS, CUDA, LOG_ROOT_KEY, TrainerHParams
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.resources import SCHEMA_FOLDER, schemas_dir
from torchtfx.pipeline.kfp.checkpoints import check_checkpoints
from torchtfx.pipeline.kfp.config import KubeflowConfigError, KubeflowSettings, Resources, resolved_for_kubeflow
from torchtfx.pipeline.kfp.package_info import describe
from torchtfx.pipeline.kfp.platform import executor_label, mlflow_secret_env, platform_spec
from torchtfx.pipeline.kfp.run_id import bind_run_id, header_without_run_id
from torchtfx.pipeline.kfp.values import parse_backend
from torchtfx.pipeline.settings.beam_args import with_dependency
from torchtfx.pipeline.settings.bound import PipelineSettings
from torchtfx.pipeline.settings.model_choice import checked_model
from torchtfx.pipeline.settings.resolve import ResolvedSettings

logger = logging.getLogger(__name__)

# Every step runs TFX's v2 entry point through our launcher fixes (see pipeline/kfp/entrypoint.py).
ENTRYPOINT_COMMAND = ["python", "-m", "torchtfx.pipeline.kfp.entrypoint"]
# Steps KFP must never serve from its cache. Its cache key is the input artifacts, parameter values, command,
# args and image (backend cacheutils; lifecycle.preCacheCheck is Vertex-only and never read), none of which
# changes when these steps' outside world does: ExampleGen reads whatever files are under data_root now (a
# cache hit would feed last run's examples to every step downstream), ChampionModel reads the registry's
# current champion and the Promoter writes the serving dir and the registry. ExampleGen always running gives
# every downstream step new input artifacts, so new data always means a new run.
NEVER_CACHED = (contracts.EXAMPLE_GEN_ID, contracts.CHAMPION_ID, contracts.PROMOTER_ID)


def kubeflow_pipeline_name(dataset_name: str) -> str:
    """The pipeline's name on Kubeflow: KFP allows ``[a-z0-9][a-z0-9-]{0,127}`` only (TFX's KubeflowV2DagRunner
    raised a bare ValueError on ``torchtfx-movie_reviews``), so each ``_`` of the dataset name becomes ``-``. The
    MLflow experiment, the registered model and the serving folder keep the dataset's own name."""
    return contracts.pipeline_name(dataset_name).replace("_", "-")


def dataset_in_image(settings: KubeflowSettings, dataset: DatasetConfig) -> DatasetConfig:
    """The dataset config with its schema path as the image sees it: the image holds the shipped schemas under
    ``<project_root>/schema/`` (kubeflow/Dockerfile), wherever the compiling torchtfx is installed."""
    shipped = schemas_dir()
    try:
        relative = dataset.schema_path.resolve().relative_to(shipped.resolve())
    except ValueError:
        raise KubeflowConfigError(
            f"{settings.source}: the schema {dataset.schema_path} is not one of the shipped schemas ({shipped}), so "
            "the image does not contain it; put it under schema/ of the project and rebuild the image"
        ) from None
    in_image = PurePosixPath(settings.project_root) / SCHEMA_FOLDER / relative.as_posix()
    return dataset.replace(schema_path=Path(in_image))


def trainer_hparams(settings: KubeflowSettings, resolved: ResolvedSettings) -> TrainerHParams:
    """The resolved hyperparameters with the model checked (a file factory's source embedded, so that the Trainer
    step and every replica can load it), and one DDP worker per GPU of a node (or the configured CPU workers on a
    CPU-only node)."""
    hparams = checked_model(resolved)
    gpus = settings.trainer.gpus_per_node
    workers = gpus if gpus > 0 else hparams.num_workers
    return hparams.replace(num_workers=workers, device=CUDA if gpus > 0 else hparams.device)


def pytorchjob_json(settings: KubeflowSettings, hparams: TrainerHParams) -> str:
    """The PyTorchJob settings the Trainer step uses when training spans several nodes ('' = in-pod)."""
    trainer = settings.trainer
    if trainer.num_nodes <= 1:
        return ""
    from torchtfx.components.torch_trainer.public import PyTorchJobSettings, SecretEnv

    pool = settings.node_pools[trainer.node_pool]
    secret_env = mlflow_secret_env(settings)
    job = PyTorchJobSettings(
        namespace=trainer.namespace,
        image=settings.image,
        num_nodes=trainer.num_nodes,
        # A PyTorchJob starts a fixed number of workers per node: ``auto`` on CPU nodes is CPU_WORKERS.
        nproc_per_node=CPU_WORKERS if hparams.num_workers == "auto" else hparams.num_workers,
        gpus_per_node=trainer.gpus_per_node,
        gpu_resource=trainer.gpu_type,
        # PyTorchJobSettings has one value for a replica's requests and limits: the requests, so that the
        # replicas schedule on the node type the requests are sized for.
        cpu=_cpu_quantity(trainer.resources.scheduled_cpu),
        memory=f"{trainer.resources.scheduled_memory_gb}G",
        node_selector=dict(pool.node_selector),
        tolerations=pool.tolerations,
        volumes=settings.volumes,
        image_pull_secrets=settings.image_pull_secrets,
        env_from_secrets=tuple(
            SecretEnv(secret=s["secretName"], key=k["secretKey"], env=k["envVar"])
            for s in secret_env
            for k in s["keyToEnv"]
        ),
        elastic_min_nodes=trainer.elastic.min_nodes if trainer.elastic else None,
        elastic_max_nodes=trainer.elastic.max_nodes if trainer.elastic else None,
        max_restarts=hparams.max_restarts,
        backoff_limit=trainer.backoff_limit,
        timeout_seconds=trainer.timeout_minutes * 60,
    )
    return job.to_json()


def _cpu_quantity(cpu: float) -> str:
    return str(int(cpu)) if float(cpu).is_integer() else f"{int(cpu * 1000)}m"


def resource_spec(resources: Resources):
    """The container's ResourceSpec: limits, and requests where they differ from the limits.

    TFX copies a component's platform config into the spec whole (tfx/orchestration/kubeflow/v2/step_builder.py:
    497-498, 531-532 in TFX 1.16). Every supported backend's driver turns ``cpuRequest``/``memoryRequest`` into the
    pod's requests next to the limits (backend/src/v2/driver/driver.go:401-431@2.1.0, 505-554@2.5.0,
    220-269@2.14.0, 363-412@2.17.0); without them Kubernetes makes each request equal to its limit, and the pod
    needs a node with the whole limit free."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    spec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec(
        cpu_limit=resources.cpu, memory_limit=resources.memory_gb
    )
    if resources.cpu_request is not None:
        spec.cpu_request = resources.cpu_request
    if resources.memory_request_gb is not None:
        spec.memory_request = resources.memory_request_gb
    return spec


def build_pipeline(settings: KubeflowSettings, resolved: ResolvedSettings | None = None):
    """``create_pipeline`` over the resolved settings (``pools.yaml``'s, when none are given) bound to the
    cluster's values, with each step's resources attached."""
    from torchtfx.pipeline.pipeline import create_pipeline

    resolved = resolved or resolved_for_kubeflow(settings)
    check_checkpoints(resolved.dataset)
    hparams = trainer_hparams(settings, resolved)
    bound = PipelineSettings(
        dataset=dataset_in_image(settings, resolved.dataset),
        hparams=hparams,
        pipeline_root=settings.pipeline_root,
        data_root=settings.data_root,
        serving_model_dir=settings.serving_dir,
        mlflow_tracking_uri=settings.mlflow.tracking_uri,
        code_version=settings.image,
        serving_address=resolved["serving_address"],
        beam_pipeline_args=tuple(with_dependency(list(settings.beam_args), f"--sdk_container_image={settings.image}")),
        pytorchjob_json=pytorchjob_json(settings, hparams),
        mlflow_unreachable=resolved["mlflow.unreachable"],
        span_store=span_store_on_volume(settings, resolved.dataset.name),
    )
    pipeline = create_pipeline(bound, name=kubeflow_pipeline_name(bound.dataset.name))
    for component in pipeline.components:
        spec = resource_spec(step_resources(settings, component.id))
        if (
            component.id == contracts.TRAINER_ID
            and settings.trainer.gpus_per_node > 0
            and settings.trainer.num_nodes == 1
        ):
            spec.accelerator.type = settings.trainer.gpu_type
            spec.accelerator.count = settings.trainer.gpus_per_node
        component.with_platform_config(spec)
    return pipeline


def span_store_on_volume(settings: KubeflowSettings, dataset_name: str) -> str:
    """ExampleGen's span store on the volume that holds the serving dir: every step mounts it, so a run finds the
    spans earlier runs read (a path in a pod's own disk would vanish with the pod). "": no volume holds it."""
    for volume in settings.volumes:
        mount = volume.mount_path.rstrip("/")
        if settings.serving_dir == mount or settings.serving_dir.startswith(mount + "/"):
            return f"{mount}/span_store/{dataset_name}"
    return ""


def step_resources(settings: KubeflowSettings, component_id: str) -> Resources:
    """The Trainer's from ``trainer:``, every other step's from ``resources:``."""
    return settings.trainer.resources if component_id == contracts.TRAINER_ID else settings.resources_for(component_id)


def _finish_spec(spec: dict[str, Any], settings: KubeflowSettings) -> None:
    """What TFX's compiler leaves out: the pipeline root, ExampleGen's resources (tfx#6146), and caching off
    for the steps that read or change the world outside their inputs."""
    _set_root(spec, settings)
    for task_id in NEVER_CACHED:
        spec["root"]["dag"]["tasks"][task_id]["cachingOptions"] = {"enableCache": False}
    from google.protobuf import json_format

    container = spec["deploymentSpec"]["executors"][executor_label(contracts.EXAMPLE_GEN_ID)]["container"]
    container["resources"] = json_format.MessageToDict(resource_spec(settings.resources_for(contracts.EXAMPLE_GEN_ID)))


def _set_root(spec: dict[str, Any], settings: KubeflowSettings) -> None:
    """The root ``torchtfx submit`` sends, and the backend it was compiled for (``submit`` refuses the package on
    an older server), both in the package record (package_info.py).

    A per-namespace root (``{namespace}`` in it) is kept out of ``defaultPipelineRoot``: the KFP UI fills its
    run and recurring-run form's pipeline root with the spec's ``defaultPipelineRoot`` and creates the run with
    it (frontend/src/pages/NewRunV2.tsx:310-316,372-374@2.15.0), so the literal ``{namespace}`` would be the
    run's root and its first upload lies outside the namespace's writable prefixes. Without it such a run takes
    the namespace's ``kfp-launcher`` ConfigMap root (backend/src/v2/driver/root_dag.go:80,96-100@2.15.0). The
    Trainer's log root, compiled from the same root, is left empty for the same reason: the step then derives
    it from its model artifact's URI, which lies under the run's actual root (run_logs.py)."""
    from torchtfx.pipeline.kfp.pipeline_root import NAMESPACE_PLACEHOLDER

    root = settings.pipeline_root
    if NAMESPACE_PLACEHOLDER in root:
        spec.pop("defaultPipelineRoot", None)
        trainer = spec["root"]["dag"]["tasks"][contracts.TRAINER_ID]["inputs"]["parameters"]
        trainer[LOG_ROOT_KEY] = {"runtimeValue": {"constant": ""}}
        spec["pipelineInfo"]["description"] = describe(settings.kfp_backend, root_template=root)
    else:
        spec["defaultPipelineRoot"] = root  # shown by the UI, used by its runs; `torchtfx submit` sends it
        spec["pipelineInfo"]["description"] = describe(settings.kfp_backend)


def _runner_config(settings: KubeflowSettings):
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    return v2.KubeflowV2DagRunnerConfig(
        default_image=settings.image, default_commands=ENTRYPOINT_COMMAND, use_pipeline_spec_2_1=True
    )


def compile_pipeline(settings: KubeflowSettings, output: Path, resolved: ResolvedSettings | None = None) -> Path:
    """Write ``output`` (.yaml): the PipelineSpec document, then the PlatformSpec document."""
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    if output.suffix not in (".yaml", ".yml"):
        raise KubeflowConfigError(f"{output}: use a .yaml name (a .json name makes a Vertex PipelineJob instead)")
    pipeline = build_pipeline(settings, resolved)
    with tempfile.TemporaryDirectory() as tmp:
        v2.KubeflowV2DagRunner(_runner_config(settings), output_dir=tmp, output_filename="pipeline.yaml").run(pipeline)
        text = (Path(tmp) / "pipeline.yaml").read_text()
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    spec = yaml.safe_load(text)
    _finish_spec(spec, settings)
    if bind_run_id(spec, parse_backend(settings.kfp_backend)):
        header = header_without_run_id(header)
    platform = platform_spec(settings, [c.id for c in pipeline.components])
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w") as out:
        out.write(header)
        yaml.safe_dump_all([spec, platform], out, sort_keys=True)
    logger.info("Compiled %s (%s steps) to %s", pipeline.pipeline_info.pipeline_name, len(pipeline.components), output)
    return output


def compile_vertex_job(settings: KubeflowSettings, output: Path, resolved: ResolvedSettings | None = None) -> Path:
    """The optional second target: a Vertex AI PipelineJob (.json). Vertex has no PlatformSpec: node pools,
    tolerations and volumes do not apply (Vertex picks machines from the resources; GCS is mounted at /gcs)."""
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

    if output.suffix != ".json" or not settings.pipeline_root.startswith("gs://"):
        raise KubeflowConfigError(
            f"{output}: the Vertex target writes a .json PipelineJob and needs a gs:// pipeline_root"
        )
    pipeline = build_pipeline(settings, resolved)
    output.parent.mkdir(parents=True, exist_ok=True)
    v2.KubeflowV2DagRunner(_runner_config(settings), output_dir=str(output.parent), output_filename=output.name).run(
        pipeline
    )
    return output
