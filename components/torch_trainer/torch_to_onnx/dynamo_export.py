"""The ``torch.export`` (dynamo) ONNX exporter, in a process of its own, where the legacy exporter fails.

The dynamo exporter needs onnxscript and onnx-ir, and onnx-ir needs ml_dtypes >= 0.5 (``float8_e8m0fnu``), while
TF 2.16 pins ml_dtypes ~= 0.3: measured, onnxscript 0.4.0 with onnx-ir 0.1.9 (the last without the >= 0.5 pin)
still fails to import on ml_dtypes 0.3.2 (``AttributeError: module 'ml_dtypes' has no attribute
'float8_e8m0fnu'``). So those three packages live in a folder of their own (``make`` installs
``requirements-dynamo.txt`` into ``<venv>/dynamo-exporter`` with ``pip --target``), and only a child process that
imports torch and never TensorFlow puts it first on its path. The child rebuilds the model from the same factory
and hyperparameters the Trainer used and loads the trained weights with ``torch.load(weights_only=True)``: no
pickled module crosses the process boundary. A failure is reported as the child's root exception and the user's
source line (:func:`child_failure`): torch's own last line is only "(Refer to the full stack trace above ...)".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import torch
from torch import nn

from torchtfx.components.shared.served_interface import prediction_output
from torchtfx.components.torch_trainer.modeling.features import CATEGORICAL_INPUT, DENSE_INPUT
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec
from torchtfx.data.config.model import ModelConfig

logger = logging.getLogger(__name__)

DYNAMO_OPSET = 18  # the dynamo exporter's lowest
PACKAGES_ENV = "TORCHTFX_DYNAMO_PACKAGES"  # overrides the folder of the exporter's own packages
_TIMEOUT_SECONDS = 900


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """What rebuilds the trained network in another process: the factory, its spec and the head's settings."""

    config: ModelConfig
    spec: ModelSpec
    task: str
    log1p_target: bool = False


class DynamoExportError(RuntimeError):
    """The dynamo exporter is not installed, or it failed too."""


def packages_dir() -> Path:
    return Path(os.environ.get(PACKAGES_ENV) or Path(sys.prefix) / "dynamo-exporter")


def available() -> bool:
    return (packages_dir() / "onnxscript").is_dir()


def export_with_dynamo(recipe: ModelRecipe, model: nn.Module, trace_batch: int, path: Path) -> None:
    """Export ``model`` (``recipe``'s network, trained) to ``path`` with the dynamo exporter, batch dynamic."""
    if not available():
        raise DynamoExportError(
            f"the dynamo exporter's packages are not installed in {packages_dir()} (make venv "
            f"installs them; or set {PACKAGES_ENV})"
        )
    with tempfile.TemporaryDirectory() as tmp:
        weights, request = Path(tmp) / "weights.pt", Path(tmp) / "request.json"
        torch.save(model.state_dict(), weights)
        request.write_text(
            json.dumps(
                {
                    "config": recipe.config.model_dump(),
                    "spec": dataclasses.asdict(recipe.spec),
                    "task": recipe.task,
                    "log1p_target": recipe.log1p_target,
                    "weights": str(weights),
                    "out": str(path),
                    "batch": trace_batch,
                }
            )
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(packages_dir()), *sys.path]))}
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(request)],
            capture_output=True,
            text=True,
            env=env,
            timeout=_TIMEOUT_SECONDS,
        )
    if done.returncode != 0:
        raise DynamoExportError(child_failure(done.stderr, done.returncode))
    logger.info("Exported with the dynamo exporter (torch.export, opset %s) in its own process", DYNAMO_OPSET)


_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)$')
_EXCEPTION = re.compile(r"^(?P<name>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*): (?P<message>.*)$")
_LIBRARIES = (
    f"{os.sep}site-packages{os.sep}",
    f"{os.sep}dist-packages{os.sep}",
    f"{os.sep}torch{os.sep}",
    sysconfig.get_paths()["stdlib"],
)
# What torch.export cannot trace, by its root exception's name: the usual cause, in the model's terms.
_CAUSES = {
    "GuardOnDataDependentSymNode": "a size or a branch computed from tensor values (e.g. one_hot without "
    "num_classes, int(x.max()), an if on a tensor): give it a fixed size, such as one_hot(ids, num_classes=n)",
}


def child_failure(stderr: str, returncode: int) -> str:
    """The child's real error from its stderr: the root exception (the first of a chained traceback; torch
    wraps it in ``TorchExportError`` and ends with "(Refer to the full stack trace above ...)") and the deepest
    frame of the user's code, outside torch and the standard library."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)), None)
    if start is None:
        told = [line for line in lines if line.strip() and not line.startswith("(Refer to")]
        return told[-1][:400] if told else f"exit code {returncode}"
    frames, error = [], None
    for index in range(start + 1, len(lines)):
        frame = _FRAME.match(lines[index])
        if frame:
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            frames.append((frame["file"], frame["line"], frame["function"], code))
        elif not lines[index].startswith(" ") and (error := _EXCEPTION.match(lines[index])):
            break
    name = error["name"].rsplit(".", 1)[-1] if error else "an error"
    what = f"{name}: {error['message'].strip()[:300]}" if error else f"exit code {returncode}"
    user = [f for f in frames if not any(part in f[0] for part in _LIBRARIES) and not f[0].endswith(_THIS_FILE)]
    where = f" at {user[-1][0]}:{user[-1][1]} in {user[-1][2]}: `{user[-1][3]}`" if user else ""
    cause = f" Likely cause: {_CAUSES[name]}." if name in _CAUSES else ""
    return f"{what}{where}.{cause}"


_THIS_FILE = f"{os.sep}{Path(__file__).name}"


def _child(request_path: str) -> None:
    """The child process: rebuild, load the weights, export with dynamo=True."""
    from torchtfx.components.torch_trainer.modeling.factory import build_model, check_inputs
    from torchtfx.components.torch_trainer.modeling.heads import ExportHead

    request = json.loads(Path(request_path).read_text())
    spec = ModelSpec.from_dict(request["spec"])
    model = build_model(ModelConfig.parse(request["config"], request_path, written_by_torchtfx=True), spec)
    model.load_state_dict(torch.load(request["weights"], weights_only=True))
    head = ExportHead(model, request["task"], request["log1p_target"]).eval()
    batch = torch.export.Dim("batch")
    lengths = [{0: batch, 1: torch.export.Dim(f"{s.name}_length", max=s.max_length)} for s in spec.sequences]
    names = [DENSE_INPUT, CATEGORICAL_INPUT, *(s.name for s in spec.sequences)]
    program = torch.onnx.export(
        head,
        check_inputs(spec, request["batch"]),
        input_names=names,
        output_names=[prediction_output(head.task)],
        dynamic_shapes=({0: batch}, {0: batch}, *lengths),
        opset_version=DYNAMO_OPSET,
        dynamo=True,
        verbose=False,
    )
    program.save(request["out"])


if __name__ == "__main__":
    _child(sys.argv[1])
