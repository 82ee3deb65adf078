"""Tables made in place outside TFT, also after a TFT context has come and gone in the same thread."""

from __future__ import annotations

from tensorflow_transform.graph_context import TFGraphContext

from torchtfx.pipeline.transform.tracked import tracked


def test_outside_tft_after_a_tft_context_the_object_is_made_in_place(tmp_path):
    with TFGraphContext(module_to_export=None, temp_dir=str(tmp_path), evaluated_replacements=None):
        pass
    # TFT 1.16 leaves None as the thread's state here; get_module_to_export() raised AttributeError on it
    assert tracked(lambda: "made", "name") == "made"
