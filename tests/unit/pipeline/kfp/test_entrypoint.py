"""The container entry point's fixes for the open-source KFP v2 launcher, on executor inputs shaped as the
KFP 2.0-2.17 drivers write them (pure functions; the full chain runs in tests/e2e/test_kfp_emulation.py)."""

from __future__ import annotations

import json

import pytest

from torchtfx.components.shared.absent import ABSENT_PROPERTY
from torchtfx.pipeline.kfp.entrypoint import (
    fill_input_types,
    local_path,
    localize,
    restore_uris,
    set_aside_foreign_outputs,
)

EXAMPLES_TYPE = {"instanceSchema": "title: tfx.Examples\ntype: object\n"}


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("gs://bucket/root/run/Transform/graph", "/gcs/bucket/root/run/Transform/graph"),
        ("s3://bucket/a", "/s3/bucket/a"),
        ("minio://mlpipeline/v2/artifacts/x", "/minio/mlpipeline/v2/artifacts/x"),
        ("file:///tmp/root/x", "/tmp/root/x"),
        ("/mnt/torchtfx/root/x", "/mnt/torchtfx/root/x"),
    ],
)
def test_local_path_follows_the_launcher_mounts(uri, path):
    assert local_path(uri) == path


def test_gcs_stays_remote_for_tfx_executors_that_read_it_directly():
    assert local_path("gs://bucket/x", keep_gcs=True) == "gs://bucket/x"
    assert local_path("minio://bucket/x", keep_gcs=True) == "/minio/bucket/x"  # TensorFlow has no minio://


def _executor_input() -> dict:
    return {
        "inputs": {
            "artifacts": {
                "examples": {
                    "artifacts": [
                        {
                            "name": "7",
                            "type": {"instanceSchema": ""},
                            "uri": "minio://b/ex",
                            "metadata": {"split_names": '["train"]'},
                        }
                    ]
                },
                "baseline_model": {
                    "artifacts": [
                        {
                            "name": "8",
                            "type": {"instanceSchema": ""},
                            "uri": "minio://b/c",
                            "metadata": {ABSENT_PROPERTY: 1.0},
                        }
                    ]
                },
            },
            "parameterValues": {"eval_config": "{}"},
        },
        "outputs": {
            "artifacts": {"blessing": {"artifacts": [{"type": EXAMPLES_TYPE, "uri": "minio://b/out", "metadata": {}}]}},
            "outputFile": "/tmp/kfp_outputs/output_metadata.json",
        },
    }


def test_localize_maps_uris_and_drops_absent_artifacts():
    executor_input = _executor_input()
    originals = localize(executor_input)
    artifacts = executor_input["inputs"]["artifacts"]
    assert artifacts["examples"]["artifacts"][0]["uri"] == "/minio/b/ex"
    assert artifacts["baseline_model"]["artifacts"] == []  # ChampionModel had nothing: run as without a baseline
    assert executor_input["outputs"]["artifacts"]["blessing"]["artifacts"][0]["uri"] == "/minio/b/out"
    assert originals == {"/minio/b/ex": "minio://b/ex", "/minio/b/out": "minio://b/out"}


def test_empty_input_types_are_filled_from_the_compiled_inputs_spec():
    executor_input = _executor_input()
    fill_input_types(executor_input, {"artifacts": {"examples": {"artifactType": EXAMPLES_TYPE}}})
    assert executor_input["inputs"]["artifacts"]["examples"]["artifacts"][0]["type"] == EXAMPLES_TYPE


def test_restore_uris_gives_the_launcher_its_uris_back(tmp_path):
    output = tmp_path / "output_metadata.json"
    output.write_text(
        json.dumps(
            {
                "artifacts": {
                    "blessing": {
                        "artifacts": [
                            {"uri": "/minio/b/out", "metadata": {"current_model": "/minio/b/model", "blessed": 1}}
                        ]
                    }
                }
            }
        )
    )
    restore_uris(output, {"/minio/b/out": "minio://b/out", "/minio/b/model": "minio://b/model"})
    artifact = json.loads(output.read_text())["artifacts"]["blessing"]["artifacts"][0]
    assert artifact["uri"] == "minio://b/out"
    assert artifact["metadata"] == {"current_model": "minio://b/model", "blessed": 1}


def _with_backend_logs(executor_input: dict) -> dict:
    """The output the KFP 2.5+ driver adds to every step (driver.go:2031@2.5.0; named from 2.15)."""
    logs = {"name": "executor-logs", "type": {"schemaTitle": "system.Artifact"}, "uri": "minio://b/t/u/executor-logs"}
    executor_input["outputs"]["artifacts"]["executor-logs"] = {"artifacts": [logs]}
    return executor_input


def _parse_outputs_as_tfx_does(executor_input: dict) -> dict:
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    proto = pipeline_spec_pb2.ExecutorInput()
    json_format.Parse(json.dumps(executor_input), proto, ignore_unknown_fields=True)
    return kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(proto.outputs.artifacts, {})


def test_tfx_cannot_parse_the_kfp_2_5_executor_logs_output():
    with pytest.raises(ImportError, match=r"system\.Artifact"):
        _parse_outputs_as_tfx_does(_with_backend_logs(_executor_input()))


def test_outputs_that_are_not_tfx_artifacts_are_left_to_the_launcher():
    executor_input = _with_backend_logs(_executor_input())
    assert set_aside_foreign_outputs(executor_input) == ["executor-logs"]
    assert list(executor_input["outputs"]["artifacts"]) == ["blessing"]
    parsed = _parse_outputs_as_tfx_does(executor_input)
    assert [type(a).__name__ for a in parsed["blessing"]] == ["Examples"]
    assert set_aside_foreign_outputs(_executor_input()) == []  # 2.1-2.4: nothing to set aside
