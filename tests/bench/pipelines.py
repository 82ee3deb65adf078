"""Run our pipeline and the reference as measured subprocesses, then read back stage times and AUC."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.bench.measure import ProcessRun, require_success, run_measured
from torchtfx.components.shared import contracts
from torchtfx.components.shared.served_interface import SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.pipeline.local.runner import LocalSettings

if TYPE_CHECKING:
    from torchtfx.pipeline.reporting.summary import RunSummary

logger = logging.getLogger(__name__)

# The reference's label is ``tips_xf`` (tips > 20% of the fare), computed by its transform_features signature:
# TFX's taxi example names its signatures as ours are named.
REFERENCE_LABEL_KEY = "tips_xf"
REFERENCE_PREPROCESSING = TRANSFORM_SIGNATURE
# The reference's component ids (TFX's taxi_pipeline_native_keras): its MLMD names the nodes by them.
REFERENCE_EXAMPLE_GEN_ID, REFERENCE_TRAINER_ID, REFERENCE_EVALUATOR_ID = "CsvExampleGen", "Trainer", "Evaluator"


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
    returncode: int = 0
    stopped_in: str = ""  # a run that failed: the stage it was in (ML Metadata's), "" where it finished

    @classmethod
    def measured(cls, name: str, root: Path, process: ProcessRun) -> PipelineRun:
        by_process = {k: round(v / 2**20) for k, v in process.peak_breakdown.items()}
        stages, stopped_in = (stage_seconds(root), "") if process.returncode == 0 else _stopped(root)
        return cls(
            name,
            root,
            process.wall_seconds,
            process.peak_rss_gib,
            stages,
            process.peak_at_seconds,
            by_process,
            process.peak_shared_bytes / 2**30,
            process.peak_pss_bytes / 2**30,
            process.returncode,
            stopped_in,
        )

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "root": str(self.root)}

    @classmethod
    def from_dict(cls, raw: dict) -> PipelineRun:
        return cls(**{**raw, "root": Path(raw["root"])})


def round_ratios(rounds: list[tuple[PipelineRun, PipelineRun]]) -> dict:
    """Ours over the reference's, round by round ((reference, ours) pairs run one after the other): the medians
    are the figures judged, the rounds beside them (two single runs an hour apart here gave 0.47x and 0.65x)."""
    walls = [ours.wall_seconds / ref.wall_seconds for ref, ours in rounds]
    pss = [ours.peak_pss_gib / ref.peak_pss_gib for ref, ours in rounds]
    return {
        "wall_ratio": statistics.median(walls),
        "pss_ratio": statistics.median(pss),
        "rounds": [
            {
                "reference_wall_seconds": ref.wall_seconds,
                "ours_wall_seconds": ours.wall_seconds,
                "reference_peak_pss_gib": ref.peak_pss_gib,
                "ours_peak_pss_gib": ours.peak_pss_gib,
                "wall_ratio": wall,
                "pss_ratio": memory,
            }
            for (ref, ours), wall, memory in zip(rounds, walls, pss, strict=True)
        ],
    }


def latest_recorded_run(root: Path) -> RunSummary:
    """The newest run in ``<root>/metadata.sqlite`` (ours or the reference's: both are LocalDagRunner stores)."""
    from tfx.orchestration import metadata

    from torchtfx.pipeline.reporting.summary import latest_run

    summary = latest_run(metadata.sqlite_metadata_connection_config(str(root / "metadata.sqlite")))
    if summary is None:
        raise RuntimeError(f"no pipeline run recorded in {root / 'metadata.sqlite'}")
    return summary


def stage_seconds(root: Path) -> dict[str, float]:
    return {stage.node: round(stage.seconds, 2) for stage in latest_recorded_run(root).stages}


def beam_args(beam_workers: int, dataset: DatasetConfig, root: Path, data_dir: Path | None = None) -> list[str]:
    """Our local runner's Beam args for the CSV files in ``data_dir`` (None: the dataset's packaged data, which
    sizes as in_memory); the reference gets exactly the same."""
    settings = LocalSettings(dataset=dataset, pipeline_root=root, data_dir=data_dir, beam_workers=beam_workers)
    return settings.beam_args()


def beam_flag(args: list[str], name: str) -> str | None:
    """The value of ``--name=value`` in ``args``."""
    return next((arg.split("=", 1)[1] for arg in args if arg.startswith(f"{name}=")), None)


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
        str(Path(sys.executable).with_name("torchtfx")),
        "run",
        "--dataset",
        dataset,
        "--data-dir",
        str(data_dir),
        "--pipeline-root",
        str(root),
        "--beam-workers",
        str(beam_workers),
        *extra,
    ]
    process = run_measured(command, log or root.parent / f"{root.name}.log")
    if process.returncode not in accept:
        require_success(process, f"torchtfx run ({root})")
    return PipelineRun.measured("torchtfx", root, process)


def run_reference(root: Path, data_dir: Path, args: list[str], may_fail: bool = False) -> PipelineRun:
    """TFX's taxi pipeline; ``may_fail``: a failed run (out of memory at 5M rows) is returned with the stage it
    stopped in, instead of raising."""
    command = [sys.executable, "-m", "tests.bench.reference_pipeline", "--root", str(root), "--data-dir", str(data_dir)]
    command += [f"--beam-arg={arg}" for arg in args]
    # TFX repackages itself into a 49 MiB sdist under a fresh mkdtemp() for each Beam component whose args name
    # no package (tfx/utils/dependency_utils.py) and never removes it: 59 such folders (2.9 GiB) were left in
    # /tmp by one session's benches. The reference's temporary files go under its own folder, removed after.
    scratch = root.parent / f"{root.name}.tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        env = {"TF_USE_LEGACY_KERAS": "1", "TMPDIR": str(scratch)}
        process = run_measured(command, root.parent / f"{root.name}.log", env=env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not may_fail:
        require_success(process, f"reference pipeline ({root})")
    return PipelineRun.measured("tfx_taxi_native_keras", root, process)


def _stopped(root: Path) -> tuple[dict[str, float], str]:
    """A failed run's finished stages and the stage it stopped in (ML Metadata's record, where it has one)."""
    try:
        stages = latest_recorded_run(root).stages
    except Exception as err:  # no store or no run recorded: it stopped before the first stage
        logger.warning("No stages recorded under %s: %s", root, err)
        return {}, "before the first stage"
    done = {stage.node: round(stage.seconds, 2) for stage in stages if stage.state in ("COMPLETE", "CACHED")}
    unfinished = [stage.node for stage in stages if stage.node not in done]
    return done, unfinished[0] if unfinished else "after its last recorded stage"


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


def evaluator_metrics(root: Path, evaluator_id: str = contracts.EVALUATOR_ID) -> dict[str, float]:
    """The candidate's overall-slice metrics from the Evaluator's output (ours, or the reference's with its id)."""
    from torchtfx.components.shared.evaluation_results import candidate_metrics

    evaluation = latest_recorded_run(root).output(evaluator_id, "evaluation")
    if evaluation is None:
        raise RuntimeError(f"no {evaluator_id} output recorded in {root}")
    return candidate_metrics(evaluation.uri).get("Overall", {})


def _our_auc_thresholds() -> int:
    from torchtfx.pipeline.evaluation.config import METRIC_RESOLUTION

    return json.loads("{" + METRIC_RESOLUTION["AUC"] + "}")["num_thresholds"]


def reference_metrics(root: Path) -> dict:
    """The reference's AUC and eval example count, without a TFMA pass over its eval split.

    Its own Evaluator output holds neither: its EvalConfig asks for BinaryAccuracy alone (the Overall slice of a
    3,000-row run held ``binary_accuracy`` and nothing else), so its trained model is scored here on its own
    ExampleGen's eval split, the rows its Evaluator read; ``evaluator_metrics`` keeps what its Evaluator wrote.
    """
    summary = latest_recorded_run(root)
    model = summary.output(REFERENCE_TRAINER_ID, "model")
    examples = summary.output(REFERENCE_EXAMPLE_GEN_ID, "examples")
    if model is None or examples is None:
        raise RuntimeError(f"no {REFERENCE_TRAINER_ID} model or {REFERENCE_EXAMPLE_GEN_ID} examples in {root}")
    tick = time.perf_counter()
    scored = score_reference_model(Path(model.uri) / "Format-Serving", Path(examples.uri) / "Split-eval")
    return {
        "auc": scored["auc"],
        "eval_examples": scored["example_count"],
        "auc_seconds": time.perf_counter() - tick,
        "evaluator_metrics": evaluator_metrics(root, REFERENCE_EVALUATOR_ID),
    }


def score_reference_model(model_dir: Path, examples_dir: Path, batch_size: int = 8192) -> dict[str, float]:
    """AUC of the reference's SavedModel on gzipped tf.Examples: labels from its ``transform_features``
    signature (``tips_xf``), scores from ``serving_default``, the AUC bucketed at our Evaluator's thresholds.

    Keras' AUC and TFMA's build the same bucketed curve: on a 3,000-row run's 992 eval rows 0.929768 here
    against 0.929740 from TFMA with the same 1,000 thresholds. Streams the split: memory stays one batch.
    """
    import tensorflow as tf

    model = tf.saved_model.load(str(model_dir))
    serve, transform = model.signatures[SERVING_SIGNATURE], model.signatures[REFERENCE_PREPROCESSING]
    auc = tf.keras.metrics.AUC(num_thresholds=_our_auc_thresholds())
    files = sorted(str(p) for p in examples_dir.glob("*.gz"))
    if not files:
        raise RuntimeError(f"no *.gz tf.Example files in {examples_dir}")
    count = 0
    for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch_size):
        labels = tf.reshape(transform(examples=batch)[REFERENCE_LABEL_KEY], [-1])
        auc.update_state(labels, tf.reshape(serve(examples=batch)["outputs"], [-1]))
        count += int(labels.shape[0])
    return {"auc": float(auc.result()), "example_count": count}
