"""``torchtfx predict`` end to end. Everything that can refuse the request does so before the Beam work and
before anything is written: the output (it must not exist), the input files (ExampleGen's checks: a malformed
line is named by file and line), the served model (resolved, verified, and run on the first rows, which also
gives the output columns). Then the Beam pipeline scores every row into a staging folder, and only a run whose
``rows_scored`` metric equals the checked row count publishes it at ``--out``."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import time

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from torchtfx.components.champion.public import Champion
from torchtfx.components.promoter.public import ServingTarget
from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.data.csv_reader.columns import ColumnPlan
from torchtfx.data.csv_reader.decode import chunk_examples, open_input
from torchtfx.data.csv_reader.parts import CsvPart, part_records
from torchtfx.pipeline.predict import inference
from torchtfx.pipeline.predict.errors import PredictError
from torchtfx.pipeline.predict.outputs import OutputPlan
from torchtfx.pipeline.predict.served import describe, served_model
from torchtfx.pipeline.predict.source import CheckedSource, check_source, input_files
from torchtfx.pipeline.predict.writer import CSV, OutputTarget
from torchtfx.pipeline.settings.beam_args import (
    BEAM_MODE_AUTO,
    direct_runner_args,
    with_dependency,
    worker_dependency_flag,
)

logger = logging.getLogger(__name__)

PROBE_ROWS = 8  # rows the model scores before the Beam work, to check it and learn its outputs


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    data: str  # a folder, a file or a glob (local or a Beam filesystem URI)
    out: str
    dataset: DatasetConfig
    target: ServingTarget  # the serving directory and the registry that resolve the model
    alias: str
    version: int | None = None  # a registry version; wins over alias
    fmt: str | None = None  # csv or parquet; None: from --out's suffix, else csv
    keys: tuple[str, ...] = ()
    beam_mode: str = BEAM_MODE_AUTO
    beam_workers: int = 2
    beam_args: tuple[str, ...] = ()  # the user's own (--runner=..., --project=...), passed as they are


@dataclasses.dataclass(frozen=True)
class PredictSummary:
    rows: int
    files: int
    out: str  # --out, absolute where local
    written: list[str]  # --out itself, or its shards
    model: Champion
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def beam_args_for(request: PredictRequest, input_bytes: int) -> list[str]:
    """The user's Beam args; with no DirectRunner mode among them, the pipeline's choice for this much input; with
    a remote runner, how its workers get torchtfx (unless the user's args say)."""
    names = {arg.split("=", 1)[0] for arg in request.beam_args}
    direct = (
        []
        if "--direct_running_mode" in names
        else direct_runner_args(request.beam_mode, request.beam_workers, input_bytes)
    )
    args = [*direct, *request.beam_args]
    runner = PipelineOptions(list(request.beam_args)).view_as(StandardOptions).runner
    return with_dependency(args, worker_dependency_flag()) if runner and "direct" not in runner.lower() else args


def probe(source: CheckedSource, part: CsvPart, model: Champion) -> dict:
    """``serving_default`` on the first rows of ``part``, in this process: a model that cannot score these rows
    fails here, by name, before any Beam work."""
    import tensorflow as tf

    plan = ColumnPlan(list(part.header), source.schema_types, source.empty, source.missing_values)
    with contextlib.closing(part_records(part, open_input(part.path))) as rows:  # closes the file after these
        examples = chunk_examples(part, plan, list(itertools.islice(rows, PROBE_ROWS)))
    try:
        return inference.call_signature(inference.load_served(str(model.saved_model_dir)), examples)
    except (tf.errors.OpError, ValueError, TypeError) as err:
        message = getattr(err, "message", str(err)).strip().splitlines()[0]
        raise PredictError(
            f"{describe(model)} cannot score the rows of {part.path}: its serving_default failed on the first "
            f"{len(examples)} rows ({message}). Nothing was written. Is --dataset the dataset it was trained on?"
        ) from None


def _scored_count(result: beam.runners.runner.PipelineResult) -> int:
    query = MetricsFilter().with_namespace(inference.METRICS_NAMESPACE).with_name(inference.ROWS_SCORED)
    counters = result.metrics().query(query)["counters"]
    return sum(c.committed if c.committed is not None else c.attempted for c in counters)


def _score(request: PredictRequest, source: CheckedSource, model: Champion, output: OutputTarget) -> list[str]:
    beam_args = beam_args_for(request, source.size)
    parts = source.parts(beam_args)
    held = inference.load_served(str(model.saved_model_dir))  # an in-process Beam worker scores with this one
    plan = OutputPlan.from_probe(request.keys, request.dataset.task, probe(source, parts[0], model))
    logger.info(
        "Scoring %s rows of %s file(s) with %s into %s",
        f"{source.rows:,}",
        len(source.paths),
        describe(model),
        output.out,
    )
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    tokens = sum(text.max_length for text in request.dataset.text.values())
    rows = inference.scored_rows(pipeline, parts, source, str(model.saved_model_dir), plan, output.fmt == CSV, tokens)
    _ = rows | "Write" >> output.sink(plan)
    result = pipeline.run()
    result.wait_until_finish()
    del held
    scored = _scored_count(result)
    if scored != source.rows:
        raise PredictError(
            f"the Beam run scored {scored:,} rows where the checks counted {source.rows:,}; nothing was written "
            "(did an input file change during the run?)"
        )
    return output.publish(plan)


def predict(request: PredictRequest) -> PredictSummary:
    """Score ``request.data`` into ``request.out`` (see the module's docstring)."""
    output = OutputTarget.for_out(request.out, request.fmt)
    paths = input_files(request.data)
    source = check_source(paths, request.dataset, request.keys)
    model = served_model(request.target, request.alias, request.version)
    start = time.monotonic()
    with output.claimed():
        try:
            written = _score(request, source, model, output)
        except BaseException:
            output.discard()
            raise
    return PredictSummary(source.rows, len(paths), output.out, written, model, time.monotonic() - start)
