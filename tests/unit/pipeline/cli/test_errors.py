"""Which errors the command line shows as the user's message (no traceback): every stage's deliberate stop, as
one base class, and the converter library's error by name."""

from __future__ import annotations

import importlib

import click
import pytest

from torchtfx.components.stage_failure import StageFailure
from torchtfx.pipeline.cli.errors import LIBRARY_FAILURES, UNEXPECTED_HINT, is_stage_failure, reports_errors

# Every stage's own error: a rename or a lost base class fails here, not in a user's run.
STAGE_ERRORS = {
    "torchtfx.components.data_gate.anomalies": "DataValidationError",
    "torchtfx.components.data_gate.label_classes": "LabelClassesError",
    "torchtfx.components.champion.resolve": "ChampionError",
    "torchtfx.components.torch_trainer.handoff.errors": "TrainingFailedError",
    "torchtfx.components.torch_trainer.cluster.job_runner": "ClusterJobFailedError",
    "torchtfx.components.torch_trainer.torch_to_onnx.onnx_export": "ExportError",
    "torchtfx.components.torch_trainer.modeling.features": "LabelClassesError",
    "torchtfx.components.torch_trainer.savedmodel.parity": "ParityError",
    "torchtfx.components.tf_serving.errors": "ServingChangeError",
    "torchtfx.components.tf_serving.model_server": "ModelServerError",
    "torchtfx.pipeline.kfp.submit": "SubmitError",
}


def _error_class(module: str, name: str) -> type[BaseException]:
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, Exception), f"{module}.{name}"
    return cls


@pytest.mark.parametrize(("module", "name"), sorted(STAGE_ERRORS.items()))
def test_every_stage_error_is_a_stage_failure_and_a_runtime_error(module, name):
    cls = _error_class(module, name)
    assert issubclass(cls, StageFailure) and issubclass(cls, RuntimeError)
    assert is_stage_failure(cls("the message"))


@pytest.mark.parametrize(("module", "name"), LIBRARY_FAILURES)
def test_the_converter_s_error_is_named_and_recognized(module, name):
    cls = _error_class(module, name)
    assert not issubclass(cls, StageFailure)  # the converter imports nothing of ours
    assert is_stage_failure(cls("onnx2tf failed"))


def test_an_error_of_no_stage_is_not_a_stage_failure():
    assert not is_stage_failure(RuntimeError("boom")) and not is_stage_failure(ValueError("x"))


def _command(err: Exception):
    @click.command()
    @reports_errors(stage_prefix="run stopped: ")
    def command() -> None:
        raise err

    return command


def test_a_stage_failure_shows_its_message_with_the_prefix_and_no_traceback():
    from click.testing import CliRunner

    result = CliRunner().invoke(_command(_error_class(*next(iter(STAGE_ERRORS.items())))("3 anomalies: fix the data")))
    assert result.exit_code == 1
    assert "run stopped: 3 anomalies: fix the data" in result.output and "Traceback" not in result.output


def test_anything_else_says_it_may_be_a_bug_and_how_to_see_the_traceback():
    from click.testing import CliRunner

    result = CliRunner().invoke(_command(KeyError("probabilities")))
    assert result.exit_code == 1
    assert "unexpected KeyError: 'probabilities'" in result.output and UNEXPECTED_HINT.split(":")[0] in result.output
