"""Container entry point of every step on Kubeflow Pipelines: TFX 1.16's own v2 entry point
(``kubeflow_v2_run_executor``) with the fixes the open-source KFP v2 launcher needs.

TFX 1.16 writes its v2 entry point for Vertex AI Pipelines, where artifact URIs are ``gs://`` paths that
TensorFlow reads directly and a pre-cache-check hook runs ExampleGen's driver. The open-source KFP
launcher differs in three ways, each fixed here before TFX's code runs:

1. **Artifact URIs.** The launcher downloads each input artifact to a local path and uploads each output
   from a local path after the step: ``gs://b/x`` <-> ``/gcs/b/x``, ``s3://b/x`` <-> ``/s3/b/x``,
   ``minio://b/x`` <-> ``/minio/b/x``. TFX would read and write the remote URI instead (and ``minio://``
   is not a scheme TensorFlow knows), so outputs would never be uploaded. The executor therefore gets the
   local paths, and the executor output file gets the original URIs back. ``gs://`` stays remote for
   TFX's own executors: TensorFlow writes it directly, and Dataflow workers could not see local paths.
   ``file://`` URIs (local runs of the spec) become plain paths, as our executors' ``pathlib`` code expects.
2. **ExampleGen's driver.** ``lifecycle.preCacheCheck`` is a Vertex feature; without the driver, span,
   version and the input fingerprint are never computed. File-based ExampleGen steps run it first, and its
   output artifact's properties are merged into the executor's, as Vertex does.
3. **Input artifact types.** The driver hands downstream artifacts over with an empty type
   (``instanceSchema: ""``, tfx#7768), from which TFX cannot pick the artifact class. The step's own inputs
   spec (``--json_serialized_inputs_spec_args``, compiled in) has the types; they are filled in from it.
4. **Absent optional artifacts.** A KFP output artifact always exists, so an executor cannot publish
   "nothing" (ChampionModel on the very first run). Such an artifact carries ``ABSENT_PROPERTY`` and is
   removed from downstream inputs, which is what TFX's local orchestrator does with an empty channel.
5. **Outputs the backend adds itself.** From KFP 2.5 the driver adds an ``executor-logs`` output, typed
   ``system.Artifact``, to every step's ExecutorInput while ``publish_logs`` is on (the default: driver
   flag ``cmd/driver/main.go:85@2.5.0``, ``:102@2.17.0``; the API server's ``PUBLISH_LOGS=true`` in
   ``ml-pipeline-apiserver-deployment.yaml:24@2.5.0``); the key is added in ``driver.go:2031@2.5.0``
   (``:678@2.15.0``, ``:761@2.17.0``). TFX 1.16 imports a class for every output's schema title
   (``kubeflow_v2_entrypoint_utils.py:279-283``, so does ExampleGen's driver, ``driver.py:66-68``) and
   ``system.Artifact`` is no module: every step would stop with ``ImportError`` before any work. Outputs
   whose type is not a ``tfx.*`` type are left out of what TFX parses and therefore out of the executor
   output it writes; the launcher uploads them from its own ExecutorInput (it tees the step's output into
   the log file and walks the input's outputs, ``launcher_v2.go:467-488,540-592@2.5.0``; 2.17 ignores what
   an executor writes for ``executor-logs``, ``:802-808@2.17.0``).

From KFP 2.15 ``outputs.outputFile`` lies in the task's folder of the launcher's local mount
(``/minio/<root>/<pipeline>/<run>/<task>/<uuid>/output_metadata.json``, ``driver.go:692-724@2.15.0``),
not ``/tmp/kfp_outputs``; it is already a local path and goes through ``local_path`` unchanged.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from torchtfx.components.shared.absent import ABSENT_PROPERTY
from torchtfx.components.shared.artifact_uris import REMOTE_URIS_ENV
from torchtfx.components.shared.run_identity import ORCHESTRATOR_ENV
from torchtfx.pipeline.kfp.beam_workers import beam_worker_args

logger = logging.getLogger(__name__)

# Remote scheme -> local mount prefix of the KFP v2 launcher (backend/src/v2/objectstore).
LAUNCHER_PREFIXES = {"gs://": "/gcs/", "s3://": "/s3/", "minio://": "/minio/", "file://": "/"}
# Our executors that read and write artifacts with pathlib/shutil (local paths only).
PATHLIB_EXECUTORS = (
    "torchtfx.components.champion.",
    "torchtfx.components.data_gate.",
    "torchtfx.components.torch_trainer.",
    "torchtfx.components.promoter.",
)
# TFX's first-party artifact types (compiler_utils.TITLE_TO_CLASS_PATH), the only titles its v2 entry point
# can turn into classes; everything this project compiles has one.
TFX_TITLE_PREFIX = "tfx."
FILE_BASED_EXAMPLE_GEN_EXECUTORS = (
    "torchtfx.components.csv_input.executor.Executor",
    "tfx.components.example_gen.csv_example_gen.executor.Executor",
    "tfx.components.example_gen.import_example_gen.executor.Executor",
)


def local_path(uri: str, keep_gcs: bool = False) -> str:
    """The path where the KFP launcher materializes ``uri`` inside the container; ``keep_gcs`` leaves
    ``gs://`` URIs as they are (TensorFlow reads them, and so do Dataflow workers, which have no /gcs)."""
    for scheme, prefix in LAUNCHER_PREFIXES.items():
        if uri.startswith(scheme) and not (keep_gcs and scheme == "gs://"):
            return prefix + uri[len(scheme) :].lstrip("/")
    return uri


def _artifacts(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for entry in section.get("artifacts", {}).values() for a in entry.get("artifacts", [])]


def _is_absent(artifact: dict[str, Any]) -> bool:
    return bool((artifact.get("metadata") or {}).get(ABSENT_PROPERTY))


def artifact_title(artifact: dict[str, Any]) -> str:
    """The schema title of a RuntimeArtifact's type, as TFX's ``_retrieve_class_path`` reads it."""
    kind = artifact.get("type") or {}
    if kind.get("schemaTitle"):
        return str(kind["schemaTitle"])
    schema = kind.get("instanceSchema") or ""
    for line in schema.splitlines():
        if line.startswith("title:"):
            return line.split(":", 1)[1].strip()
    return ""


def set_aside_foreign_outputs(executor_input: dict[str, Any]) -> list[str]:
    """Fix 5: remove the outputs that are not TFX artifacts (the backend's ``executor-logs``) from what TFX
    will parse; returns their keys. The launcher keeps its own copy and uploads them itself."""
    outputs = executor_input.get("outputs", {}).get("artifacts", {})
    foreign = sorted(
        key
        for key, entry in outputs.items()
        if any(not artifact_title(a).startswith(TFX_TITLE_PREFIX) for a in entry.get("artifacts", []))
    )
    for key in foreign:
        del outputs[key]
    if foreign:
        logger.info("Outputs %s are the KFP backend's own (not TFX artifacts): left to its launcher", foreign)
    return foreign


def fill_input_types(executor_input: dict[str, Any], inputs_spec: dict[str, Any]) -> None:
    """Fix 3: give each input artifact without a type the type its input definition declares."""
    declared = inputs_spec.get("artifacts", {})
    for key, entry in executor_input.get("inputs", {}).get("artifacts", {}).items():
        for artifact in entry.get("artifacts", []):
            kind = artifact.get("type") or {}
            if not (kind.get("schemaTitle") or kind.get("instanceSchema")) and key in declared:
                artifact["type"] = declared[key]["artifactType"]


def localize(executor_input: dict[str, Any], keep_gcs: bool = False) -> dict[str, str]:
    """Rewrite ``executor_input`` in place (fixes 1 and 4); returns local path -> original URI."""
    for key, entry in executor_input.get("inputs", {}).get("artifacts", {}).items():
        kept = [a for a in entry.get("artifacts", []) if not _is_absent(a)]
        if len(kept) != len(entry.get("artifacts", [])):
            logger.info("Input '%s' is an absent optional artifact: the step runs without it", key)
        entry["artifacts"] = kept
    originals = {}
    for section in ("inputs", "outputs"):
        for artifact in _artifacts(executor_input.get(section, {})):
            uri = artifact.get("uri", "")
            artifact["uri"] = local_path(uri, keep_gcs)
            originals[artifact["uri"]] = uri
    outputs = executor_input.setdefault("outputs", {})
    if outputs.get("outputFile"):
        outputs["outputFile"] = local_path(outputs["outputFile"])
    return originals


def restore_uris(output_file: Path, originals: dict[str, str]) -> None:
    """Put the launcher's URIs back into the ExecutorOutput the step wrote (fix 1)."""
    if not output_file.exists():
        return
    payload = json.loads(output_file.read_text())
    for entry in payload.get("artifacts", {}).values():
        for artifact in entry.get("artifacts", []):
            artifact["uri"] = originals.get(artifact.get("uri", ""), artifact.get("uri", ""))
            metadata = artifact.get("metadata", {})
            for key, value in metadata.items():  # e.g. the blessing's current_model
                if isinstance(value, str) and value in originals:
                    metadata[key] = originals[value]
    output_file.write_text(json.dumps(payload, indent=2, sort_keys=True))


def merge_driver_output(executor_input: dict[str, Any], output_file: Path) -> None:
    """Fix 2: the driver's output artifacts carry span, version and fingerprint; hand them to the executor."""
    written = json.loads(output_file.read_text()).get("artifacts", {})
    for key, entry in executor_input["outputs"]["artifacts"].items():
        reported = written.get(key, {}).get("artifacts", [])
        for artifact, driven in zip(entry.get("artifacts", []), reported, strict=False):
            artifact.setdefault("metadata", {}).update(driven.get("metadata", {}))


def _run_example_gen_driver(args: Any, executor_input_json: str) -> None:
    """Fix 2: compute span, version and fingerprint, as the Vertex pre-cache-check hook would."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.file_based_example_gen import driver

    executor_input = pipeline_spec_pb2.ExecutorInput()
    json_format.Parse(executor_input_json, executor_input, ignore_unknown_fields=True)
    inputs_spec = None
    if getattr(args, "json_serialized_inputs_spec_args", None):
        inputs_spec = pipeline_spec_pb2.ComponentInputsSpec()
        json_format.Parse(args.json_serialized_inputs_spec_args, inputs_spec, ignore_unknown_fields=True)
    driver._run_driver(executor_input, inputs_spec)


def main(parsed: tuple[Any, list[str]]) -> None:
    """Apply the fixes, then hand over to TFX's entry point with the same (args, beam_args)."""
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    args, beam_args = parsed
    beam_args = beam_worker_args(beam_args)  # the DirectRunner's workers from this pod's CPUs, not the node's
    os.environ[ORCHESTRATOR_ENV] = "kubeflow"
    executor_input = json.loads(args.json_serialized_invocation_args)
    set_aside_foreign_outputs(executor_input)
    fill_input_types(executor_input, json.loads(getattr(args, "json_serialized_inputs_spec_args", None) or "{}"))
    # TFX's executors use tf.io.gfile and read gs:// directly (on a Dataflow runner they must); ours that use
    # pathlib need the launcher's local paths for every scheme.
    originals = localize(executor_input, keep_gcs=not args.executor_class_path.startswith(PATHLIB_EXECUTORS))
    os.environ[REMOTE_URIS_ENV] = json.dumps(originals)  # for what executors record for later runs
    args.json_serialized_invocation_args = json.dumps(executor_input)
    output_file = Path(executor_input["outputs"]["outputFile"])
    output_file.parent.mkdir(parents=True, exist_ok=True)
    if args.executor_class_path in FILE_BASED_EXAMPLE_GEN_EXECUTORS and not output_file.exists():
        _run_example_gen_driver(args, args.json_serialized_invocation_args)
        merge_driver_output(executor_input, output_file)
        args.json_serialized_invocation_args = json.dumps(executor_input)
    kubeflow_v2_run_executor.main((args, beam_args))
    restore_uris(output_file, originals)


if __name__ == "__main__":
    # TFT and onnx2tf build tf_keras (Keras 2) models; TF 2.16 would otherwise hand out Keras 3.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    # The same flags as TFX's entry point: --executor_class_path, --json_serialized_invocation_args,
    # --json_serialized_inputs_spec_args; everything else is a Beam arg.
    app.run(main, flags_parser=kubeflow_v2_run_executor._parse_flags)
