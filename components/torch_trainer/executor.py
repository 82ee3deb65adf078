"""Thin TFX glue around :mod:`torchtfx.components.torch_trainer.flow`."""

from __future__ import annotations

import json
import logging
import math
import uuid
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from torchtfx.components.shared.artifact_uris import remote_uri
from torchtfx.components.shared.contracts import (
    CONVERSION_PROPERTY,
    DATASET_CONFIG_KEY,
    EVAL_METRIC_PROPERTY_PREFIX,
    LABEL_REFUSED_PROPERTY,
    MLFLOW_POLICY_KEY,
    MLFLOW_RUN_ID_PROPERTY,
    MLFLOW_TRACKING_URI_KEY,
    MODEL_FACTORY_PROPERTY,
    NUM_WORKERS_PROPERTY,
    PARITY_PROPERTY,
    PRECISION_DRIFT_PROPERTY,
    SERVING_PRECISION_PROPERTY,
    TASK_PROPERTY,
)
from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE, resolve_tracking_uri, tracking_uri_or_none
from torchtfx.components.shared.run_identity import run_identity
from torchtfx.components.torch_trainer import constants as keys
from torchtfx.components.torch_trainer import flow
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.run_logs import default_log_root, run_log_dir
from torchtfx.data.config.dataset import DatasetConfig

logger = logging.getLogger(__name__)


def _split_uri(examples: types.Artifact, split: str) -> str:
    names = artifact_utils.decode_split_names(examples.split_names)
    if split not in names:
        raise ValueError(f"{examples.uri} has splits {names}; TorchTrainer needs '{split}'")
    return artifact_utils.get_split_uri([examples], split)


def _pytorchjob(text: str | None) -> PyTorchJobSettings | None:
    if not text:
        return None
    return PyTorchJobSettings.from_json(text, keys.PYTORCHJOB_KEY)


def _serving_batch(value: int | None) -> dict[str, int]:
    """TrainRequest's ``serving_batch_size`` where the pipeline set one (absent or 0: the batching default)."""
    return {"serving_batch_size": int(value)} if value else {}


def set_metric_properties(artifact: types.Artifact, prefix: str, metrics: dict[str, float]) -> None:
    """Each finite metric as a float property. ML Metadata's sqlite store puts a double into its SQL text, so
    NaN or inf fails the whole publish ("no such column: nan"); such a metric is left out, with a warning."""
    for name, value in metrics.items():
        if math.isfinite(value):
            artifact.set_float_custom_property(prefix + name, value)
        else:
            logger.warning("Eval metric %s is %s; not recorded on the Model artifact", name, value)


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        raw = artifact_utils.get_single_instance(input_dict[keys.EXAMPLES_KEY])
        graph = artifact_utils.get_single_instance(input_dict[keys.TRANSFORM_GRAPH_KEY])
        model = artifact_utils.get_single_instance(output_dict[keys.MODEL_KEY])
        model_run = artifact_utils.get_single_instance(output_dict[keys.MODEL_RUN_KEY])
        dataset = DatasetConfig.from_json(exec_properties[DATASET_CONFIG_KEY])
        run_id, execution_id = run_identity(self)
        request = flow.TrainRequest(
            dataset=dataset,
            hparams=TrainerHParams.from_json(exec_properties[keys.HPARAMS_KEY]),
            split_uris={split: _split_uri(raw, split) for split in ("train", "eval")},
            transform_graph_uri=graph.uri,
            model_uri=model.uri,
            serving_dir=path_utils.serving_model_dir(model.uri),
            run_uri=model_run.uri,
            work_dir=self._get_tmp_dir(),
            # '' (policy 'continue', server unreachable): train without tracking.
            mlflow_tracking_uri=tracking_uri_or_none(
                resolve_tracking_uri(exec_properties[MLFLOW_TRACKING_URI_KEY]),
                exec_properties.get(MLFLOW_POLICY_KEY) or FAIL_IF_UNREACHABLE,
                "Training",
            )
            or "",
            mlflow_experiment=exec_properties[keys.MLFLOW_EXPERIMENT_KEY],
            mlflow_run_name=f"{dataset.name}-{run_id}",
            mlflow_tags={"pipeline_run_id": run_id, "mlmd_execution_id": execution_id, "dataset": dataset.name},
            parity_tolerance=float(exec_properties[keys.PARITY_TOLERANCE_KEY]),
            pytorchjob=_pytorchjob(exec_properties.get(keys.PYTORCHJOB_KEY)),
            unique_id=f"{run_id}-{execution_id}-{uuid.uuid4().hex}",
            **_serving_batch(exec_properties.get(keys.SERVING_BATCH_KEY)),
            log_dir=run_log_dir(
                exec_properties.get(keys.LOG_ROOT_KEY) or default_log_root(remote_uri(model.uri)), run_id, execution_id
            ),
        )
        outcome = flow.run(request)
        # As text: ML Metadata's sqlite store keeps doubles to 6 decimal places, which would turn a
        # parity of 1.2e-07 into 0.0.
        model.set_string_custom_property(PARITY_PROPERTY, f"{outcome.parity.max_abs_diff:.6e}")
        model.set_string_custom_property(TASK_PROPERTY, dataset.task)
        set_metric_properties(model, EVAL_METRIC_PROPERTY_PREFIX, outcome.result.eval_metrics)
        model.set_int_custom_property(NUM_WORKERS_PROPERTY, outcome.result.world_size)
        model.set_string_custom_property(MODEL_FACTORY_PROPERTY, request.hparams.model.factory)
        model.set_string_custom_property(CONVERSION_PROPERTY, outcome.conversion)
        if outcome.refused:  # rows could be refused for their label (none: the property stays absent)
            model.set_string_custom_property(LABEL_REFUSED_PROPERTY, json.dumps(outcome.refused, sort_keys=True))
        model.set_string_custom_property(SERVING_PRECISION_PROPERTY, outcome.precision.served)
        if outcome.precision.requested != "fp32":
            model.set_string_custom_property(PRECISION_DRIFT_PROPERTY, outcome.precision.to_json())
        if outcome.result.mlflow_run_id:
            model.set_string_custom_property(MLFLOW_RUN_ID_PROPERTY, outcome.result.mlflow_run_id)
        logger.info("TorchTrainer step times (s): %s", {k: round(v, 1) for k, v in outcome.seconds.items()})
