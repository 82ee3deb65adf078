"""Run the pipeline locally: LocalDagRunner, Beam DirectRunner (multi-processing), sqlite MLMD and
MLflow under the pipeline root. Binds local paths and calls ``create_pipeline``."""

from __future__ import annotations

import datetime
import logging
import subprocess
import time
from importlib import metadata
from pathlib import Path

import pydantic

from torchtfx.components.promoter.public import IMMEDIATE, LABEL_CONFIRMATIONS, SETTING_FLAG, STAGED
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import (
    FAIL_IF_UNREACHABLE,
    UNREACHABLE_POLICIES,
    resolve_tracking_uri,
    tracking_uri_or_none,
)
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.torch_trainer.public import DEFAULT_PARITY_TOLERANCE, TrainerHParams
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.strict import ConfigError, StrictConfig, one_of
from torchtfx.data.csv_reader.sources import csv_files, default_data_dir
from torchtfx.data.resources import source_checkout
from torchtfx.pipeline.local.run_lock import run_lock
from torchtfx.pipeline.reporting.summary import RunSummary, run_summary
from torchtfx.pipeline.settings.beam_args import (
    BEAM_MODE_AUTO,
    BEAM_MODES,
    DISTRIBUTION,
    WORKER_PACKAGE_DIR,
    BeamWorkers,
    direct_runner_args,
    with_dependency,
    worker_dependency_flag,
)
from torchtfx.pipeline.settings.bound import PipelineSettings
from torchtfx.pipeline.settings.declared import DEFAULT_BEAM_WORKERS
from torchtfx.pipeline.settings.resolve import ResolvedSettings

logger = logging.getLogger(__name__)


class LocalSettingsError(ConfigError):
    """A local run setting is unknown or out of range."""


class LocalSettings(StrictConfig):
    """What a local run binds: paths on this machine, Beam's DirectRunner mode, and the typed configs."""

    config_error = LocalSettingsError

    dataset: DatasetConfig
    pipeline_root: Path
    data_dir: Path | None = None  # None: the dataset's packaged default
    serving_dir: Path | None = None  # None: <pipeline_root>/serving/<dataset>
    hparams: TrainerHParams = TrainerHParams()
    batching: BatchingParams = BatchingParams()
    serving_address: str | None = None  # TF Serving's gRPC host:port, which confirms each load before a label moves
    parity_tolerance: pydantic.PositiveFloat = DEFAULT_PARITY_TOLERANCE
    beam_workers: BeamWorkers = DEFAULT_BEAM_WORKERS
    beam_mode: str = BEAM_MODE_AUTO  # or "in_memory", "multi_processing"
    enable_cache: bool = True
    mlflow_unreachable: str = FAIL_IF_UNREACHABLE  # or CONTINUE_IF_UNREACHABLE
    confirm_labels: str = STAGED  # IMMEDIATE: no TF Serving reads the serving folder (promoter/confirmation.py)

    _known_mode = one_of("beam_mode", BEAM_MODES)
    _known_policy = one_of("mlflow_unreachable", UNREACHABLE_POLICIES)
    _known_confirmation = one_of("confirm_labels", LABEL_CONFIRMATIONS)

    @pydantic.model_validator(mode="after")
    def _immediate_only_without_a_server(self) -> LocalSettings:
        if self.confirm_labels == IMMEDIATE and self.serving_address:
            raise ValueError(
                f"confirm_labels: {IMMEDIATE} moves the serving labels without asking TF Serving, but a serving "
                f"address ({self.serving_address}) is given, which confirms each load itself: drop "
                f"{SETTING_FLAG} {IMMEDIATE}, or the address if no TF Serving reads the serving folder"
            )
        return self

    @property
    def root(self) -> Path:
        return self.pipeline_root.resolve()

    @property
    def metadata_path(self) -> Path:
        return self.root / "metadata.sqlite"

    @property
    def mlflow_default_uri(self) -> str:
        return f"sqlite:///{self.root / 'mlflow' / 'mlflow.db'}"

    @property
    def serving_model_dir(self) -> Path:
        return (self.serving_dir or self.root / "serving" / self.dataset.name).resolve()

    @property
    def registered_model_name(self) -> str:
        """The MLflow registered model whose ``champion`` alias is production (the pipeline's name)."""
        return contracts.pipeline_name(self.dataset.name)

    @property
    def input_dir(self) -> Path:
        return (self.data_dir or default_data_dir(self.dataset)).resolve()

    @classmethod
    def from_resolved(cls, resolved: ResolvedSettings) -> LocalSettings:
        """A local run's settings from the resolved ones (pipeline/settings/resolve.py), the model checked."""
        from torchtfx.components.torch_trainer.public import CUDA, require_cuda
        from torchtfx.pipeline.settings.model_choice import checked_model  # imports torch: only for a run

        if resolved.hparams.device == CUDA:  # before the model check and any stage
            require_cuda("This run")
        dataset = resolved.dataset
        return cls(
            dataset=dataset,
            hparams=checked_model(resolved),
            pipeline_root=resolved["pipeline_root"],
            data_dir=resolved["data_dir"],
            serving_dir=resolved["serving_dir"],
            serving_address=resolved["serving_address"],
            beam_workers=resolved.beam.workers,  # checked with its source (command line: --beam-workers)
            beam_mode=resolved.beam.mode,
            enable_cache=resolved["cache"],
            mlflow_unreachable=resolved["mlflow.unreachable"],
            confirm_labels=resolved["confirm_labels"],
        )

    def input_files(self) -> list[Path]:
        """The CSV files this run reads: the data root's, or for a dataset of spans those of the window (each span at
        its newest version); a clear error when there are none."""
        spans = self.dataset.spans
        if spans is None:
            return csv_files(self.input_dir)
        from torchtfx.data.csv_reader.files import split_files  # imports TFX and TF: only for a run
        from torchtfx.data.spans.layout import window

        root = str(self.input_dir)
        return [Path(p) for span in window(root, spans.pattern, spans.window) for p in split_files(root, span.pattern)]

    def beam_args(self) -> list[str]:
        """The DirectRunner's mode (``auto``: one process for small inputs, worker processes for large ones) and
        workers (pipeline/settings/beam_args.py:direct_runner_args), and how remote workers get the project."""
        size = sum(p.stat().st_size for p in self.input_files()) if self.beam_mode == BEAM_MODE_AUTO else 0
        direct = direct_runner_args(self.beam_mode, self.beam_workers, size)
        return with_dependency(direct, worker_dependency_flag(self.root / WORKER_PACKAGE_DIR))


def code_version() -> str:
    """The code that trains, recorded on every registered model version: a source checkout's git commit
    (``-dirty`` with uncommitted changes), else the installed distribution (``torchtfx==0.1.0``)."""
    checkout = source_checkout()
    if checkout is None:
        try:
            return f"{DISTRIBUTION}=={metadata.version(DISTRIBUTION)}"
        except metadata.PackageNotFoundError:
            return "unknown"
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, timeout=10, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _pipeline_settings(settings: LocalSettings) -> PipelineSettings:
    """The resolved settings bound to this machine: the pipeline root's sqlite stores and folders."""
    return PipelineSettings(
        dataset=settings.dataset,
        hparams=settings.hparams,
        pipeline_root=str(settings.root / "tfx"),
        data_root=str(settings.input_dir),
        serving_model_dir=str(settings.serving_model_dir),
        mlflow_tracking_uri=settings.mlflow_default_uri,
        code_version=code_version(),
        batching=settings.batching,
        serving_address=settings.serving_address,
        parity_tolerance=settings.parity_tolerance,
        beam_pipeline_args=tuple(settings.beam_args()),
        enable_cache=settings.enable_cache,
        mlflow_unreachable=settings.mlflow_unreachable,
        confirm_labels=settings.confirm_labels,
        span_store=str(settings.root / "span_store" / settings.dataset.name),
    )


def _own_run_id_runner(run_id: str):
    """TFX's LocalDagRunner with the pipeline run id given here instead of drawn inside it, so that this run
    reads back its own record (the newest one on the root may be another run's)."""
    from tfx.dsl.compiler import constants
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.portable import runtime_parameter_utils

    class OwnRunIdRunner(LocalDagRunner):
        def run_with_ir(self, pipeline, run_options=None):
            bindings = {constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id}
            runtime_parameter_utils.substitute_runtime_parameter(pipeline, bindings)  # TFX's own then finds none
            return super().run_with_ir(pipeline, run_options=run_options)

    return OwnRunIdRunner()


def _require_no_pending_promotion(settings: LocalSettings) -> None:
    """Refuse in seconds what the Promoter would refuse after training and evaluating: a new run while the last
    promotion waits for `torchtfx promote --finish`."""
    from torchtfx.components.promoter.public import require_no_pending_promotion

    finish = ["torchtfx promote --finish", f"--dataset {settings.dataset.name}", f"--pipeline-root {settings.root}"]
    if settings.serving_dir is not None:
        finish.append(f"--serving-dir {settings.serving_model_dir}")
    require_no_pending_promotion(
        settings.serving_model_dir, settings.serving_address, settings.confirm_labels, " ".join(finish)
    )


def run_local(settings: LocalSettings) -> tuple[RunSummary, float]:
    """Run the whole pipeline, holding the pipeline root's run lock; returns this run's summary and its wall time
    in seconds. Another run on the root raises RootBusyError at once."""
    settings.input_files()  # fail fast, by name, on a missing or empty input (before TF loads, unless spans)
    with run_lock(settings.root):  # the MLflow sqlite store is created and migrated under it
        return _run_locked(settings)


def _run_locked(settings: LocalSettings) -> tuple[RunSummary, float]:
    data_dir = settings.input_dir
    _require_no_pending_promotion(settings)
    # Fail fast (seconds, not MLflow's minutes of retries) when the tracking server does not answer.
    tracking_uri_or_none(resolve_tracking_uri(settings.mlflow_default_uri), settings.mlflow_unreachable, "The run")

    from tfx.orchestration import metadata

    from torchtfx.pipeline.pipeline import create_pipeline

    (settings.root / "mlflow").mkdir(exist_ok=True)
    connection = metadata.sqlite_metadata_connection_config(str(settings.metadata_path))
    pipeline = create_pipeline(_pipeline_settings(settings), metadata_connection_config=connection)
    logger.info("Running %s on %s (pipeline root %s)", pipeline.pipeline_info.pipeline_name, data_dir, settings.root)
    run_id = datetime.datetime.now().isoformat()  # TFX's own format for a local run id
    started = time.perf_counter()
    _own_run_id_runner(run_id).run(pipeline)
    wall = time.perf_counter() - started
    summary = run_summary(connection, run_id)
    if summary is None:
        raise RuntimeError(f"the run {run_id} left no record in {settings.metadata_path}")
    return summary, wall
