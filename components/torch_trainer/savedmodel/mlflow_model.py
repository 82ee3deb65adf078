"""The MLflow Model that every registered version is: a pyfunc over the served SavedModel, with a signature
and an input example of raw eval rows, carrying the ONNX graph and the PyTorch form beside it.

``mlflow.pyfunc.load_model("models:/<name>@champion").predict(frame)`` takes a pandas DataFrame of raw feature
columns (as in the CSV, no label), turns each row into the tf.Example that TF Serving would get, and runs the
SavedModel's ``serving_default`` (parse + TFT + network): the same graph, so the same numbers.

Loading it runs no Python stored with the model: the pyfunc is this installed module (MLflow's ``loader_module``,
no cloudpickle, so it loads with ``MLFLOW_ALLOW_PICKLE_DESERIALIZATION=false``) over a SavedModel, which is a
graph, not code. Its data (``data/model/``):

- ``serving_model/``: the SavedModel pushed to TF Serving (warmup requests included);
- ``model.onnx``: the exported ONNX graph;
- ``feature_kinds.json``: each raw column's tf.Example type;
- ``torch/``: ``state_dict.pt``, ``layout.json`` and ``hparams.json`` (the model factory, with a file factory's
  source text inside), which :func:`load_torch_module` rebuilds into the trained ``nn.Module``. A file factory's
  source is code from the artifact store: running it takes ``trust_code=True``.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from importlib import metadata
from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pyarrow as pa

from torchtfx.components.shared import contracts
from torchtfx.components.shared.served_interface import EXAMPLES_INPUT, SERVING_SIGNATURE
from torchtfx.data.csv_reader.example_batch import encode_list_columns, list_column

SERVING_ARTIFACT, TORCH_ARTIFACT, KINDS_FILE = "serving_model", "torch", "feature_kinds.json"
DATA_FOLDER = "model"  # the pyfunc's data: <model>/data/model/
HPARAMS_FILE = "hparams.json"
INPUT_EXAMPLE_ROWS = 5
_REQUIREMENTS = ("tensorflow", "tensorflow-transform", "pandas", "numpy", "mlflow")
INT64, FLOAT, BYTES = "int64_list", "float_list", "bytes_list"

logger = logging.getLogger(__name__)


def feature_kinds(examples: list[bytes]) -> dict[str, str]:
    """Each raw column's tf.Example list type, as the eval split holds it."""
    import tensorflow as tf

    kinds: dict[str, str] = {}
    for record in examples:
        for name, feature in tf.train.Example.FromString(record).features.feature.items():
            kind = feature.WhichOneof("kind")
            if kind is not None:
                kinds.setdefault(name, kind)
    return dict(sorted(kinds.items()))


def frame_from_examples(examples: list[bytes], kinds: dict[str, str]) -> pd.DataFrame:
    """Raw tf.Examples as the DataFrame a client sends: numbers as float64 (a missing value is NaN, which an
    integer column could not hold), strings as str (missing: None)."""
    import tensorflow as tf

    rows = []
    for record in examples:
        features = tf.train.Example.FromString(record).features.feature
        row = {}
        for name, kind in kinds.items():
            values = getattr(features[name], kind).value if name in features else []  # ExampleGen: blank -> []
            if kind == BYTES:
                row[name] = values[0].decode() if values else None
            else:
                row[name] = float(values[0]) if values else math.nan
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(kinds))
    return frame.astype({n: "float64" for n, k in kinds.items() if k != BYTES})


def examples_from_frame(frame: pd.DataFrame, kinds: dict[str, str]) -> list[bytes]:
    """The tf.Example of each row, as CsvExampleGen writes it: a missing value (NaN, None) is an empty list.

    Column by column (data/csv_reader/example_batch.py's C++ encoder): building each row's example in Python
    was what limited the pyfunc (13,524 rows/s on taxi, against 37,928 for ``torchtfx predict``)."""
    unknown = sorted(set(frame.columns) - set(kinds))
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}; the model takes {sorted(kinds)}")
    names = [str(name) for name in frame.columns]
    columns = [_list_column(frame[name].tolist(), kinds[name]) for name in names]
    return encode_list_columns(names, columns, len(frame))


_CONVERT = {BYTES: lambda value: str(value).encode(), INT64: int, FLOAT: float}
_ARROW_KIND = {BYTES: pa.large_binary(), INT64: pa.int64(), FLOAT: pa.float64()}


def _list_column(cells: list, kind: str) -> pa.Array:
    """One column's cells (Python values, as pandas gives them) as a list per row; None and NaN: []."""
    present = np.array([not (v is None or (isinstance(v, float) and math.isnan(v))) for v in cells], dtype=bool)
    convert = _CONVERT[kind]
    values = pa.array([convert(v) for v, keep in zip(cells, present, strict=True) if keep], type=_ARROW_KIND[kind])
    return list_column(values.cast(pa.float32()) if kind == FLOAT else values, present)


def outputs_frame(outputs: dict) -> pd.DataFrame:
    """The signature's outputs: a [batch] output is a column, a [batch, K] one a column of lists; bytes as str."""
    columns = {}
    for name, tensor in sorted(outputs.items()):
        values = np.asarray(tensor)
        if values.dtype.kind in "SO":
            values = np.vectorize(lambda b: b.decode() if isinstance(b, bytes) else b, otypes=[object])(values)
        columns[name] = list(values) if values.ndim > 1 else values
    return pd.DataFrame(columns)


def input_schema(kinds: dict[str, str]):
    """Strings as ``string``; numbers as ``any``, because MLflow's schema check refuses an int64 column for a
    ``double`` (a fare of whole dollars read by pandas) and a float64 one, NaN for a missing value, for a ``long``
    (both measured with mlflow 3.17); :func:`examples_from_frame` casts each number to its tf.Example type."""
    from mlflow.types.schema import AnyType, ColSpec, Schema

    return Schema([ColSpec("string" if kind == BYTES else AnyType(), name) for name, kind in kinds.items()])


class ServingSignatureModel:
    """pyfunc flavor: raw feature columns in, the task's outputs (``probabilities``, ``classes``,
    ``predictions``) out, through the SavedModel's ``serving_default``."""

    def __init__(self, data_dir: Path) -> None:
        import tensorflow as tf

        self._saved_model = tf.saved_model.load(str(data_dir / SERVING_ARTIFACT))
        self._kinds = json.loads((data_dir / KINDS_FILE).read_text())

    def predict(self, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        import tensorflow as tf

        examples = examples_from_frame(pd.DataFrame(model_input), self._kinds)
        outputs = self._saved_model.signatures[SERVING_SIGNATURE](**{EXAMPLES_INPUT: tf.constant(examples)})
        return outputs_frame({k: v.numpy() for k, v in outputs.items()})


def _load_pyfunc(data_path: str, model_config=None) -> ServingSignatureModel:
    """MLflow's entry point for ``loader_module`` models: ``data_path`` is ``<model>/data/model``."""
    return ServingSignatureModel(Path(data_path))


def save_mlflow_model(
    dest: Path, serving_dir: Path, export_dir: Path, hparams_json: str, eval_examples: list[bytes], work_dir: Path
) -> None:
    """Write the MLflow Model folder ``dest`` (signature inferred from the real outputs on the input example)."""
    import tensorflow as tf

    kinds = feature_kinds(eval_examples)
    example_rows = eval_examples[:INPUT_EXAMPLE_ROWS]
    signature_fn = tf.saved_model.load(str(serving_dir)).signatures[SERVING_SIGNATURE]
    outputs = signature_fn(**{EXAMPLES_INPUT: tf.constant(example_rows)})
    frame = frame_from_examples(example_rows, kinds)
    output_schema = mlflow.models.infer_signature(outputs_frame({k: v.numpy() for k, v in outputs.items()})).inputs
    signature = mlflow.models.ModelSignature(inputs=input_schema(kinds), outputs=output_schema)
    data_dir = work_dir / DATA_FOLDER
    shutil.copytree(serving_dir, data_dir / SERVING_ARTIFACT)
    (data_dir / TORCH_ARTIFACT).mkdir()
    for name in (contracts.STATE_DICT_FILE, contracts.LAYOUT_FILE):
        shutil.copy2(export_dir / name, data_dir / TORCH_ARTIFACT / name)
    (data_dir / TORCH_ARTIFACT / HPARAMS_FILE).write_text(hparams_json)
    shutil.copy2(export_dir / contracts.ONNX_FILE, data_dir / contracts.ONNX_FILE)
    (data_dir / KINDS_FILE).write_text(json.dumps(kinds, indent=1))
    mlflow.pyfunc.save_model(
        str(dest),
        loader_module=__name__,
        data_path=str(data_dir),
        signature=signature,
        input_example=frame,
        pip_requirements=[f"{name}=={metadata.version(name)}" for name in _REQUIREMENTS],
    )


class UntrustedCodeError(PermissionError):
    """Rebuilding a registered model would run Python stored with it, and the caller did not opt in."""


def _torch_dir(model_path: Path) -> Path:
    """``data/model/torch``; ``artifacts/torch`` in versions registered before the pyfunc became a loader module."""
    current = model_path / "data" / DATA_FOLDER / TORCH_ARTIFACT
    return current if current.is_dir() else model_path / "artifacts" / TORCH_ARTIFACT


def load_torch_module(model_path: str | Path, trust_code: bool = False):
    """The trained PyTorch module from a downloaded MLflow Model folder (``mlflow.artifacts.download_artifacts
    ("models:/<name>@champion")``): the factory in hparams.json rebuilds it, the state dict (weights only) fills it.

    A zoo or installed-package factory runs the code installed here. A file factory travels as its source text
    inside the model: rebuilding runs that text, code from the artifact store, so it takes ``trust_code=True``
    (trust whoever can write to the registry's artifact store); without it, :class:`UntrustedCodeError`."""
    from torchtfx.components.torch_trainer.handoff.hparams import TrainerHParams
    from torchtfx.components.torch_trainer.modeling.features import FeatureLayout
    from torchtfx.components.torch_trainer.savedmodel.trained_model import load_torch_model

    torch_dir = _torch_dir(Path(model_path))
    layout = FeatureLayout.from_json((torch_dir / contracts.LAYOUT_FILE).read_text())
    hparams = TrainerHParams.from_json((torch_dir / HPARAMS_FILE).read_text(), str(torch_dir / HPARAMS_FILE))
    if hparams.model.source is not None:
        if not trust_code:
            raise UntrustedCodeError(
                f"{torch_dir / HPARAMS_FILE}: the model factory {hparams.model.factory!r} is stored with the model as "
                "source code, and rebuilding the module runs it; pass trust_code=True if you trust whoever can write "
                "to this registry's artifact store (the pyfunc, mlflow.pyfunc.load_model, needs no such trust)"
            )
        logger.warning(
            "Running the model factory %s stored with the model in %s (trust_code=True)",
            hparams.model.factory,
            torch_dir,
        )
    return load_torch_model(torch_dir, layout, hparams)
