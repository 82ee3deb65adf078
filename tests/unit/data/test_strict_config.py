"""The one config mechanism, across the families: unknown keys at any depth, file:line for YAML syntax
errors, type coercion, a family's own error type, and the JSON round trip TFX execution properties need."""

from __future__ import annotations

import json

import pytest

from tests.paths import PROJECT_ROOT
from torchtfx.components.tf_serving.batching import BatchingConfigError, BatchingParams
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobConfigError, PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.hparams import HParamsError, TrainerHParams
from torchtfx.data.config.dataset import DatasetConfig, DatasetConfigError, load_dataset_config
from torchtfx.data.config.gates import GateConfig, GateConfigError
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.strict import MAX_YAML_NODES, ConfigError
from torchtfx.pipeline.kfp.config import KubeflowConfigError, load_kubeflow_settings
from torchtfx.pipeline.local.runner import LocalSettings, LocalSettingsError

TAXI_YAML = (PROJECT_ROOT / "data" / "datasets" / "taxi.yaml").read_text()
POOLS_YAML = (PROJECT_ROOT / "kubeflow" / "pools.yaml").read_text()


def _write(tmp_path, text: str, name: str = "mine.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "slices:",
            "slice:",
            "unknown key slice; allowed keys here: defaults, features, gates, label, max_cell_chars, missing_values,",
        ),
        ("  categorical:", "  categorcal:", "unknown key features.categorcal; allowed keys here: bucketized, "),
        ("  column: tips", "  colum: tips", "unknown key label.colum; allowed keys here: column, log1p, missing, name"),
        ("vocabulary:\n  top_k: 1000", "vocabulary:\n  topk: 1000", "unknown key vocabulary.topk; allowed keys"),
        ("source:\n  package: tfx", "source:\n  pkg: tfx", "unknown key source.pkg; allowed keys here: package, path"),
    ],
)
def test_unknown_dataset_keys_are_refused_with_their_path_and_the_allowed_keys(tmp_path, old, new, message):
    """A typo used to drop a section silently (slices, features): now it names the file, the key and the fix."""
    path = _write(tmp_path, TAXI_YAML.replace(old, new, 1))
    with pytest.raises(DatasetConfigError) as err:
        load_dataset_config(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_unknown_gate_keys_are_refused(tmp_path):
    path = _write(tmp_path, TAXI_YAML + "gates:\n  auc_flor: 0.8\n")
    allowed = r"unknown key gates\.auc_flor; allowed keys here: accuracy_floor, auc_floor, "
    with pytest.raises(DatasetConfigError, match=allowed):
        load_dataset_config(path)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    text = TAXI_YAML.replace("split: {train: 2, eval: 1}", "split: {train: 2, eval: 1")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("split:"))
    path = _write(tmp_path, text)
    with pytest.raises(DatasetConfigError) as err:
        load_dataset_config(path)
    reported = int(str(err.value).split(":")[1])
    assert str(err.value).startswith(f"{path}:") and "not valid YAML" in str(err.value)
    assert line <= reported <= line + 3, (line, str(err.value))  # YAML stops where it noticed, a few lines on


def test_pools_yaml_syntax_error_names_file_and_line(tmp_path):
    path = _write(tmp_path, POOLS_YAML.replace("image: ghcr", "image: [ghcr", 1), "pools.yaml")
    with pytest.raises(KubeflowConfigError, match=rf"^{path}:\d+: not valid YAML"):
        load_kubeflow_settings(path)


def test_unknown_trainer_key_in_pools_yaml_is_refused(tmp_path):
    path = _write(tmp_path, POOLS_YAML.replace("  gpus_per_node: 1", "  gpus_per_nod: 1"), "pools.yaml")
    with pytest.raises(KubeflowConfigError, match=r"unknown key trainer\.gpus_per_nod; allowed keys here: "):
        load_kubeflow_settings(path)


def test_values_are_coerced_or_refused_by_name(tmp_path):
    coerced = load_dataset_config(_write(tmp_path, TAXI_YAML.replace("top_k: 1000", 'top_k: "500"')))
    assert coerced.vocab_top_k == 500
    with pytest.raises(DatasetConfigError, match=r"vocabulary\.top_k: Input should be a valid integer.*got 'lots'"):
        load_dataset_config(_write(tmp_path, TAXI_YAML.replace("top_k: 1000", "top_k: lots"), "bad.yaml"))


def test_every_family_raises_its_own_error_which_is_a_config_error():
    taxi = load_dataset_config("taxi")
    cases = [
        (HParamsError, lambda: TrainerHParams(epochs=0)),
        (BatchingConfigError, lambda: BatchingParams(max_batch_size=0)),
        (GateConfigError, lambda: GateConfig(auc_floor=1.5)),
        (PyTorchJobConfigError, lambda: PyTorchJobSettings(image="img:1", num_nodes=1)),
        (
            LocalSettingsError,
            lambda: LocalSettings(dataset=taxi, pipeline_root="r", beam_workers=0),
        ),
    ]
    for error, build in cases:
        with pytest.raises(error) as err:
            build()
        assert isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "config",
    [
        TrainerHParams(model={"factory": "dcn", "hparams": {"hidden_units": [32, 16]}}, sync_every=4),
        BatchingParams(max_batch_size=64),
        GateConfig(value_floors={"precision": 0.5}, slice_max_auc_drop={"payment_type": 0.05}),
        PyTorchJobSettings(
            image="img:1",
            num_nodes=2,
            tolerations=({"key": "gpu", "operator": "Exists"},),
            volumes=({"claim_name": "c", "mount_path": "/mnt"},),
            elastic_min_nodes=2,
            elastic_max_nodes=3,
        ),
    ],
    ids=lambda c: type(c).__name__,
)
def test_json_round_trip_is_plain_sorted_and_lossless(config):
    text = config.to_json()
    raw = json.loads(text)
    assert list(raw) == sorted(raw)  # stable TFX cache keys
    assert type(config).from_json(text) == config


def test_dataset_config_round_trips_with_its_gates(tmp_path):
    path = _write(tmp_path, TAXI_YAML + "gates:\n  value_floors: {precision: 0.5}\n  max_auc_drop: 0.02\n")
    cfg = load_dataset_config(path)
    assert DatasetConfig.from_json(cfg.to_json()) == cfg and cfg.gates.value_floors == {"Precision": 0.5}


def test_replace_validates_like_any_other_input():
    with pytest.raises(HParamsError, match="num_workers"):
        TrainerHParams().replace(num_workers=0)
    assert TrainerHParams().replace(num_workers=4).num_workers == 4


def _line_of(text: str, start: str) -> int:
    return next(i for i, row in enumerate(text.splitlines(), 1) if row.lstrip().startswith(start))


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" block of ``defaults:``: level i lists level i-1 ``width`` times (width**levels values)."""
    rows = [f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    rows += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "defaults:\n" + "\n".join(rows) + "\n"


def test_an_alias_bomb_in_defaults_is_refused_naming_file_and_line(tmp_path):
    """9 levels x 9 aliases (387M values): it loaded as shared references, then the JSON execution property
    expanded it until memory ran out. The level that crosses the limit is named."""
    text = TAXI_YAML.replace("defaults: {}\n", _alias_bomb())
    path = _write(tmp_path, text)
    with pytest.raises(DatasetConfigError) as err:
        load_dataset_config(path)
    line = _line_of(text, "l5:")  # l5 holds 597,871 values (lists included), l4 66,430
    assert str(err.value) == (
        f"{path}:{line}: the aliases in this value expand to more than {MAX_YAML_NODES:,} values (a YAML alias "
        "bomb?); write the values out"
    )


def test_a_recursive_alias_in_model_hparams_is_refused_naming_file_and_line(tmp_path):
    """``&loop [1, *loop]`` loaded as a list that holds itself; serializing it failed as an unexpected ValueError."""
    text = TAXI_YAML + "model:\n  factory: mlp\n  hparams:\n    hidden_units: &loop [64, *loop]\n"
    path = _write(tmp_path, text)
    with pytest.raises(DatasetConfigError) as err:
        load_dataset_config(path)
    assert str(err.value) == (
        f"{path}:{_line_of(text, 'hidden_units:')}: alias *loop refers to the value it is inside (a recursive "
        "alias has no end); write the value out"
    )


def test_aliases_that_share_a_small_value_still_load(tmp_path):
    text = TAXI_YAML.replace("defaults: {}\n", "defaults:\n  fare: &zero 0.0\n  trip_miles: *zero\n")
    assert load_dataset_config(_write(tmp_path, text)).defaults == {"fare": 0.0, "trip_miles": 0.0}


def test_model_source_in_a_config_file_is_refused_and_torchtfx_s_own_json_keeps_it(tmp_path):
    """``model.source`` ran instead of the named factory; only torchtfx sets it (from the factory's file)."""
    text = TAXI_YAML + "model:\n  factory: mlp\n  source: |\n    import os\n    os.system('echo pwned')\n"
    path = _write(tmp_path, text)
    with pytest.raises(DatasetConfigError) as err:
        load_dataset_config(path)
    assert str(err.value).startswith(f"{path}: model.source: is set by torchtfx, never read from a config file; ")
    assert "model.factory ('path/to/file.py:function')" in str(err.value) and "pwned" not in str(err.value)
    with pytest.raises(HParamsError, match=r"^trainer: model\.source: is set by torchtfx"):
        TrainerHParams.parse({"model": {"factory": "/m.py:build", "source": "x = 1"}}, "trainer")
    embedded = TrainerHParams().replace(model=ModelConfig(factory="/m.py:build").replace(source="x = 1"))
    assert TrainerHParams.from_json(embedded.to_json()).model.source == "x = 1"
