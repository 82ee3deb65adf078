"""What ``create_pipeline`` takes: the resolved settings bound to one environment by a runner (the local runner's
paths and sqlite stores, or the cluster's bucket, volumes and image). Names derived from the dataset are
properties, so no runner computes them."""

from __future__ import annotations

import pydantic

from torchtfx.components.promoter.public import LABEL_CONFIRMATIONS, STAGED
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE, UNREACHABLE_POLICIES
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.transition import DEFAULT_LOAD_TIMEOUT_S
from torchtfx.components.torch_trainer.public import DEFAULT_PARITY_TOLERANCE, TrainerHParams
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.config.strict import StrictConfig, one_of
from torchtfx.pipeline.settings.resolve import SettingsError


class PipelineSettings(StrictConfig):
    """The resolved settings (dataset, trainer hyperparameters) and where this environment keeps things."""

    config_error = SettingsError

    dataset: DatasetConfig  # with the resolved gates, model and serving precision
    hparams: TrainerHParams  # with the model checked and, for a file factory, its source embedded
    pipeline_root: str
    data_root: str
    serving_model_dir: str
    mlflow_tracking_uri: str
    code_version: str = "unknown"  # a git commit, a distribution version or the image
    batching: BatchingParams = BatchingParams()
    # TF Serving's gRPC host:port, which confirms each load before a label moves; None: `promote --finish` does
    serving_address: str | None = None
    serving_load_timeout_s: pydantic.PositiveFloat = DEFAULT_LOAD_TIMEOUT_S
    confirm_labels: str = STAGED  # IMMEDIATE: no TF Serving reads the folder, the labels move at once
    parity_tolerance: pydantic.PositiveFloat = DEFAULT_PARITY_TOLERANCE
    beam_pipeline_args: tuple[str, ...] = ()
    enable_cache: bool = True
    pytorchjob_json: str = ""  # PyTorchJobSettings: multi-node DDP as a Kubeflow job; "": in the Trainer's pod
    mlflow_unreachable: str = FAIL_IF_UNREACHABLE  # fail before training, or continue untracked (no promotion)
    # Where ExampleGen keeps each span's examples for later runs (a dataset of spans); "": each run reads them all.
    span_store: str = ""

    _known_policy = one_of("mlflow_unreachable", UNREACHABLE_POLICIES)
    _known_confirmation = one_of("confirm_labels", LABEL_CONFIRMATIONS)

    @property
    def pipeline_name(self) -> str:
        return contracts.pipeline_name(self.dataset.name)

    @property
    def registered_model_name(self) -> str:
        """The MLflow registered model whose ``champion`` alias is production."""
        return self.pipeline_name

    @property
    def mlflow_experiment(self) -> str:
        return self.pipeline_name

    @property
    def serving_model_name(self) -> str:
        """The model's name in TF Serving's model config."""
        return self.dataset.name
