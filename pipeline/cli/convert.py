"""``torchtfx convert model.onnx OUT_DIR``: the converter library's own command, under the project's CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("convert")
@click.argument("onnx_path", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), help=".npz of input arrays by ONNX input name.")
@click.option("--float16", is_flag=True, help="Compute in float16 (float32 in and out).")
@click.option("--tolerance", type=float, default=None, help="Parity limit (default: the converter's, 1e-5).")
def convert_cmd(onnx_path: Path, out_dir: Path, inputs: Path | None, float16: bool, tolerance: float | None) -> None:
    """Translate any ONNX model into a TF SavedModel and print its parity against onnxruntime (random inputs at
    two sizes of every symbolic dimension unless --inputs is given). Exit 1: parity above the tolerance; 2: the
    model does not convert (one line; OUT_DIR is written only once the conversion and the parity check finish)."""
    from torchtfx.components.converter.__main__ import DEFAULT_TOLERANCE, convert_main

    code = convert_main(onnx_path, out_dir, inputs, float16, DEFAULT_TOLERANCE if tolerance is None else tolerance)
    sys.exit(code)
