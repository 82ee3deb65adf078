"""TFX's CsvExampleGen with the checking executor; the component id stays TFX's ``CsvExampleGen``."""

from __future__ import annotations

from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2

from torchtfx.components.csv_input import executor
from torchtfx.components.shared.contracts import EXAMPLE_GEN_ID


def checked_csv_example_gen(input_base: str, output_config: example_gen_pb2.Output) -> FileBasedExampleGen:
    component = FileBasedExampleGen(
        input_base=input_base,
        output_config=output_config,
        custom_executor_spec=executor_spec.BeamExecutorSpec(executor.Executor),
    )
    return component.with_id(EXAMPLE_GEN_ID)
