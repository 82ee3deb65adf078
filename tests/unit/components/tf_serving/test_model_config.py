"""models.config: a ModelServerConfig text proto, read back by parsing; a file that does not parse is refused."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from torchtfx.components.tf_serving import model_config
from torchtfx.components.tf_serving.errors import ServingConfigError
from torchtfx.components.tf_serving.model_config import ServedState


def test_models_config_is_a_model_server_config_text_proto(tmp_path):
    state = ServedState(frozenset({3, 7}), {"stable": 3, "canary": 7})
    model_config.write_models_config(tmp_path, "taxi", state)
    parsed = model_server_config_pb2.ModelServerConfig()
    text_format.Parse((tmp_path / model_config.MODELS_CONFIG).read_text(), parsed)
    (model,) = parsed.model_config_list.config
    assert (model.name, model.base_path, model.model_platform) == ("taxi", str(tmp_path), "tensorflow")
    assert list(model.model_version_policy.specific.versions) == [3, 7]
    assert dict(model.version_labels) == {"stable": 3, "canary": 7}
    assert model_config.read_state(tmp_path) == state
    (tmp_path / model_config.MODELS_CONFIG).write_text("model_config_list { config { nme: 'x' } }")
    with pytest.raises(ServingConfigError, match="is not a ModelServerConfig text proto"):
        model_config.read_state(tmp_path)
