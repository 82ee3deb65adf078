"""Run a compiled Kubeflow pipeline spec locally, the way the KFP v2 driver and launcher would.

What is real: the compiled YAML (both documents), each step's own container command and args from
``deploymentSpec`` with ``{{$}}`` replaced by an ExecutorInput built as the KFP driver builds it, one fresh
process per step (as one pod per step), the executor output file read back and its artifact metadata
passed downstream, and the PlatformSpec's ``secretAsEnv`` turned into environment variables.
As the KFP 2.0-2.3 driver does, downstream input artifacts carry the MLMD id as ``name``, an empty type
(``instanceSchema: ""``) and their metadata plus ``display_name``; output artifacts have no name; an
executor output's artifact ``uri`` overrides the provisioned one and ``null`` metadata is an error.
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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

EXECUTOR_INPUT_PLACEHOLDER = "{{$}}"


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


def _parameter_values(task: dict[str, Any], pipeline_params: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for name, source in task.get("inputs", {}).get("parameters", {}).items():
        if "runtimeValue" in source:
            values[name] = source["runtimeValue"]["constant"]
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
        self, spec_path: Path, run_id: str, python_bin: Path, secrets: dict[str, dict[str, str]], pipeline_root: Path
    ) -> None:
        self.spec, self.platform = load_documents(spec_path)
        self.run_id = run_id
        self.python_bin = python_bin
        self.secrets = secrets
        self.root = pipeline_root / self.spec["pipelineInfo"]["name"] / run_id
        self.results: dict[str, StepResult] = {}
        self._next_id = 1

    def _output_artifacts(self, task_name: str, component: dict[str, Any]) -> dict[str, Any]:
        outputs = {}
        for key, definition in component.get("outputDefinitions", {}).get("artifacts", {}).items():
            uri = (self.root / task_name / key).as_uri()  # <root>/<pipeline>/<run>/<task>/<key>, as KFP does
            outputs[key] = {"artifacts": [{"type": definition["artifactType"], "uri": uri, "metadata": {}}]}
        return outputs

    def executor_input(self, task_name: str, task: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        component = self.spec["components"][task["componentRef"]["name"]]
        artifacts = {}
        for key, source in task.get("inputs", {}).get("artifacts", {}).items():
            producer = source["taskOutputArtifact"]
            published = self.results[producer["producerTask"]].outputs[producer["outputArtifactKey"]]
            artifacts[key] = {"artifacts": [published]}
        return {
            "inputs": {"parameterValues": _parameter_values(task, params), "artifacts": artifacts},
            "outputs": {
                "artifacts": self._output_artifacts(task_name, component),
                "outputFile": str(self.root / task_name / "executor_output.json"),
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
            reported = written.get(key, {}).get("artifacts", [])
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
