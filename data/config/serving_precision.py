"""The ``serving:`` section: the precision the served network runs in, and the drift gate that guards it.

FP16 (TF-TRT on GPUs, a float16 network elsewhere) can change predictions: rounding in one layer moves a
score across the decision threshold, swaps the top class, or sends a token to another expert. A
reduced-precision variant is measured against the FP32 model on the whole eval split and served only when
every figure stays within its limit; otherwise the FP32 model is served and the figures say why.
"""

from __future__ import annotations

from typing import Literal

import pydantic

from torchtfx.data.config.strict import ConfigError, StrictConfig

PRECISIONS = ("fp32", "fp16")


class ServingPrecisionError(ConfigError):
    """The dataset YAML's serving: section (precision, drift limits) is malformed: a config-file error."""


class DriftLimits(StrictConfig):
    """How far the reduced-precision variant may drift from FP32 on the eval split."""

    config_error = ServingPrecisionError

    # classification: max |p_fp16 - p_fp32| over every probability. Regression is judged on the relative error
    # only: an absolute limit in the target's units would mean nothing across datasets.
    max_abs_diff: pydantic.NonNegativeFloat = 0.01
    max_flip_rate: pydantic.NonNegativeFloat = 0.001  # binary: share of decisions that flip at the threshold
    max_top1_change_rate: pydantic.NonNegativeFloat = 0.001  # multiclass: share of rows whose top class changes
    # regression: max |y_fp16 - y_fp32| / max(|y_fp32|, mean |y_fp32|); the floor keeps near-zero
    # predictions from dominating
    max_relative_error: pydantic.NonNegativeFloat = 0.01
    decision_threshold: float = pydantic.Field(0.5, gt=0.0, lt=1.0)  # binary decisions: p >= threshold
    # Mixtures of experts (TopK in the graph): share of top-k expert choices whose set of experts changes, per routed
    # token and layer, padding positions included where the model routes them. Measured on the untrained zoo
    # text_moe (defaults; vocab 2000, max_length 64, 4,000 rows of 0-64 Zipf tokens, median 25): 0.14-0.35% over
    # 5 seeds (0.17-0.44% of the real tokens' decisions); its router scaled 0.3x gives 0.9%, 0.1x (ten times nearer
    # ties) 2.5%, 0.03x 8.4%. 1% passes the first with a 3x margin and refuses routers whose choices are near-ties.
    max_routing_flip_rate: pydantic.NonNegativeFloat = 0.01


class ServingConfig(StrictConfig):
    config_error = ServingPrecisionError

    precision: Literal["fp32", "fp16"] = "fp32"  # fp32: the safe default; fp16 only behind the drift gate
    drift_limits: DriftLimits = DriftLimits()
