"""The feature layout read from Transform's output: a multiclass label's classes from its real vocabulary."""

from __future__ import annotations

import pytest

from torchtfx.components.stage_failure import StageFailure
from torchtfx.components.torch_trainer.modeling.features import LabelClassesError, label_classes


def test_more_classes_than_transform_s_label_vocabulary_is_a_named_stage_failure(tiny_payment):
    """The DataGate catches this before Transform where the statistics prove it; an integer label with gaps in
    its range gets here, and was an unexpected ValueError ('may be a bug')."""
    cfg = tiny_payment.cfg
    assert len(label_classes(cfg, tiny_payment.tft_output)) == cfg.label.num_classes == 3
    wider = cfg.replace(label=cfg.label.replace(num_classes=5))
    with pytest.raises(LabelClassesError, match=r"has only 3 distinct values .* but label\.num_classes is 5") as err:
        label_classes(wider, tiny_payment.tft_output)
    assert isinstance(err.value, StageFailure)
