"""Run our pipeline and the reference as measured subprocesses, then read back stage times and AUC."""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path

from bench.measure import ProcessRun, require_success, run_measured
from torchtfx.components.shared import contracts
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.pipeline.local.runner import LocalSettings

logger = logging.getLogger(__name__)

# The reference's label is ``tips_xf`` (tips > 20% of the fare), computed by its transform_features signature.
REFERENCE_LABEL_KEY = "tips_xf"
REFERENCE_PREPROCESSING = "transform_features"


@dataclasses.dataclass(frozen=True)
class PipelineRun:
    name: str
    root: Path
    wall_seconds: float  # the whole command, interpreter start and imports included
    peak_rss_gib: float  # summed over the process tree
    stages: dict[str, float]  # component id -> seconds, from ML Metadata
    peak_at_seconds: float = 0.0
    peak_rss_mib_by_process: dict[str, float] = dataclasses.field(default_factory=dict)
    peak_shared_gib: float = 0.0  # of peak_rss_gib: file-backed/shared pages, counted once per process
    peak_pss_gib: float = 0.0  # peak of the summed PSS: shared pages split among their processes

    @classmethod
    def measured(cls, name: str, root: Path, process: ProcessRun) -> PipelineRun:
        by_process = {k: round(v / 2**20) for k, v in process.peak_breakdown.items()}
        return cls(
            name, root, process.wall_seconds, process.peak_rss_gib, stage_seconds(root), process.peak_at_seconds,
            by_process, process.peak_shared_bytes / 2**30, process.peak_pss_bytes / 2**30,
        )  # fmt: skip

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "root": str(self.root)}

    @classmethod
    def from_dict(cls, raw: dict) -> PipelineRun:
        return cls(**{**raw, "root": Path(raw["root"])})


def stage_seconds(root: Path) -> dict[str, float]:
    from tfx.orchestration import metadata

    from torchtfx.pipeline.reporting.summary import latest_run

    summary = latest_run(metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))
    if summary is None:
        raise RuntimeError(f"no pipeline run recorded in {root / 'metadata.sqlite'}")
    return {stage.node: round(stage.seconds, 2) for stage in summary.stages}


def beam_args(beam_workers: int, dataset: DatasetConfig, root: Path) -> list[str]:
    """Our local runner's Beam args; the reference gets exactly the same."""
    return LocalSettings(dataset=dataset, pipeline_root=root, beam_workers=beam_workers).beam_args()


def run_ours(
    root: Path,
    data_dir: Path,
    dataset: str,
    beam_workers: int,
    extra: list[str] = (),
    log: Path | None = None,
    accept: tuple[int, ...] = (0,),
) -> PipelineRun:
    """``torchtfx run``; ``accept``: exit codes that count as a finished run (e.g. also "rejected by a gate")."""
    command = [
        str(Path(sys.executable).with_name("torchtfx")), "run",
        "--dataset", dataset,
        "--data-dir", str(data_dir),
        "--pipeline-root", str(root),
        "--beam-workers", str(beam_workers),
        *extra,
    ]  # fmt: skip
    process = run_measured(command, log or root.parent / f"{root.name}.log")
    if process.returncode not in accept:
        require_success(process, f"torchtfx run ({root})")
    return PipelineRun.measured("torchtfx", root, process)


def run_reference(root: Path, data_dir: Path, args: list[str]) -> PipelineRun:
    command = [sys.executable, "-m", "bench.reference_pipeline", "--root", str(root), "--data-dir", str(data_dir)]
    command += [f"--beam-arg={arg}" for arg in args]
    process = run_measured(command, root.parent / f"{root.name}.log", env={"TF_USE_LEGACY_KERAS": "1"})
    require_success(process, f"reference pipeline ({root})")
    return PipelineRun.measured("tfx_taxi_native_keras", root, process)


def only_subdir(directory: Path) -> Path:
    subdirs = [p for p in directory.iterdir() if p.is_dir()]
    if len(subdirs) != 1:
        raise RuntimeError(f"expected one pushed model version in {directory}, found {len(subdirs)}")
    return subdirs[0]


def eval_examples_dir(root: Path) -> Path:
    """Raw tf.Examples of our ExampleGen's eval split: both models are scored on these same rows."""
    found = sorted((root / "tfx" / "CsvExampleGen" / "examples").glob("*/Split-eval"))
    if not found:
        raise RuntimeError(f"no eval split under {root / 'tfx' / 'CsvExampleGen'}")
    return found[-1]


def evaluator_metrics(root: Path) -> dict[str, float]:
    """The candidate's overall-slice metrics from our Evaluator's output."""
    from tfx.orchestration import metadata

    from torchtfx.pipeline.reporting.summary import latest_run, slice_metrics

    summary = latest_run(metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))
    evaluation = summary.output(contracts.EVALUATOR_ID, "evaluation") if summary else None
    if evaluation is None:
        raise RuntimeError(f"no Evaluator output recorded in {root}")
    return slice_metrics(evaluation.uri).get("Overall", {})
