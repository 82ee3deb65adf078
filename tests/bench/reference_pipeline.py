"""The reference: TFX's own native-Keras Chicago-taxi pipeline from the installed wheel, run unchanged.

``python -m tests.bench.reference_pipeline --root DIR --data-dir DIR --beam-arg=...`` builds the pipeline with
``tfx.examples.chicago_taxi_pipeline.taxi_pipeline_native_keras._create_pipeline`` and runs it with
``LocalDagRunner``. Its module file, ``taxi_utils_native_keras.py``, is copied alone into a folder of its
own: TFX packages the module file's whole folder into a wheel for Transform and Trainer.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

REFERENCE_NAME = "chicago_taxi_native_keras"
MODULE_FILE = "taxi_utils_native_keras.py"


def module_file_copy(root: Path) -> Path:
    from tfx.examples import chicago_taxi_pipeline

    source = Path(chicago_taxi_pipeline.__file__).parent / MODULE_FILE
    target = root / "module" / MODULE_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return target


def run(root: Path, data_dir: Path, beam_args: list[str]) -> None:
    # The example's Keras code is Keras 2 (tf_keras); TF 2.16 defaults to Keras 3 without this.
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    from tfx import v1 as tfx
    from tfx.examples.chicago_taxi_pipeline import taxi_pipeline_native_keras

    pipeline = taxi_pipeline_native_keras._create_pipeline(
        pipeline_name=REFERENCE_NAME,
        pipeline_root=str(root / "tfx"),
        data_root=str(data_dir),
        module_file=str(module_file_copy(root)),
        serving_model_dir=str(root / "serving"),
        metadata_path=str(root / "metadata.sqlite"),
        beam_pipeline_args=beam_args,
    )
    tfx.orchestration.LocalDagRunner().run(pipeline)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--beam-arg", action="append", default=[], help="one Beam pipeline arg (repeatable)")
    args = parser.parse_args(argv)
    run(args.root.resolve(), args.data_dir.resolve(), args.beam_arg)


if __name__ == "__main__":
    main()
