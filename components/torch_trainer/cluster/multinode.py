"""Multi-node training from inside the Trainer step: stage the job on the shared volume, run it as a TrainJob
(Kubeflow Trainer v2) or, on clusters that only have the Training Operator v1, a PyTorchJob (discovery.py picks
one at run time), and bring the model and run outputs back into the step's artifacts.

The nodes of either job are separate pods, so everything they read or write (job file, arrays, model,
checkpoints) lives on a volume that every replica and the Trainer step mount at the same path. Conversion
and the parity gate then run in the Trainer step exactly as they do locally.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

from torchtfx.components.torch_trainer.cluster.discovery import select_runner
from torchtfx.components.torch_trainer.cluster.job_runner import ClusterJobRunner, load_kubernetes_apis
from torchtfx.components.torch_trainer.cluster.pytorchjob_manifest import job_name, worker_command
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError, PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.constants import FATAL_FILE
from torchtfx.components.torch_trainer.handoff.job import TrainJob

logger = logging.getLogger(__name__)

STAGING_FOLDER = "torchtfx-pytorchjobs"  # kept for both job kinds: staging paths of earlier runs stay valid


@dataclasses.dataclass(frozen=True)
class Staging:
    root: Path

    @property
    def job_file(self) -> Path:
        return self.root / "job.json"

    @property
    def data_dir(self) -> Path:
        return self.root / "arrays"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"


def staging_for(settings: PyTorchJobSettings, name: str) -> Staging:
    if not settings.volumes:
        raise PyTorchJobConfigError(
            "multi-node training needs a shared ReadWriteMany volume (volumes: in the Kubeflow config) that "
            "the Trainer step and every node of the TrainJob/PyTorchJob mount"
        )
    return Staging(Path(settings.volumes[0].mount_path) / STAGING_FOLDER / name)


def run_on_cluster(
    settings: PyTorchJobSettings,
    job: TrainJob,
    staging: Staging,
    name: str,
    runner: ClusterJobRunner | None = None,
) -> None:
    """Run ``job`` (whose data already sits in ``staging.data_dir``) and copy its outputs back to
    ``job.model_dir`` and ``job.run_dir``. The staging folder is removed on success, kept on failure.
    ``runner`` None: the one the cluster serves (TrainJob preferred, else PyTorchJob)."""
    staged = dataclasses.replace(
        job, data_dir=str(staging.data_dir), model_dir=str(staging.model_dir), run_dir=str(staging.run_dir)
    )
    staging.run_dir.mkdir(parents=True, exist_ok=True)
    staged.save(staging.job_file)
    if runner is None:
        runner = select_runner(settings, *load_kubernetes_apis())
    manifest = runner.build_manifest(
        settings,
        name,
        worker_command(str(staging.job_file), settings.max_restarts, str(staging.run_dir / FATAL_FILE)),
        {"app.kubernetes.io/part-of": "torchtfx", "app.kubernetes.io/component": "trainer"},
    )
    logger.info(
        "Training on %s nodes x %s workers as %s %s/%s",
        settings.num_nodes,
        settings.nproc_per_node,
        manifest["kind"],
        manifest["metadata"]["namespace"],
        name,
    )
    runner.run(manifest, settings.timeout_seconds, settings.poll_seconds)
    shutil.copytree(staging.model_dir, job.model_dir, dirs_exist_ok=True)
    shutil.copytree(staging.run_dir, job.run_dir, dirs_exist_ok=True)
    shutil.rmtree(staging.root, ignore_errors=True)


def cluster_job_name(unique: str) -> str:
    return job_name("torchtfx-train", unique)
