"""batching_parameters.txt: the BatchingParameters message built here matches the upstream proto and round-trips."""

from __future__ import annotations

import re

from torchtfx.components.tf_serving import batching
from torchtfx.components.tf_serving.batching import BatchingParams

# tensorflow_serving/servables/tensorflow/session_bundle_config.proto (tensorflow/serving 2.16.1), the message the
# pip package does not ship, as published:
UPSTREAM_BATCHING_PARAMETERS = """
  google.protobuf.Int64Value max_batch_size = 1;
  google.protobuf.Int64Value batch_timeout_micros = 2;
  google.protobuf.Int64Value max_enqueued_batches = 3;
  google.protobuf.Int64Value num_batch_threads = 4;
  google.protobuf.StringValue thread_pool_name = 5;
  repeated int64 allowed_batch_sizes = 6;
  bool pad_variable_length_inputs = 7;
  google.protobuf.BoolValue enable_large_batch_splitting = 8;
  google.protobuf.Int64Value max_execution_batch_size = 9;
"""


def test_batching_parameters_match_the_upstream_proto_and_round_trip(tmp_path):
    descriptor = batching.batching_message_class().DESCRIPTOR
    assert descriptor.full_name == "tensorflow.serving.BatchingParameters"
    fields = {f.name: (f.number, f.message_type.full_name if f.message_type else f.type) for f in descriptor.fields}
    for kind, name, number in re.findall(r"(\S+) (\w+) = (\d+);", UPSTREAM_BATCHING_PARAMETERS):
        expected = kind if kind.startswith("google.") else fields[name][1]
        assert fields[name] == (int(number), expected), name
    assert len(fields) == len(re.findall(r" = \d+;", UPSTREAM_BATCHING_PARAMETERS))
    batching.write_batching(tmp_path, BatchingParams(max_batch_size=64, num_batch_threads=2))
    read = batching.read_batching(tmp_path)
    assert (read.max_batch_size.value, read.num_batch_threads.value, read.batch_timeout_micros.value) == (64, 2, 2000)
