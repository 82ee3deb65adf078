"""The registry's MLflow Model: built from a real serving SavedModel, registered by the real promotion code in
a sqlite registry, and loaded by alias in a fresh process with ``mlflow.pyfunc.load_model``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import torch

from tests.unit.components.torch_trainer.served_models import export_and_serve, train_briefly
from torchtfx.components.promoter import promotion
from torchtfx.components.shared import contracts
from torchtfx.components.shared.mlflow_client import CHAMPION, Registry
from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
from torchtfx.components.torch_trainer.modeling.factory import build_model, embed_source
from torchtfx.components.torch_trainer.savedmodel import mlflow_model
from torchtfx.components.torch_trainer.savedmodel.warmup import raw_examples
from torchtfx.data.config.model import ModelConfig


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_taxi):
    torch.manual_seed(0)
    model = train_briefly(build_model(ModelConfig(), tiny_taxi.layout.model_spec()), tiny_taxi)
    root = tmp_path_factory.mktemp("mlflow_model")
    export = root / "export"
    export.mkdir()
    serving = export_and_serve(tiny_taxi, model, export / contracts.ONNX_FILE, root / "serving")
    torch.save(model.state_dict(), export / contracts.STATE_DICT_FILE)
    (export / contracts.LAYOUT_FILE).write_text(tiny_taxi.layout.to_json())
    examples = raw_examples(str(tiny_taxi.examples_dir), 100, (tiny_taxi.cfg.label.column,))
    dest = root / "model"
    mlflow_model.save_mlflow_model(dest, serving, export, TrainerHParams().to_json(), examples, root / "work")
    return dest, serving, examples, model


def test_the_model_folder_has_a_signature_an_input_example_and_the_three_forms(built, tiny_taxi):
    dest, _serving, _examples, _model = built
    info = mlflow_model.mlflow.models.Model.load(str(dest / "MLmodel"))
    inputs = {c["name"]: c["type"] for c in json.loads(info.signature.to_dict()["inputs"])}
    assert tiny_taxi.cfg.label.column not in inputs
    assert inputs["payment_type"] == "string" and inputs["fare"] == "any" and inputs["trip_seconds"] == "any"
    assert [c["name"] for c in json.loads(info.signature.to_dict()["outputs"])] == ["probabilities"]
    example = json.loads((dest / "serving_input_example.json").read_text())["dataframe_split"]
    assert len(example["data"]) == mlflow_model.INPUT_EXAMPLE_ROWS
    data = dest / "data" / mlflow_model.DATA_FOLDER
    assert {p.name for p in data.iterdir()} == {"serving_model", contracts.ONNX_FILE, "torch", "feature_kinds.json"}
    assert (data / "serving_model" / "saved_model.pb").is_file()
    # No Python travels with the pyfunc: MLflow imports this installed module, nothing is unpickled.
    assert info.flavors["python_function"]["loader_module"] == mlflow_model.__name__
    assert not list(dest.rglob("*.pkl")) and info.flavors["python_function"]["code"] is None


def test_frame_round_trip_keeps_every_value_and_missing_values_stay_missing(built):
    _dest, _serving, examples, _model = built
    kinds = mlflow_model.feature_kinds(examples)
    frame = mlflow_model.frame_from_examples(examples[:20], kinds)
    again = mlflow_model.examples_from_frame(frame, kinds)
    assert [tf.train.Example.FromString(a) for a in again] == [tf.train.Example.FromString(e) for e in examples[:20]]
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['tip_amount'\]"):
        mlflow_model.examples_from_frame(frame.assign(tip_amount=1.0), kinds)


def test_a_frame_s_cells_become_the_values_one_conversion_each_gives_them():
    """int(), float() and str() per cell, as CsvExampleGen's types; None and NaN an empty, typed list."""
    kinds = {"n": mlflow_model.INT64, "x": mlflow_model.FLOAT, "s": mlflow_model.BYTES}
    frame = pd.DataFrame(
        {
            "n": [3, None, 7.0, np.nan],  # pandas makes this a float column: 3.0, NaN, 7.0, NaN
            "x": [0.1, np.nan, 1e300, -2],
            "s": ["a", None, 3, "é"],
        }
    )
    got = [tf.train.Example.FromString(e).features.feature for e in mlflow_model.examples_from_frame(frame, kinds)]
    assert [list(f["n"].int64_list.value) for f in got] == [[3], [], [7], []]
    assert [f["n"].WhichOneof("kind") for f in got] == ["int64_list"] * 4  # missing: typed and empty
    assert [list(f["x"].float_list.value) for f in got] == [[np.float32(0.1)], [], [np.inf], [-2.0]]
    assert [list(f["s"].bytes_list.value) for f in got] == [[b"a"], [], [b"3"], ["é".encode()]]
    assert mlflow_model.examples_from_frame(frame.iloc[:0], kinds) == []


def test_registered_version_loads_by_alias_in_a_fresh_process_and_matches_the_saved_model(built, tmp_path):
    """With MLflow's pickle loading switched off: the pyfunc runs no code stored with the model."""
    dest, serving, examples, _model = built
    registry = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}", "torchtfx-test")
    experiment = registry.client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))
    run_id = registry.client.create_run(experiment).info.run_id
    target = promotion.ServingTarget(tmp_path / "serving", "test", registry)
    promotion.promote(promotion.Candidate(serving, None, run_id, {}, mlflow_model_dir=dest), target)
    kinds = mlflow_model.feature_kinds(examples)
    frame = mlflow_model.frame_from_examples(examples, kinds)
    frame.to_json(tmp_path / "rows.json", orient="split")
    expected = tf.saved_model.load(str(serving)).signatures["serving_default"](examples=tf.constant(examples))
    script = f"""
        import json, os, sys
        import mlflow, pandas as pd
        mlflow.set_registry_uri({registry.tracking_uri!r}); mlflow.set_tracking_uri({registry.tracking_uri!r})
        frame = pd.read_json({str(tmp_path / "rows.json")!r}, orient="split")
        out = mlflow.pyfunc.load_model("models:/torchtfx-test@{CHAMPION}").predict(frame)
        print(json.dumps(out["probabilities"].tolist()))
        print("leaked:", [m for m in ("torch", "onnx2tf") if m in sys.modules])
    """
    env = {**os.environ, "MLFLOW_ALLOW_PICKLE_DESERIALIZATION": "false"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    served = np.array(json.loads(lines[-2]))
    assert served.shape == (len(examples),)
    assert np.max(np.abs(served - expected["probabilities"].numpy())) <= 1e-6
    assert lines[-1] == "leaked: []"  # the pyfunc path is TensorFlow only


def test_the_pytorch_form_reloads_into_the_trained_module(built):
    dest, _serving, _examples, model = built
    reloaded = mlflow_model.load_torch_module(dest)  # the zoo's mlp: installed code, no trust needed
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), reloaded.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


STORED_FACTORY = """
import pathlib

from torch import nn

pathlib.Path({marker!r}).write_text("ran")  # what any stored code could do


class Linear(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.lin = nn.Linear(len(spec.dense_features), 1)

    def forward(self, dense, categorical):
        return self.lin(dense).squeeze(1) + 0 * categorical[:, 0]


def build(spec):
    return Linear(spec)
"""


def test_the_pytorch_form_of_a_file_factory_runs_its_stored_code_only_with_trust_code(built, tmp_path, tiny_taxi):
    """A file factory is carried as source inside hparams.json: load_torch_module ran it without a word."""
    dest = tmp_path / "model"
    shutil.copytree(built[0], dest)
    marker, factory_file = tmp_path / "ran.txt", tmp_path / "factory.py"
    factory_file.write_text(STORED_FACTORY.format(marker=str(marker)))
    hparams = TrainerHParams().replace(model=embed_source(ModelConfig(factory=f"{factory_file}:build")))
    factory_file.unlink()  # the model folder carries the code
    torch_dir = dest / "data" / mlflow_model.DATA_FOLDER / "torch"
    (torch_dir / mlflow_model.HPARAMS_FILE).write_text(hparams.to_json())
    torch.manual_seed(0)
    trained = torch.nn.Linear(len(tiny_taxi.layout.model_spec().dense_features), 1)
    torch.save({f"lin.{k}": v for k, v in trained.state_dict().items()}, torch_dir / contracts.STATE_DICT_FILE)
    with pytest.raises(mlflow_model.UntrustedCodeError, match=r"stored with the model as source code.*trust_code=True"):
        mlflow_model.load_torch_module(dest)
    assert not marker.exists()  # refused before anything ran
    reloaded = mlflow_model.load_torch_module(dest, trust_code=True)
    assert marker.read_text() == "ran" and torch.equal(reloaded.lin.weight, trained.weight)


def test_outputs_frame_keeps_multiclass_rows_as_lists():
    frame = mlflow_model.outputs_frame(
        {"probabilities": np.array([[0.2, 0.8], [0.6, 0.4]], np.float32), "classes": np.array([[b"Cash", b"Card"]] * 2)}
    )
    assert list(frame.columns) == ["classes", "probabilities"]
    assert frame["classes"][0].tolist() == ["Cash", "Card"] and frame["probabilities"][1].tolist() == pytest.approx(
        [0.6, 0.4]
    )
    assert isinstance(frame, pd.DataFrame)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_mlflow_models_serve_answers_invocations_like_the_saved_model(built, tmp_path):
    """`mlflow models serve --env-manager local` on a localhost port, polled for at most 180 s."""
    import os
    import time
    import urllib.request

    dest, serving, examples, _model = built
    port = _free_port()
    venv_bin = os.path.dirname(sys.executable)  # as in an activated venv: mlflow execs `uvicorn` from PATH
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    server = subprocess.Popen(
        [
            os.path.join(venv_bin, "mlflow"),
            "models",
            "serve",
            "-m",
            str(dest),
            "--env-manager",
            "local",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "serve.log", "w"),
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "mlflow models serve never answered /ping"
                time.sleep(1)
        frame = mlflow_model.frame_from_examples(examples[:16], mlflow_model.feature_kinds(examples))
        body = json.dumps({"dataframe_split": json.loads(frame.to_json(orient="split", index=False))}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations", body, {"Content-Type": "application/json"}
        )
        answer = json.loads(urllib.request.urlopen(request, timeout=60).read())
    finally:
        server.terminate()
        server.wait(timeout=30)
    served = np.array([row["probabilities"] for row in answer["predictions"]])
    expected = tf.saved_model.load(str(serving)).signatures["serving_default"](examples=tf.constant(examples[:16]))
    assert np.max(np.abs(served - expected["probabilities"].numpy())) <= 1e-6
