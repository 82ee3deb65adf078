"""Thin TFX glue: promote the blessed candidate, or record the rejected one, via promotion.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from torchtfx.components.promoter import gate_results, promotion
from torchtfx.components.promoter.constants import (
    BATCHING_KEY,
    BLESSING_KEY,
    CODE_VERSION_KEY,
    EVALUATION_KEY,
    EXAMPLES_KEY,
    MLFLOW_TRACKING_URI_KEY,
    MODEL_KEY,
    PUSHED_DESTINATION_PROPERTY,
    PUSHED_MODEL_KEY,
    PUSHED_PROPERTY,
    PUSHED_VERSION_PROPERTY,
    REGISTERED_MODEL_KEY,
    REJECTION_PROPERTY,
    SERVING_DIR_KEY,
    SERVING_MODEL_NAME_KEY,
    STATISTICS_KEY,
    TRAIN_STATISTICS_TAG,
)
from torchtfx.components.shared.artifact_uris import remote_uri
from torchtfx.components.shared.mlflow_client import (
    Registry,
    TrackingUnavailableError,
    check_reachable,
    resolve_tracking_uri,
)
from torchtfx.components.shared.run_identity import run_identity
from torchtfx.components.shared.serving_layout import BatchingParams
from torchtfx.components.torch_trainer.constants import MLFLOW_RUN_ID_PROPERTY, PARITY_PROPERTY

logger = logging.getLogger(__name__)

_TAGGED_METRICS = ("auc", "auc_precision_recall", "binary_accuracy", "calibration", "example_count")


def _prop(artifact: types.Artifact, name: str, default: Any = None) -> Any:
    return artifact.get_custom_property(name) if artifact.has_custom_property(name) else default


def _tags(
    model, examples, statistics, evaluation_uri: str, exec_properties: dict, run_id: str, execution_id: str
) -> dict:
    overall = {}
    for (slice_, metric, _model, is_diff), value in gate_results.metric_values(evaluation_uri).items():
        if slice_ == "Overall" and not is_diff and metric in _TAGGED_METRICS and _model in ("", "candidate"):
            overall[f"metric.{metric}"] = f"{value:.6f}"
    return {
        "pipeline_run_id": run_id,
        "mlmd_execution_id": execution_id,
        "model_uri": remote_uri(model.uri),
        "data_span": str(examples.span),
        "data_fingerprint": str(_prop(examples, "input_fingerprint", "unknown")),
        "git_commit": exec_properties[CODE_VERSION_KEY],
        "parity_max_abs_diff": str(_prop(model, PARITY_PROPERTY, "unknown")),
        **({TRAIN_STATISTICS_TAG: remote_uri(statistics.uri)} if statistics is not None else {}),
        **overall,
    }


def _require_registry(tracking_uri: str) -> None:
    try:
        check_reachable(tracking_uri)
    except TrackingUnavailableError as err:
        raise promotion.PromotionError(
            f"{err}: the candidate was trained and evaluated but NOT promoted or recorded; the serving directory "
            "and the registry are unchanged. Rerun when MLflow is reachable: completed steps come from the cache."
        ) from None


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model = artifact_utils.get_single_instance(input_dict[MODEL_KEY])
        blessing = artifact_utils.get_single_instance(input_dict[BLESSING_KEY])
        evaluation = artifact_utils.get_single_instance(input_dict[EVALUATION_KEY])
        examples = artifact_utils.get_single_instance(input_dict[EXAMPLES_KEY])
        statistics = (input_dict.get(STATISTICS_KEY) or [None])[0]
        pushed = artifact_utils.get_single_instance(output_dict[PUSHED_MODEL_KEY])
        serving_dir = Path(exec_properties[SERVING_DIR_KEY])
        target = promotion.ServingTarget(
            serving_dir=serving_dir,
            model_name=exec_properties[SERVING_MODEL_NAME_KEY],
            registry=Registry(
                resolve_tracking_uri(exec_properties[MLFLOW_TRACKING_URI_KEY]), exec_properties[REGISTERED_MODEL_KEY]
            ),
            batching=BatchingParams(**json.loads(exec_properties[BATCHING_KEY])),
        )
        run_id, execution_id = run_identity(self, exec_properties)
        onnx_path = Path(model.uri) / "export" / "model.onnx"
        candidate = promotion.Candidate(
            saved_model_dir=Path(path_utils.serving_model_path(model.uri)),
            onnx_path=onnx_path if onnx_path.is_file() else None,
            mlflow_run_id=_prop(model, MLFLOW_RUN_ID_PROPERTY),
            tags=_tags(model, examples, statistics, evaluation.uri, exec_properties, run_id, execution_id),
        )
        _require_registry(target.registry.tracking_uri)  # before any change: promotion never half-happens
        if _prop(blessing, "blessed", 0) == 1:
            version = promotion.promote(candidate, target)
            pushed.set_int_custom_property(PUSHED_PROPERTY, 1)
            pushed.set_string_custom_property(PUSHED_DESTINATION_PROPERTY, str(serving_dir / str(version)))
            pushed.set_int_custom_property(PUSHED_VERSION_PROPERTY, version)
            return
        reasons = [f.line() for f in gate_results.gate_failures(evaluation.uri)] or ["not blessed by the Evaluator"]
        promotion.reject(candidate, target, reasons)
        pushed.set_int_custom_property(PUSHED_PROPERTY, 0)
        pushed.set_string_custom_property(REJECTION_PROPERTY, "\n".join(reasons))
        logger.warning("Candidate rejected; production unchanged:\n%s", "\n".join(reasons))
