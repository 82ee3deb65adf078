"""Multi-node DDP as a PyTorchJob, end to end on one machine.

Real: the manifest from ``build_manifest``, the runner's create/poll/delete through the real kubernetes
client over HTTP, each replica's container command run as a real process with the PET_* environment the
Kubeflow Training Operator gives it, torch's elastic launcher rendezvous between the two "nodes", gloo DDP,
the staging folder on the "shared volume" (a temporary folder) and the copy back into the artifacts.
Simulated (no Kubernetes API server or Training Operator can run on these machines): the API server and the
operator, a fake that starts one local process per replica instead of a pod and reports their exit codes
as PyTorchJob conditions.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from kubernetes import client

from tests import helpers
from tests.fakes.http_server import http_server
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.multinode import run_on_cluster, staging_for
from torchtfx.components.torch_trainer.cluster.pytorchjob_runner import PyTorchJobFailedError, PyTorchJobRunner
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.worker.job import TrainResult


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalOperator:
    """Runs each PyTorchJob replica as a local process, as the Training Operator runs pods."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, list[tuple[str, subprocess.Popen]]] = {}
        self.manifests: dict[str, dict] = {}

    def _start(self, manifest: dict) -> None:
        name, spec = manifest["metadata"]["name"], manifest["spec"]
        counts = {kind: spec["pytorchReplicaSpecs"].get(kind, {}).get("replicas", 0) for kind in ("Master", "Worker")}
        replicas = [kind for kind, count in counts.items() for _ in range(count)]
        port = _free_port()
        self.procs[name] = []
        for node_rank, kind in enumerate(replicas):
            container = spec["pytorchReplicaSpecs"][kind]["template"]["spec"]["containers"][0]
            env = {**os.environ, **{e["name"]: e["value"] for e in container["env"] if "value" in e}}
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the image's python
            env.update(
                PET_NNODES=str(len(replicas)),
                PET_NPROC_PER_NODE=spec["nprocPerNode"],
                PET_NODE_RANK=str(node_rank),
                PET_MASTER_ADDR="127.0.0.1",
                PET_MASTER_PORT=str(port),
            )
            log = (self.log_dir / f"{name}-{kind}-{node_rank}.log").open("w")
            proc = subprocess.Popen(container["command"], env=env, stdout=log, stderr=subprocess.STDOUT)
            self.procs[name].append((kind, proc))

    def _status(self, name: str) -> dict:
        codes = [(kind, proc.poll()) for kind, proc in self.procs[name]]
        failed = [kind for kind, code in codes if code not in (None, 0)]
        if failed:
            replicas = {kind: {"failed": failed.count(kind)} for kind in set(failed)}
            message = f"PyTorchJob {name} is failed because {len(failed)} {failed[0]} replica(s) failed."
            kind = "Failed"
        elif all(code == 0 for _, code in codes):
            replicas, message, kind = {k: {"succeeded": 1} for k, _ in codes}, "completed", "Succeeded"
        else:
            replicas, message, kind = {k: {"active": 1} for k, _ in codes}, "running", "Running"
        return {"conditions": [{"type": kind, "status": "True", "reason": f"PyTorchJob{kind}", "message": message}],
                "replicaStatuses": replicas}  # fmt: skip

    def handle(self, method: str, url: str, body: bytes, headers: dict) -> tuple[int, dict]:
        path = urllib.parse.urlsplit(url).path
        name = path.rsplit("/", 1)[-1]
        if path.endswith("/pytorchjobs") and method == "POST":
            manifest = json.loads(body)
            self.manifests[manifest["metadata"]["name"]] = manifest
            self._start(manifest)
            return 201, manifest
        if "/pytorchjobs/" in path and method == "GET":
            return 200, {**self.manifests[name], "status": self._status(name)}
        if "/pytorchjobs/" in path and method == "DELETE":
            for _, proc in self.procs.pop(name, []):
                proc.kill()
                proc.wait()
            return 200, {"kind": "Status", "status": "Success"}
        return 404, {"kind": "Status", "code": 404}


@pytest.fixture
def operator(tmp_path):
    state = LocalOperator(tmp_path)
    with http_server(state.handle) as url:
        api = client.ApiClient(client.Configuration(host=url))
        yield state, PyTorchJobRunner(client.CustomObjectsApi(api))
        api.close()


def _settings(tmp_path: Path) -> PyTorchJobSettings:
    return PyTorchJobSettings(image="localhost/torchtfx:test", num_nodes=2, nproc_per_node=1, cpu="1",
                              volumes=({"claim_name": "shared", "mount_path": str(tmp_path / "shared")},),
                              poll_seconds=0.5, timeout_seconds=600)  # fmt: skip


def test_two_node_pytorchjob_trains_and_brings_outputs_back(tmp_path, tiny_taxi, operator):
    state, runner = operator
    job = helpers.tiny_train_job(tmp_path / "local", tiny_taxi, num_workers=1)
    settings = _settings(tmp_path)
    staging = staging_for(settings, "torchtfx-train-test")
    staging.root.mkdir(parents=True)
    os.rename(job.data_dir, staging.data_dir)  # the Trainer step materializes straight into the staging folder
    run_on_cluster(settings, job, staging, "torchtfx-train-test", runner)
    result = TrainResult.load(Path(job.run_dir) / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.epochs_run == 3  # 2 nodes x 1 process, one DDP group
    assert (Path(job.model_dir) / contracts.ONNX_FILE).is_file()
    assert (Path(job.model_dir) / contracts.STATE_DICT_FILE).is_file()
    assert not staging.root.exists()  # removed after success
    assert not state.procs  # the job was deleted
    master_log = next(tmp_path.glob("*-Master-0.log")).read_text()
    assert "epoch 3/3" in master_log


def test_failed_replica_raises_and_keeps_the_staging_folder(tmp_path, tiny_taxi, operator):
    _, runner = operator
    job = helpers.tiny_train_job(tmp_path / "local", tiny_taxi, num_workers=1)
    settings = _settings(tmp_path)
    staging = staging_for(settings, "torchtfx-train-broken")
    staging.root.mkdir(parents=True)  # no arrays staged: every replica fails on start
    with pytest.raises(PyTorchJobFailedError, match="Failed"):
        run_on_cluster(settings, job, staging, "torchtfx-train-broken", runner)
    assert staging.job_file.is_file()  # kept for diagnosis
