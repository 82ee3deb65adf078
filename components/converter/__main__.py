"""``python -m torchtfx.components.converter convert model.onnx OUT_DIR`` and ``... conformance``: the converter's
own command line, which needs nothing of the pipeline (``torchtfx convert`` is the same command)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Parity at or below this (relative where |onnxruntime| > 1) passes: float32 math reordered by another runtime.
DEFAULT_TOLERANCE = 1e-5


def convert_main(onnx_path: Path, out_dir: Path, inputs: Path | None, float16: bool, tolerance: float) -> int:
    """Convert, print the report; 0 when parity holds, 1 when it does not (the SavedModel is written), 2 in one
    line when the model does not convert (nothing is written)."""
    import numpy as np

    from torchtfx.components.converter.savedmodel import convert
    from torchtfx.components.converter.translator import ConversionError

    if not onnx_path.is_file():
        print(f"error: {onnx_path} is not a file; name the ONNX model to convert", file=sys.stderr)
        return 2
    try:
        feeds = dict(np.load(inputs)) if inputs else None
    except (OSError, ValueError) as err:
        print(
            f"error: --inputs {inputs} is not a readable .npz ({err}); write it with numpy.savez, one array per "
            "ONNX input name",
            file=sys.stderr,
        )
        return 2
    try:
        report = convert(onnx_path, out_dir, feeds, float16=float16)
    except ConversionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.describe())
    tolerance = max(tolerance, 1e-2) if float16 else tolerance
    if report.max_rel_diff > tolerance:
        print(f"parity {report.max_rel_diff:.3g} is above the tolerance {tolerance:g}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(prog="python -m torchtfx.components.converter")
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="ONNX file -> TF SavedModel, with its parity against onnxruntime")
    convert.add_argument("onnx_path", type=Path)
    convert.add_argument("out_dir", type=Path)
    convert.add_argument("--inputs", type=Path, help=".npz of input arrays by ONNX input name (default: random)")
    convert.add_argument("--float16", action="store_true", help="compute in float16 (float32 in and out)")
    convert.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    commands.add_parser("conformance", help="ONNX's backend tests through the translator", add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.command == "conformance":
        from torchtfx.components.converter.conformance import main as conformance_main

        return conformance_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return convert_main(args.onnx_path, args.out_dir, args.inputs, args.float16, args.tolerance)


if __name__ == "__main__":
    sys.exit(main())
