"""The Evaluator's extractors (TFX's ``custom_extractors`` hook, named by the Evaluator's ``module_path``): TFMA's
default extractors, with each batch trimmed to what the slices and metrics read before TFMA splits it into one
extract per example.

TFMA splits every value a batch carries: the raw features, the transform signature's outputs, the serialized
example. Our metrics read the labels, predictions and weights (already extracted by then) and the slices read a
few raw features, so the rest is split and dropped example by example. A feature the slices or a metric's query
name stays, in the dict TFMA looks it up in, so slice keys and metric values are the same as with TFMA's own
extractors (checked in the unit tests).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.extractors import unbatch_extractor

logger = logging.getLogger(__name__)

TRIM_STAGE_NAME = "TrimToSlicedFeatures"


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config=None) -> list:
    """What TFX's Evaluator runs: TFMA's defaults for this model and config, with the trim before the unbatching."""
    extractors = tfma.default_extractors(
        eval_shared_model=eval_shared_model, eval_config=eval_config, tensor_adapter_config=tensor_adapter_config
    )
    return with_trim(extractors, eval_config)


def with_trim(extractors: list, eval_config: tfma.EvalConfig) -> list:
    """``extractors`` with :func:`trim_extractor` just before TFMA's unbatching; unchanged where there is none."""
    stages = [extractor.stage_name for extractor in extractors]
    if unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME not in stages:
        logger.warning(
            "TFMA's extractors have no %s stage; the Evaluator's batches are not trimmed",
            unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME,
        )
        return extractors
    position = stages.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    return [*extractors[:position], trim_extractor(eval_config), *extractors[position:]]


def read_features(eval_config: tfma.EvalConfig) -> frozenset[str]:
    """The features TFMA reads after the unbatching: those named by a slicing spec or a metric's query key."""
    specs = [
        *eval_config.slicing_specs,
        *(cross for spec in eval_config.cross_slicing_specs for cross in (spec.baseline_spec, *spec.slicing_specs)),
    ]
    sliced = {key for spec in specs for key in (*spec.feature_keys, *spec.feature_values)}
    queried = {spec.query_key for spec in eval_config.metrics_specs if spec.query_key}
    return frozenset(sliced | queried)


def trim_extractor(eval_config: tfma.EvalConfig) -> tfma.extractors.Extractor:
    keep = read_features(eval_config)
    models = len(eval_config.model_specs)
    return tfma.extractors.Extractor(
        stage_name=TRIM_STAGE_NAME,
        ptransform="TrimBatchedExtracts" >> beam.Map(trimmed, keep=keep, per_model=models > 1),
    )


def trimmed(batch: dict[str, Any], keep: frozenset[str], per_model: bool) -> dict[str, Any]:
    """A batched extract without the serialized examples and the features nothing reads later.

    The transform signature's outputs are keyed by model name where the config has several models (the
    candidate and the champion), as TFMA's slice key extractor reads them."""
    out = {key: value for key, value in batch.items() if key != constants.INPUT_KEY}
    if constants.FEATURES_KEY in out:
        out[constants.FEATURES_KEY] = _kept(out[constants.FEATURES_KEY], keep)
    transformed = out.get(constants.TRANSFORMED_FEATURES_KEY)
    if per_model and isinstance(transformed, dict):
        out[constants.TRANSFORMED_FEATURES_KEY] = {model: _kept(each, keep) for model, each in transformed.items()}
    elif transformed is not None:
        out[constants.TRANSFORMED_FEATURES_KEY] = _kept(transformed, keep)
    return out


def _kept(features: Any, keep: Iterable[str]) -> Any:
    """``features`` with only the ``keep`` keys; anything but a dict as it is."""
    if not isinstance(features, dict):
        return features
    return {name: features[name] for name in keep if name in features}
