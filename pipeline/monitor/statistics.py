"""TFDV statistics of a monitoring window's requests, over the model's input columns only: a request carries no
label, and a column the model does not read is not served."""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from torchtfx.data.config.dataset import DatasetConfig
from torchtfx.pipeline.monitor.requests import RequestFiles


def serving_schema(dataset: DatasetConfig) -> schema_pb2.Schema:
    """The curated schema, less the columns the model does not read (the label's among them)."""
    import tensorflow_data_validation as tfdv

    schema = tfdv.load_schema_text(str(dataset.schema_path))
    inputs = set(dataset.raw_feature_columns)
    kept = [feature for feature in schema.feature if feature.name in inputs]
    del schema.feature[:]
    schema.feature.extend(kept)
    return schema


def served_statistics(
    files: RequestFiles, dataset: DatasetConfig, schema: schema_pb2.Schema, output_path: str
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """The statistics of every request in ``files`` (CSV rows checked and encoded as ExampleGen does), written to
    ``output_path`` as StatisticsGen writes them."""
    import apache_beam as beam
    import tensorflow_data_validation as tfdv
    from apache_beam.options.pipeline_options import PipelineOptions
    from tfx_bsl.public import tfxio

    from torchtfx.data.csv_reader.decode import CsvPartToExamples
    from torchtfx.pipeline.predict.source import check_source

    source = check_source(list(files.csvs), dataset, ()) if files.csvs else None
    with beam.Pipeline(options=PipelineOptions(["--direct_running_mode=in_memory"])) as pipeline:
        inputs = [
            pipeline | f"ReadLog[{i}]" >> beam.io.ReadFromTFRecord(path)  # gzip by its .gz suffix
            for i, path in enumerate(files.tfrecords)
        ]
        if source is not None:
            encode = CsvPartToExamples(source.schema_types, source.empty, source.missing_values)
            inputs.append(pipeline | "CsvParts" >> beam.Create(source.parts([])) | "CsvRows" >> beam.ParDo(encode))
        records = tuple(inputs) | "Requests" >> beam.Flatten()
        decoded = records | "Decode" >> tfxio.TFExampleBeamRecord("tfrecord", schema=schema).BeamSource()
        _ = (
            decoded
            | "Statistics" >> tfdv.GenerateStatistics(tfdv.StatsOptions(schema=schema))
            | "Write" >> tfdv.WriteStatisticsToBinaryFile(output_path)
        )
    return tfdv.load_stats_binary(output_path)
