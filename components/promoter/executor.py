"""Thin TFX glue: promote the blessed candidate, or record the rejected one, via promotion.py.

A subclass of TFX's Pusher executor, as tfx-addons' huggingface_pusher is: its blessing check, model path and
``pushed`` / ``pushed_destination`` / ``pushed_version`` marks (names and types) are exactly what TFX tools
read from a PushedModel artifact."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tfx import types
from tfx.components.pusher import executor as pusher_executor
from tfx.types import artifact_utils

from torchtfx.components.promoter import promotion
from torchtfx.components.promoter.confirmation import STAGED
from torchtfx.components.promoter.constants import (
    BATCHING_KEY,
    CHAMPION_KEY,
    CODE_VERSION_KEY,
    CONFIRM_LABELS_KEY,
    EVALUATION_KEY,
    EXAMPLES_KEY,
    LOAD_TIMEOUT_KEY,
    MODEL_KEY,
    PUSHED_MODEL_KEY,
    SERVING_ADDRESS_KEY,
    SERVING_MODEL_NAME_KEY,
    STATISTICS_KEY,
)
from torchtfx.components.shared import contracts, evaluation_results
from torchtfx.components.shared.artifact_uris import remote_uri
from torchtfx.components.shared.contracts import (
    CHAMPION_REGISTRY_VERSION_PROPERTY,
    IDENTICAL_TO_PROPERTY,
    LABELS_PENDING_PROPERTY,
    MLFLOW_RUN_ID_PROPERTY,
    MLFLOW_TRACKING_URI_KEY,
    MODEL_FINGERPRINT_PROPERTY,
    PARITY_PROPERTY,
    REGISTERED_MODEL_KEY,
    REJECTION_PROPERTY,
    SERVING_DIR_KEY,
    TRAIN_STATISTICS_TAG,
    UNCHANGED_PROPERTY,
)
from torchtfx.components.shared.mlflow_client import (
    Registry,
    TrackingUnavailableError,
    check_reachable,
    resolve_tracking_uri,
)
from torchtfx.components.shared.run_identity import run_identity
from torchtfx.components.tf_serving.batching import BatchingParams
from torchtfx.components.tf_serving.transition import DEFAULT_LOAD_TIMEOUT_S
from torchtfx.data.config.metrics import TAGGED

logger = logging.getLogger(__name__)


def _prop(artifact: types.Artifact, name: str, default: Any = None) -> Any:
    return artifact.get_custom_property(name) if artifact.has_custom_property(name) else default


def _tags(
    model, examples, statistics, evaluation_uri: str, exec_properties: dict, run_id: str, execution_id: str
) -> dict:
    # The candidate's overall metrics (metrics.TAGGED: each task's own, by presence). MLflow tag names allow no
    # parentheses: auc(macro) -> metric.auc_macro
    candidate = evaluation_results.candidate_metrics(evaluation_uri).get(evaluation_results.OVERALL_SLICE, {})
    overall = {
        f"metric.{label.replace('(', '_').rstrip(')')}": f"{value:.6f}"
        for label, value in candidate.items()
        if label in TAGGED
    }
    return {
        "pipeline_run_id": run_id,
        "mlmd_execution_id": execution_id,
        "model_uri": remote_uri(model.uri),
        "data_span": str(examples.span),
        "data_fingerprint": str(_prop(examples, "input_fingerprint", "unknown")),
        "git_commit": exec_properties[CODE_VERSION_KEY],
        PARITY_PROPERTY: str(_prop(model, PARITY_PROPERTY, "unknown")),
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


def _compared_with(input_dict: dict[str, list[types.Artifact]]) -> promotion.Baseline:
    """The champion the Evaluator compared the candidate with: ChampionModel's record (no artifact: none)."""
    champion = (input_dict.get(CHAMPION_KEY) or [None])[0]
    return promotion.Baseline(None if champion is None else _prop(champion, CHAMPION_REGISTRY_VERSION_PROPERTY))


class Executor(pusher_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model = artifact_utils.get_single_instance(input_dict[MODEL_KEY])
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
            batching=BatchingParams.from_json(exec_properties[BATCHING_KEY]),
            server_address=exec_properties.get(SERVING_ADDRESS_KEY) or None,
            load_timeout_s=float(exec_properties.get(LOAD_TIMEOUT_KEY) or DEFAULT_LOAD_TIMEOUT_S),
            confirm_labels=exec_properties.get(CONFIRM_LABELS_KEY) or STAGED,
        )
        run_id, execution_id = run_identity(self, exec_properties)
        onnx_path = contracts.onnx_path(model.uri)
        candidate = promotion.Candidate(
            saved_model_dir=Path(self.GetModelPath(input_dict)),
            onnx_path=onnx_path if onnx_path.is_file() else None,
            mlflow_run_id=_prop(model, MLFLOW_RUN_ID_PROPERTY),
            tags=_tags(model, examples, statistics, evaluation.uri, exec_properties, run_id, execution_id),
            mlflow_model_dir=mlflow_model if (mlflow_model := contracts.mlflow_model_dir(model.uri)).is_dir() else None,
        )
        _require_registry(target.registry.tracking_uri)  # before any change: promotion never half-happens
        pushed.set_string_custom_property(MODEL_FINGERPRINT_PROPERTY, candidate.fingerprint)
        if self.CheckBlessing(input_dict):
            version = promotion.promote(candidate, target, _compared_with(input_dict))
            if isinstance(version, promotion.Unchanged):
                self._mark_unchanged(pushed, version, target)
                return
            self._MarkPushed(pushed, pushed_destination=str(serving_dir / str(version)), pushed_version=str(version))
            pushed.set_int_custom_property(
                LABELS_PENDING_PROPERTY, int(promotion.pending_label_move(target) == version)
            )
            return
        failures = evaluation_results.gate_failures(evaluation.uri)
        reasons = [f.line() for f in failures] or ["not blessed by the Evaluator"]
        recorded = promotion.reject(candidate, target, reasons)
        self._MarkNotPushed(pushed)
        pushed.set_string_custom_property(REJECTION_PROPERTY, "\n".join(reasons))
        if isinstance(recorded, promotion.Unchanged):
            self._mark_unchanged(pushed, recorded, target)
        logger.warning("Candidate rejected; production unchanged:\n%s", "\n".join(reasons))

    def _mark_unchanged(
        self, pushed: types.Artifact, outcome: promotion.Unchanged, target: promotion.ServingTarget
    ) -> None:
        """Not pushed (TFX's marks), and why: the sentence the run report prints, and the version it matched."""
        self._MarkNotPushed(pushed)
        pushed.set_string_custom_property(UNCHANGED_PROPERTY, outcome.message)
        if outcome.serving_version is not None:
            pushed.set_int_custom_property(IDENTICAL_TO_PROPERTY, outcome.serving_version)
            # A label move onto it that is still pending (a failed --finish) stays reported as such.
            pending = promotion.pending_label_move(target) == outcome.serving_version
            pushed.set_int_custom_property(LABELS_PENDING_PROPERTY, int(pending))
