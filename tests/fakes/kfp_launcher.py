"""Run a compiled Kubeflow pipeline spec locally, the way the KFP v2 driver and launcher would.

What is real: the compiled YAML (both documents), each step's own container command and args from
``deploymentSpec`` with ``{{$}}`` replaced by an ExecutorInput built as the KFP driver builds it, one fresh
process per step (as one pod per step), the executor output file read back and its artifact metadata
passed downstream, and the PlatformSpec's ``secretAsEnv`` turned into environment variables.
As the KFP 2.0-2.3 driver does, downstream input artifacts carry the MLMD id as ``name``, an empty type
(``instanceSchema: ""``) and their metadata plus ``display_name``; output artifacts have no name; an
executor output's artifact ``uri`` overrides the provisioned one and ``null`` metadata is an error.
Backend versions (``backend``, the ``kfp_backend`` setting), each from the backend's sources:
- 2.4+: output URIs carry a random salt, ``<root>/<pipeline>/<run>/<task>/<uuid>/<key>``
  (``backend/src/v2/driver/driver.go:1588@2.4.0``, ``:2046@2.5.0``).
- 2.5+: the driver adds the output ``executor-logs`` typed ``system.Artifact`` (``driver.go:2031@2.5.0``,
  ``publish_logs`` defaults to true, ``cmd/driver/main.go:85@2.5.0``); the launcher tees the step's output
  into it and uploads it whatever the executor output says (``launcher_v2.go:467-488,540-592@2.5.0``).
- 2.5+: a task input's constant ``{{$.pipeline_job_uuid}}`` is replaced by the run's id (``driver.go:1648-1649
  @2.5.0``, ``resolve.go:440-441@2.17.0``); 2.1-2.4 pass it on verbatim.
- 2.15+: every output artifact is named by its key, and ``outputs.outputFile`` is
  ``<local task root>/output_metadata.json`` instead of ``/tmp/kfp_outputs/output_metadata.json``
  (``driver.go:692-724@2.15.0``).
- 2.17: the ``executor-logs`` URI ends in the retry index, ``-0`` (``launcher_v2.go:538-598@2.17.0``).
- 2.15+ multi-user (``namespace`` given): the profile's S3 credentials may write only under
  ``mlpipeline/{artifacts, private-artifacts/<ns>, private/<ns>, shared}/`` (the profile controller's
  policy, ``manifests/kustomize/base/installs/multi-user/pipelines-profile-controller/sync.py:362-373@2.15.0``);
  an upload elsewhere fails the step with AccessDenied, as SeaweedFS answers.
What is simulated: the cluster. As the backend does, the run's pipeline root is the one the run was
created with (what ``torchtfx submit`` sends), never the spec's ``defaultPipelineRoot`` (driver.go at
2.1.0, root_dag.go at 2.14.3); here it is a local folder standing in for the bucket, so artifact URIs are
local ``file://`` URIs (the launcher's download/upload is the identity). Secrets come from a dict, the
container image is this machine's virtualenv (``python`` on PATH), and node selectors, tolerations and
resources are not enforced. There is no KFP cache and no MLMD (the KFP backend keeps its own).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

EXECUTOR_INPUT_PLACEHOLDER = "{{$}}"
LOGS_KEY = "executor-logs"
LOGS_TYPE = {"schemaTitle": "system.Artifact"}  # driver.go:2033@2.5.0: no schemaVersion
LEGACY_OUTPUT_FILE = "/tmp/kfp_outputs/output_metadata.json"  # component.OutputMetadataFilepath before 2.15


def backend_version(backend: str) -> tuple[int, int]:
    major, minor = backend.split(".")
    return int(major), int(minor)


def writable_prefixes(namespace: str) -> tuple[str, ...]:
    """The object keys a profile namespace's credentials may write (sync.py:362-373@2.15.0)."""
    return (
        "mlpipeline/artifacts/",
        f"mlpipeline/private-artifacts/{namespace}/",
        f"mlpipeline/private/{namespace}/",
        "mlpipeline/shared/",
    )


class StepFailedError(RuntimeError):
    pass


@dataclasses.dataclass
class StepResult:
    name: str
    seconds: float
    outputs: dict[str, dict[str, Any]]  # output key -> RuntimeArtifact JSON (uri, type, metadata)
    log: Path


def load_documents(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(yaml.safe_load_all(path.read_text()))
    return docs[0], (docs[1] if len(docs) > 1 else {})


def topological_order(tasks: dict[str, Any]) -> list[str]:
    remaining = {name: set(task.get("dependentTasks", [])) for name, task in tasks.items()}
    order: list[str] = []
    while remaining:
        ready = sorted(name for name, deps in remaining.items() if deps <= set(order))
        if not ready:
            raise ValueError(f"dependency cycle among {sorted(remaining)}")
        order.extend(ready)
        for name in ready:
            del remaining[name]
    return order


def parameter_values(
    task: dict[str, Any], pipeline_params: dict[str, Any], run_id: str, backend: tuple[int, int]
) -> dict[str, Any]:
    """A task's input parameters as the driver resolves them."""
    job = {"{{$.pipeline_job_uuid}}": run_id} if backend >= (2, 5) else {}
    values = {}
    for name, source in task.get("inputs", {}).get("parameters", {}).items():
        if "runtimeValue" in source:
            constant = source["runtimeValue"]["constant"]
            values[name] = job.get(constant, constant) if isinstance(constant, str) else constant
        elif "componentInputParameter" in source:
            values[name] = pipeline_params[source["componentInputParameter"]]
        else:
            raise ValueError(f"unsupported parameter source {source}")
    return values


def _secret_env(platform: dict[str, Any], label: str, secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    executors = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    env = {}
    for ref in executors.get(label, {}).get("secretAsEnv", []):
        for key in ref["keyToEnv"]:
            env[key["envVar"]] = secrets[ref["secretName"]][key["secretKey"]]
    return env


class Launcher:
    """Runs every task of the root DAG in topological order; raises on the first failing step."""

    def __init__(
        self,
        spec_path: Path,
        run_id: str,
        python_bin: Path,
        secrets: dict[str, dict[str, str]],
        pipeline_root: Path,
        *,
        backend: str = "2.3",
        namespace: str | None = None,
        run_root_uri: str | None = None,
    ) -> None:
        """``pipeline_root`` is the local folder standing in for the bucket at ``run_root_uri``, the pipeline
        root the run was created with (what the multi-user policy is checked against)."""
        self.spec, self.platform = load_documents(spec_path)
        self.run_id = run_id
        self.python_bin = python_bin
        self.secrets = secrets
        self.backend = backend_version(backend)
        self.namespace = namespace
        self.bucket_dir = pipeline_root
        self.run_root_uri = run_root_uri
        self.root = pipeline_root / self.spec["pipelineInfo"]["name"] / run_id
        self.results: dict[str, StepResult] = {}
        self._next_id = 1

    def _task_root(self, task_name: str) -> Path:
        salt = [uuid.uuid4().hex] if self.backend >= (2, 4) else []
        return self.root.joinpath(task_name, *salt)

    def _output_artifacts(self, task_root: Path, component: dict[str, Any]) -> dict[str, Any]:
        declared = {
            k: d["artifactType"] for k, d in component.get("outputDefinitions", {}).get("artifacts", {}).items()
        }
        if self.backend >= (2, 5):
            declared[LOGS_KEY] = LOGS_TYPE
        outputs = {}
        for key, kind in declared.items():
            artifact = {"type": kind, "uri": (task_root / key).as_uri(), "metadata": {}}
            if key == LOGS_KEY and self.backend >= (2, 17):
                artifact["uri"] += "-0"  # qualified by retry before the step starts (launcher_v2.go:420@2.17.0)
            if self.backend >= (2, 15):
                artifact["name"] = key  # driver.go:700@2.15.0
            outputs[key] = {"artifacts": [artifact]}
        return outputs

    def _output_file(self, task_root: Path, workdir: Path) -> str:
        if self.backend >= (2, 15):
            return str(task_root / "output_metadata.json")
        return str(workdir / "pod-fs" / LEGACY_OUTPUT_FILE.lstrip("/"))  # the pod's own /tmp

    def _upload(self, executor_input: dict[str, Any], log: Path) -> None:
        """The launcher's uploads after a step: the tee'd log into ``executor-logs``, and each output under
        the multi-user policy when the run is in a profile namespace."""
        outputs = executor_input["outputs"]["artifacts"]
        if LOGS_KEY in outputs:
            target = Path(outputs[LOGS_KEY]["artifacts"][0]["uri"][len("file://") :])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, target)
        if self.namespace is None or self.backend < (2, 15):
            return
        allowed = writable_prefixes(self.namespace)
        for entry in outputs.values():
            local = Path(entry["artifacts"][0]["uri"][len("file://") :])
            key = self._object_key(local)
            if not key.startswith(allowed):
                raise StepFailedError(
                    f"upload of {key} failed: AccessDenied (namespace {self.namespace!r} may write only under "
                    f"{', '.join(allowed)})"
                )

    def _object_key(self, local: Path) -> str:
        """``bucket/key`` of a local stand-in path, from the run's pipeline root URI."""
        root = (self.run_root_uri or "").split("://", 1)[-1].rstrip("/")
        return f"{root}/{local.relative_to(self.bucket_dir).as_posix()}"

    def executor_input(self, task_name: str, task: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        component = self.spec["components"][task["componentRef"]["name"]]
        task_root = self._task_root(task_name)
        artifacts = {}
        for key, source in task.get("inputs", {}).get("artifacts", {}).items():
            producer = source["taskOutputArtifact"]
            published = self.results[producer["producerTask"]].outputs[producer["outputArtifactKey"]]
            artifacts[key] = {"artifacts": [published]}
        return {
            "inputs": {
                "parameterValues": parameter_values(task, params, self.run_id, self.backend),
                "artifacts": artifacts,
            },
            "outputs": {
                "artifacts": self._output_artifacts(task_root, component),
                "outputFile": self._output_file(task_root, self.root / task_name),
            },
        }

    def run_task(self, task_name: str, params: dict[str, Any]) -> StepResult:
        task = self.spec["root"]["dag"]["tasks"][task_name]
        label = self.spec["components"][task["componentRef"]["name"]]["executorLabel"]
        container = self.spec["deploymentSpec"]["executors"][label]["container"]
        executor_input = self.executor_input(task_name, task, params)
        payload = json.dumps(executor_input)
        command = [*container["command"], *(a.replace(EXECUTOR_INPUT_PLACEHOLDER, payload) for a in container["args"])]
        # A pod's environment: the image's python first, nothing inherited that the test process set up.
        env = {k: v for k, v in os.environ.items() if k not in ("TF_USE_LEGACY_KERAS", "MLFLOW_TRACKING_URI")}
        env["PATH"] = f"{self.python_bin}{os.pathsep}{os.environ['PATH']}"
        env.update(_secret_env(self.platform, label, self.secrets))
        workdir = self.root / task_name
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "pod.log"
        started = time.perf_counter()
        with log.open("w") as handle:
            code = subprocess.run(command, cwd=workdir, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - started
        if code != 0:
            tail = "\n".join(log.read_text().splitlines()[-60:])
            raise StepFailedError(f"step {task_name} failed with exit code {code}; log {log}:\n{tail}")
        self._upload(executor_input, log)
        return StepResult(task_name, seconds, self._published(executor_input), log)

    def _published(self, executor_input: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The launcher's view after a step: declared outputs, with the metadata the executor wrote."""
        written = {}
        output_file = Path(executor_input["outputs"]["outputFile"])
        if output_file.exists():
            written = json.loads(output_file.read_text()).get("artifacts", {})
        published = {}
        for key, entry in executor_input["outputs"]["artifacts"].items():
            artifact = dict(entry["artifacts"][0])
            # launcher-managed: 2.17 ignores what the executor writes for it (launcher_v2.go:802-808@2.17.0)
            reported = [] if key == LOGS_KEY else written.get(key, {}).get("artifacts", [])
            metadata = {**artifact.get("metadata", {}), **(reported[0].get("metadata", {}) if reported else {})}
            nulls = sorted(k for k, v in metadata.items() if v is None)
            if nulls:
                raise StepFailedError(f"output '{key}' has null metadata {nulls}: the KFP launcher rejects these")
            uri = reported[0].get("uri") or artifact["uri"] if reported else artifact["uri"]
            # What MLMD hands to the next step: an id as name, no type, metadata + display_name.
            published[key] = {
                "name": str(self._next_id),
                "type": {"instanceSchema": ""},
                "uri": uri,
                "metadata": {**metadata, "display_name": key},
            }
            self._next_id += 1
        return published

    def run(self, params: dict[str, Any]) -> dict[str, StepResult]:
        for task_name in topological_order(self.spec["root"]["dag"]["tasks"]):
            self.results[task_name] = self.run_task(task_name, params)
        return self.results


def venv_bin() -> Path:
    return Path(sys.executable).parent
