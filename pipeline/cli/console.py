"""The console of ``torchtfx``: quiet by default, everything with ``-v``.

By default ``torchtfx run`` prints the stage lines, one progress line per long stage, every warning and the
summary. Third-party messages known to be harmless are dropped by their exact text where they arise: log
records at the console handler (Beam workers' records come through the job service's logger), Python
warnings through the warnings filters (PYTHONWARNINGS carries them into the Beam and DDP worker processes),
and lines written straight to file descriptor 2 by the relay in ``stderr_relay``. Any other message, from
the same loggers included, still shows. With ``-v`` nothing here is installed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import warnings

BEAM_WORKER = "Beam worker"  # a record a Beam worker process sent through local_job_service
DDP_WORKER = "DDP worker"  # a line of a DDP worker's output, relayed by cluster.launch
_JOB_SERVICE = "apache_beam.runners.portability.local_job_service"
_DDP_LAUNCH = "torchtfx.components.torch_trainer.cluster.launch"
_NO_SNAPPY = "Couldn't find python-snappy so the implementation of _TFRecordUtil._masked_crc32c is not as fast as it"


@dataclasses.dataclass(frozen=True)
class KnownRecord:
    logger: str  # the logger's name, or BEAM_WORKER / DDP_WORKER
    text: str  # exact text of the message, or of its fixed part where paths or timestamps vary


# Log records known to be harmless, measured on `make run` and on the 1M-row bench run (multi_processing).
HARMLESS_RECORDS: tuple[KnownRecord, ...] = (
    # TFX 1.16 channel_resolver.py:105, once per input channel of every component (18 a run): the compiled
    # query carries a property predicate that this resolver ignores; it still selects by artifact type,
    # producer context and output key, which is all this pipeline's channels ask for.
    KnownRecord("absl", "ArtifactQuery.property_predicate is not supported."),
    # TF lookup_ops, 8 a run while TFT traces the preprocessing_fn: TFT keeps the vocabulary tables'
    # initializers in the transform graph on purpose (its SavedModel's init op).
    KnownRecord("absl", "Tables initialized inside a tf.function  will be re-initialized on every invocation"),
    # TFX 1.16 transform/executor.py:1223, once per Transform whose preprocessing_fn has analyzers (a text
    # feature's vocabulary or length, a categorical's vocabulary): Transform makes the full analysis pass they
    # need, as it must; the warning names no fault.
    KnownRecord("absl", "Not using the in-place Transform because the following features require analyzing"),
    # Beam core.py's source check of Beam's own combiner (4 a run, Transform's analyzers): _TopPerBundle
    # returns None from process() and emits its output in finish_bundle, as designed.
    KnownRecord(
        "apache_beam.transforms.core",
        "No iterator is returned by the process method in %s.', "
        "<class 'apache_beam.transforms.combiners._TopPerBundle'>",
    ),
    # python-snappy is not in the pinned stack: Beam computes TFRecord CRCs with crcmod's C extension instead,
    # 0.9 us a record (measured at stop 34): nothing slower in practice.
    KnownRecord("apache_beam.io.tfrecordio", _NO_SNAPPY),
    KnownRecord(BEAM_WORKER, _NO_SNAPPY),
    # sdk_worker_main.py: the DirectRunner gives its workers no semi-persistent directory; this pipeline
    # pickles no function of __main__ (save_main_session is off).
    KnownRecord(BEAM_WORKER, "No semi_persistent_directory found: Functions defined in __main__ (interactive session)"),
    # pipeline_options.py: the DirectRunner hands its own two flags to every worker, which has no parser for
    # them. Exact list, in either order (both measured): any other discarded argument (a typo in a Beam
    # option) still shows.
    KnownRecord(
        BEAM_WORKER, "Discarding unparseable args: ['--direct_runner_use_stacked_bundle', '--pipeline_type_check']"
    ),
    KnownRecord(
        BEAM_WORKER, "Discarding unparseable args: ['--pipeline_type_check', '--direct_runner_use_stacked_bundle']"
    ),
    # The Evaluator (TFMA) first tries to load the serving SavedModel as a Keras model; it is a plain
    # tf.saved_model by design, and TFMA then serves it through its signatures.
    KnownRecord("tensorflow", "SavedModel saved prior to TF 2.5 detected when loading Keras model."),
    # TFMA 0.47.1's own call of a deprecated TF reader when it writes the evaluation (a 4-line record).
    KnownRecord(
        "tensorflow",
        "metrics_plots_and_validations_writer.py:112: tf_record_iterator (from tensorflow.python.lib.io.tf_record) "
        "is deprecated",
    ),
)

# INFO records a default `run` shows: a stage's start, and one line for each long stage's work.
PROGRESS: tuple[KnownRecord, ...] = (
    KnownRecord("torchtfx.pipeline.local.runner", "Running %s on %s"),
    KnownRecord("absl", "Component %s is running."),  # TFX's LocalDagRunner
    KnownRecord("absl", "Skipping component %s."),
    KnownRecord("torchtfx.components.csv_input.executor", "Checked the CSV files "),  # rows
    KnownRecord("torchtfx.components.csv_input.executor", "Window of %s spans "),  # spans read, spans reused
    KnownRecord("torchtfx.train", "Training done: "),  # epochs, when training runs in this process
    KnownRecord(DDP_WORKER, "Training done: "),
    # components/torch_trainer/worker/progress.py: a line a minute inside a long epoch only (the MiniLM fine-tune
    # on every review was 24 silent minutes of console without it; the line went to train.log alone)
    KnownRecord("torchtfx.train", "Epoch %s/%s: step "),
    KnownRecord(DDP_WORKER, "Epoch "),  # the epoch-end lines start with a lower-case "epoch"
)
_ABSL_STAGES = (*(p.text for p in PROGRESS if p.logger == "absl"), "Component %s is finished.")


@dataclasses.dataclass(frozen=True)
class KnownWarning:
    category: type[Warning]
    module: str  # the module the warning is attributed to
    text: str  # exact start of the message; no ':' or ',' (PYTHONWARNINGS separates fields and filters by them)


_TFMA_AUC = "tensorflow_model_analysis.metrics.confusion_matrix_metrics"
HARMLESS_WARNINGS: tuple[KnownWarning, ...] = (
    # google-api-core, once per google client module that tfx imports (in this process and each Beam worker):
    # Python 3.10 is the version TFX 1.16 requires.
    KnownWarning(FutureWarning, "google.api_core._python_version_support", "You are using a non-supported Python"),
    # google-auth, in each Beam worker: grpcio 1.65 is what TFX 1.16 pins; no Google Cloud connection is made.
    KnownWarning(FutureWarning, "google.auth.transport.grpc", "grpcio < 1.83.0 does not support Post-Quantum"),
    # torch.from_numpy on the read-only eval arrays, whose tensors the ONNX check only reads.
    KnownWarning(
        UserWarning, "torchtfx.components.torch_trainer.torch_to_onnx.onnx_export", "The given NumPy array is not"
    ),
    # TFMA 0.47's interpolated AUC-PR divides by empty threshold buckets (0/0), then sums with np.nansum.
    KnownWarning(RuntimeWarning, _TFMA_AUC, "invalid value encountered in divide"),
    KnownWarning(RuntimeWarning, _TFMA_AUC, "divide by zero encountered in divide"),
)

_WORKER_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_DDP_LINE = re.compile(r"^\S+ \S+ \[rank \d+\] (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$")


def _judged(record: logging.LogRecord) -> tuple[str, int, str, str]:
    """(source, level, message, template) of a record, a worker's relayed record unwrapped: its source,
    its own level and its own message. ``template`` is the format string where the record has one."""
    message = record.getMessage()
    if record.name == _JOB_SERVICE and message.startswith("Worker: "):
        found = _WORKER_MESSAGE.search(message)
        if found:
            inner = found.group(1).replace("\\'", "'").replace('\\"', '"')
            return BEAM_WORKER, record.levelno, inner, inner
    if record.name == _DDP_LAUNCH and record.msg == "%s":
        line = _DDP_LINE.match(message)
        if line:
            return DDP_WORKER, logging.getLevelName(line.group(1)), line.group(2), line.group(2)
        return DDP_WORKER, logging.WARNING, message, message  # raw output (a warning, a traceback): show it
    return record.name, record.levelno, message, str(record.msg)


def is_harmless(source: str, message: str) -> bool:
    return any(known.logger == source and known.text in message for known in HARMLESS_RECORDS)


class ConsoleFilter(logging.Filter):
    """On the console handler: drops the known-harmless records and, for absl, INFO other than TFX's stage
    lines; with ``progress_only`` (a default run) every INFO record but those of PROGRESS."""

    def __init__(self, progress_only: bool = False) -> None:
        super().__init__()
        self.progress_only = progress_only

    def filter(self, record: logging.LogRecord) -> bool:
        source, level, message, template = _judged(record)
        if is_harmless(source, message):
            return False
        if level >= logging.WARNING:
            return True
        if self.progress_only:
            return any(p.logger == source and template.startswith(p.text) for p in PROGRESS)
        return source != "absl" or template.startswith(_ABSL_STAGES)


def python_warnings(existing: str = "") -> str:
    """PYTHONWARNINGS for child processes: the harmless warnings ignored, then the user's own (which win)."""
    ours = [f"ignore:{w.text}:{w.category.__name__}:{w.module}" for w in HARMLESS_WARNINGS]
    theirs = [entry for entry in existing.split(",") if entry and entry not in ours]  # configured twice: no repeat
    return ",".join(ours + theirs)


def _console_handlers() -> list[logging.Handler]:
    """The root's plain stream handlers (basicConfig's), not a test framework's capturing ones."""
    return [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]


def configure(verbose: bool) -> None:
    """Quiet console unless ``verbose``; call before TF, TFX or MLflow is imported."""
    if verbose:
        return
    # TF's C++ INFO lines (oneDNN, CPU features, no CUDA driver); its warnings and errors go through
    # stderr_relay. Set before TF is imported; every subprocess inherits it.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # MLflow's INFO lines ("Creating initial MLflow database tables...") have their own handler.
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    # transformers' "Loading weights" bar, each time a pretrained checkpoint is built (the model check, the Trainer,
    # parity's Hugging Face path: 3 bars a run); huggingface_hub reads it when first imported, workers inherit it.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "mlflow" in sys.modules:
        logging.getLogger("mlflow").setLevel(logging.WARNING)
    for known in HARMLESS_WARNINGS:
        warnings.filterwarnings(
            "ignore", message=re.escape(known.text), category=known.category, module=re.escape(known.module) + r"\Z"
        )
    os.environ["PYTHONWARNINGS"] = python_warnings(os.environ.get("PYTHONWARNINGS", ""))
    for handler in _console_handlers():
        handler.addFilter(ConsoleFilter())


def show_progress_only() -> None:
    """A default ``torchtfx run``: INFO records on the console are the PROGRESS lines alone (no-op with -v)."""
    for handler in _console_handlers():
        for console_filter in handler.filters:
            if isinstance(console_filter, ConsoleFilter):
                console_filter.progress_only = True
