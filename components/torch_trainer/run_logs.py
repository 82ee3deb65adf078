"""Where the training log is written, so that a failed run leaves it where its error message says.

TFX deletes a failed execution's outputs: a log inside the ModelRun artifact vanished together with the failure
its message pointed at. The log is written to ``<pipeline root>/logs/<run id>/train.log`` while training runs
(a killed pipeline leaves it there too); after a failure the last checkpoint's summary (``checkpoint.json``:
epoch, eval loss, history) joins it. After a success the log moves into the ModelRun artifact, as before.

On Kubeflow the step sees its artifacts through the launcher's local copies, which are uploaded only when the
step succeeds; the log is written there and, after a failure, copied to the pipeline root with ``tf.io.gfile``
when its scheme allows it (gs://). TensorFlow 2.16 cannot write s3:// or minio://: there the step's own log,
which streams every worker line, is the record.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import tensorflow as tf

from torchtfx.components.shared.contracts import TRAIN_LOG_FILE
from torchtfx.components.torch_trainer.handoff.constants import CHECKPOINT_META_FILE

logger = logging.getLogger(__name__)

LOGS_FOLDER = "logs"
# Remote schemes tf.io.gfile writes in this image.
_GFILE_SCHEMES = ("gs://",)


def log_root_for(pipeline_root: str) -> str:
    """``<pipeline root>/logs``; "" when the pipeline root is unknown."""
    return f"{pipeline_root.rstrip('/')}/{LOGS_FOLDER}" if pipeline_root else ""


def default_log_root(artifact_uri: str) -> str:
    """From an output artifact's URI laid out as ``<pipeline root>/<node id>/<output key>/<execution id>``
    (LocalDagRunner's layout): ``<pipeline root>/logs``."""
    return log_root_for(artifact_uri.rstrip("/").rsplit("/", 3)[0])


def run_log_dir(log_root: str, run_id: str, execution_id: str) -> str:
    """``<log root>/<run id>`` (the execution id where the orchestrator does not name the run)."""
    name = run_id if run_id and run_id != "unknown" else execution_id
    return f"{log_root.rstrip('/')}/{re.sub(r'[^A-Za-z0-9._:+-]', '_', name)}"


class RunLogs:
    """The training log of one run: written to ``log_dir`` when it is a local path, else next to the run's
    outputs (``run_dir``) and copied to ``log_dir`` after a failure."""

    def __init__(self, log_dir: str, run_dir: Path) -> None:
        self.log_dir, self.run_dir = log_dir.rstrip("/"), run_dir
        self.local = bool(self.log_dir) and "://" not in self.log_dir
        self.kept = self.local or self.log_dir.startswith(_GFILE_SCHEMES)
        self.log_path = Path(self.log_dir) / TRAIN_LOG_FILE if self.local else run_dir / TRAIN_LOG_FILE
        if self.log_dir and not self.kept:
            logger.warning(
                "%s cannot be written from this step (TensorFlow writes only local paths and gs://): "
                "after a failure, the training log is this step's own log",
                self.log_dir,
            )

    @property
    def shown_log(self) -> str:
        """Where the log is after the run, whatever its outcome: what an error message names."""
        return f"{self.log_dir}/{TRAIN_LOG_FILE}" if self.kept else str(self.log_path)

    def open_path(self) -> Path:
        """The file to write the log to (its folder created)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return self.log_path

    def keep_failure(self, checkpoint_dir: Path) -> None:
        """After a failure: the last checkpoint's summary next to the log, and the log itself where it was
        written elsewhere. Never raises: the run's own error is what the user must see."""
        if not self.kept:
            return
        copies = [(checkpoint_dir / CHECKPOINT_META_FILE, CHECKPOINT_META_FILE)]
        copies += [] if self.local else [(self.log_path, TRAIN_LOG_FILE)]
        copies = [(src, name) for src, name in copies if src.exists()]
        if not copies and not self.log_path.exists():
            return  # failed before training started: nothing to keep
        try:
            tf.io.gfile.makedirs(self.log_dir)
            for src, name in copies:
                tf.io.gfile.copy(str(src), f"{self.log_dir}/{name}", overwrite=True)
        except (OSError, tf.errors.OpError) as err:
            logger.error("Could not keep the training log in %s: %s", self.log_dir, err)
            return
        logger.error("The training log and the last checkpoint's summary are kept in %s", self.log_dir)

    def keep_success(self) -> None:
        """After a success: the log moves into the ModelRun artifact (``run_dir``), the run's log folder goes."""
        if not self.local:
            return
        if self.log_path.exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.log_path, self.run_dir / TRAIN_LOG_FILE)
        shutil.rmtree(self.log_dir, ignore_errors=True)
