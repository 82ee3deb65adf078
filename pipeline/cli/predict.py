"""``torchtfx predict``: batch scoring of CSV files with a served model (pipeline/predict/)."""

from __future__ import annotations

import click

from torchtfx.pipeline.cli.errors import reports_errors
from torchtfx.pipeline.cli.options import checked_direct_runner, direct_runner_options
from torchtfx.pipeline.cli.setting_options import declared_option

FORMATS = ("csv", "parquet")  # pipeline/predict/writer.py's, here without importing Beam


@click.command("predict")
@click.option(
    "--data",
    required=True,
    metavar="DIR_OR_GLOB",
    help="CSV files to score: a folder (its *.csv), a file, or a quoted glob; local or gs://, s3://.",
)
@click.option(
    "--out",
    required=True,
    metavar="PATH",
    help="Where to write: a .csv or .parquet file, or a folder of shards (one per Beam writer). Must not "
    "exist; written only once every row is scored.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="Format of a folder --out [default: csv; a file --out: its suffix].",
)
@declared_option(
    "dataset",
    "dataset",
    help="The dataset the model was trained on (name or YAML): its schema and missing values read the CSV.",
)
@declared_option("pipeline_root", "pipeline_root")
@declared_option("serving_dir", "serving_dir")
@click.option("--alias", default="champion", show_default=True, help="The registry alias of the model to score with.")
@click.option(
    "--version",
    "registry_version",
    type=click.IntRange(min=1),
    help="Score with this registry version instead (as `torchtfx promote --version`); it must be served.",
)
@click.option(
    "--key-column",
    "keys",
    multiple=True,
    metavar="COLUMN",
    help="An input column to write beside the scores, to join them back (repeatable) "
    "[default: source_file and source_line].",
)
@click.option(
    "--beam-arg",
    "beam_args",
    multiple=True,
    metavar="ARG",
    help="A Beam pipeline option, passed as is (repeatable): --beam-arg=--runner=DataflowRunner.",
)
@direct_runner_options
@reports_errors(stage_prefix="predict failed: ")
def predict_cmd(
    data,
    out,
    fmt,
    dataset,
    pipeline_root,
    serving_dir,
    alias,
    registry_version,
    keys,
    beam_mode,
    beam_workers,
    beam_args,
) -> None:
    """Score CSV files with the served model (the champion by default) on Beam, through its serving_default
    signature; the input is checked as ExampleGen checks it, and a bad line stops the command before anything
    is written."""
    from torchtfx.pipeline.cli.promotion import local_settings, serving_target
    from torchtfx.pipeline.predict.run import PredictRequest, predict
    from torchtfx.pipeline.predict.served import describe

    checked_direct_runner(beam_mode, beam_workers)  # before anything is read or created
    settings = local_settings(dataset, pipeline_root, serving_dir)
    request = PredictRequest(
        data=data,
        out=out,
        dataset=settings.dataset,
        target=serving_target(settings),
        alias=alias,
        version=registry_version,
        fmt=fmt,
        keys=tuple(keys),
        beam_mode=beam_mode,
        beam_workers=beam_workers,
        beam_args=tuple(beam_args),
    )
    summary = predict(request)
    shards = len(summary.written)
    where = summary.out if summary.written == [summary.out] else f"{summary.out} ({shards} shard{'s' * (shards > 1)})"
    click.echo(
        f"Scored {summary.rows:,} rows of {summary.files} file(s) with {describe(summary.model)} in "
        f"{summary.seconds:.1f} s ({summary.rows_per_second:,.0f} rows/s): {where}"
    )
