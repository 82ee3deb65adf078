"""The torchtfx pipeline factory. Runners only bind environment values and call this."""

from __future__ import annotations

# TFX's modules, not ``tfx.v1``: that facade also imports its Google Cloud extensions (google.cloud.aiplatform),
# measured at 2.9 s and 150 MB of RSS added to every `torchtfx run` that uses none of them.
from tfx.components import Evaluator, ExampleValidator, StatisticsGen, Transform
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2

from torchtfx.components.champion.public import ChampionModel
from torchtfx.components.csv_input.public import checked_csv_example_gen
from torchtfx.components.data_gate.public import DataGate, LabelClasses
from torchtfx.components.promoter.public import Promoter
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.public import TorchTrainer
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.task import MULTICLASS
from torchtfx.pipeline.evaluation import EVAL_EXTRACTORS_MODULE
from torchtfx.pipeline.evaluation.config import build_eval_config
from torchtfx.pipeline.settings.bound import PipelineSettings
from torchtfx.pipeline.transform import PREPROCESSING_FN


def _example_gen(data_root: str, dataset: DatasetConfig, span_store: str = ""):
    splits = [example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=n) for name, n in dataset.split.items()]
    output_config = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=splits))
    # TFX's CsvExampleGen, whose executor first checks every CSV line against the curated schema (a clear error,
    # not a Beam trace) and decodes each column with the schema's type (the one ImportSchemaGen imports); the
    # dataset's missing_values are missing values in a numeric column.
    return checked_csv_example_gen(
        input_base=data_root,
        output_config=output_config,
        schema_file=str(dataset.schema_path),
        missing_values=dataset.missing_values,
        max_cell_chars=dataset.max_cell_chars,
        sample=dataset.sample,
        spans=dataset.spans,
        span_store=span_store,
    )


def create_pipeline(settings: PipelineSettings, metadata_connection_config=None, name: str | None = None) -> Pipeline:
    """ExampleGen -> StatisticsGen -> ImportSchemaGen + ExampleValidator -> DataGate -> Transform ->
    TorchTrainer -> Evaluator (gates vs ChampionModel) -> Promoter (TF Serving layout under
    ``settings.serving_model_dir``, MLflow registry aliases), over resolved settings bound to one environment
    (pipeline/settings/bound.py).

    ``settings.pytorchjob_json`` makes the Trainer run multi-node DDP as a Kubeflow job. With
    ``settings.serving_address`` (TF Serving's gRPC host:port) the Promoter moves the stable/canary labels only once
    that server reports the new version AVAILABLE; without, the label move waits for ``torchtfx promote --finish``.
    ``settings.mlflow_unreachable``: ``fail`` stops before training when the tracking server does not answer;
    ``continue`` trains untracked with a loud warning (the Promoter still refuses to promote).
    ``name``: the orchestrator's pipeline name, where its rules differ from ``settings.pipeline_name`` (Kubeflow's);
    the registry, the experiment and the serving folder keep the settings' names.
    """
    dataset = settings.dataset
    example_gen = _example_gen(settings.data_root, dataset, settings.span_store)
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"]).with_id(contracts.STATISTICS_GEN_ID)
    schema_gen = ImportSchemaGen(schema_file=str(dataset.schema_path)).with_id(contracts.SCHEMA_GEN_ID)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    ).with_id(contracts.EXAMPLE_VALIDATOR_ID)
    # The baseline is the model in production (registry alias `champion`), not TFX's latest-blessed
    # Resolver, which the open-source KFP v2 backend cannot run; with it come the statistics of the data it
    # was trained on, the DataGate's drift baseline.
    champion = ChampionModel(
        serving_dir=settings.serving_model_dir,
        registered_model_name=settings.registered_model_name,
        mlflow_tracking_uri=settings.mlflow_tracking_uri,
        mlflow_unreachable=settings.mlflow_unreachable,
    ).with_id(contracts.CHAMPION_ID)
    data_gate = DataGate(
        anomalies=example_validator.outputs["anomalies"],
        schema_hint=str(dataset.schema_path),
        statistics=statistics_gen.outputs["statistics"],
        schema=schema_gen.outputs["schema"],
        baseline_statistics=champion.outputs["champion_statistics"],
        label_classes=_label_classes(dataset),
        newest_span_split=contracts.EVAL_SPLIT if dataset.spans is not None else None,
    ).with_id(contracts.DATA_GATE_ID)
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        custom_config={contracts.DATASET_CONFIG_KEY: dataset.to_json()},
        # Pre/post-transform statistics double Transform's Beam work and nothing here reads them.
        disable_statistics=True,
        # TFT's analyzer cache serves a later run over some of the same spans; ours reads one span, and an
        # unchanged Transform is skipped by ML Metadata's cache. Writing it took 3.5 s of Transform's 19 s on taxi
        # (two interleaved runs each: 19.1 / 18.7 s with it, 15.6 / 14.7 s without).
        disable_analyzer_cache=True,
        # No transformed examples: the Trainer runs the raw ones through the transform graph itself, which is
        # cheaper by far at scale (measured in components/torch_trainer/handoff/materialize.py's docstring).
        materialize=False,
    ).with_id(contracts.TRANSFORM_ID)
    transform.add_upstream_node(data_gate)
    trainer = _trainer(settings, example_gen, transform)
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=champion.outputs["champion"],
        eval_config=build_eval_config(dataset, dataset.gates),
        module_path=EVAL_EXTRACTORS_MODULE,
    ).with_id(contracts.EVALUATOR_ID)
    promoter = _promoter(settings, example_gen, statistics_gen, trainer, champion, evaluator)
    components = [
        example_gen,
        statistics_gen,
        schema_gen,
        example_validator,
        data_gate,
        transform,
        trainer,
        champion,
        evaluator,
        promoter,
    ]
    return Pipeline(
        pipeline_name=name or settings.pipeline_name,
        pipeline_root=settings.pipeline_root,
        components=components,
        enable_cache=settings.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(settings.beam_pipeline_args),
    )


def _trainer(settings: PipelineSettings, example_gen, transform) -> TorchTrainer:
    return TorchTrainer(
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        dataset_config_json=settings.dataset.to_json(),
        hyperparameters_json=settings.hparams.to_json(),
        mlflow_tracking_uri=settings.mlflow_tracking_uri,
        mlflow_experiment=settings.mlflow_experiment,
        parity_tolerance=settings.parity_tolerance,
        pytorchjob_json=settings.pytorchjob_json,
        mlflow_unreachable=settings.mlflow_unreachable,
        pipeline_root=settings.pipeline_root,
        serving_batch_size=settings.batching.max_batch_size,
    ).with_id(contracts.TRAINER_ID)


def _promoter(settings: PipelineSettings, example_gen, statistics_gen, trainer, champion, evaluator) -> Promoter:
    return Promoter(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        evaluation=evaluator.outputs["evaluation"],
        examples=example_gen.outputs["examples"],
        statistics=statistics_gen.outputs["statistics"],
        champion=champion.outputs["champion"],  # promoted only over the champion the Evaluator compared with
        serving_dir=settings.serving_model_dir,
        serving_model_name=settings.serving_model_name,
        registered_model_name=settings.registered_model_name,
        mlflow_tracking_uri=settings.mlflow_tracking_uri,
        code_version=settings.code_version,
        batching=settings.batching,
        serving_address=settings.serving_address or "",
        serving_load_timeout_s=settings.serving_load_timeout_s,
        confirm_labels=settings.confirm_labels,
    ).with_id(contracts.PROMOTER_ID)


def _label_classes(dataset: DatasetConfig) -> str | None:
    """What the DataGate checks a multiclass label's num_classes with, before Transform (None for other tasks)."""
    if dataset.task != MULTICLASS:
        return None
    label = dataset.label
    return LabelClasses(label.column, label.num_classes, f"the dataset config {dataset.name!r}").to_json()
