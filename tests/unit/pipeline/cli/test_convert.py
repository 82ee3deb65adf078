"""``torchtfx convert``: a model that does not convert exits 2 with one line and writes nothing; parity above
the tolerance stays exit 1 (the SavedModel written)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from tests.unit.components.converter.bad_models import UNCONVERTIBLE, external_model, unconvertible
from torchtfx.pipeline.cli.convert import convert_cmd


def _lines(output: str) -> list[str]:
    """The command's own lines (TensorFlow's C++ start-up lines on stderr are not the command's)."""
    return [line for line in output.splitlines() if line.startswith("error:") or "Traceback" in line]


@pytest.mark.parametrize("kind", sorted(UNCONVERTIBLE))
def test_a_model_that_does_not_convert_exits_2_with_one_line_and_no_out_dir(tmp_path, kind):
    unconvertible(tmp_path / "m.onnx", kind)
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / "m.onnx"), str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert len(_lines(result.output)) == 1 and "Fix: " in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_external_data_through_a_symlink_out_of_the_folder_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "secret.bin").write_bytes(np.array([1.5, 2.5], np.float32).tobytes())
    external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").symlink_to(tmp_path / "secret.bin")
    result = CliRunner().invoke(convert_cmd, [str(tmp_path / "model" / "m.onnx"), str(tmp_path / "out")])
    assert result.exit_code == 2 and _lines(result.output) == [
        line for line in result.output.splitlines() if "outside the model's folder" in line
    ], result.output
    assert not (tmp_path / "out").exists()


def test_parity_above_the_tolerance_exits_1_with_the_savedmodel_written(tmp_path):
    external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").write_bytes(np.array([1.5, 2.5], np.float32).tobytes())
    result = CliRunner().invoke(
        convert_cmd, [str(tmp_path / "model" / "m.onnx"), str(tmp_path / "out"), "--tolerance", "-1"]
    )
    assert result.exit_code == 1 and "above the tolerance" in result.output, result.output
    assert (tmp_path / "out" / "saved_model.pb").is_file()
