"""Multi-node DDP as a PyTorchJob and as a TrainJob, end to end on one machine.

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
from tests.fakes.trainer_api import LocalTrainer
from torchtfx.components.shared import contracts
from torchtfx.components.torch_trainer.cluster.discovery import select_runner
from torchtfx.components.torch_trainer.cluster.job_runner import ClusterJobFailedError
from torchtfx.components.torch_trainer.cluster.multinode import run_on_cluster, staging_for
from torchtfx.components.torch_trainer.cluster.pytorchjob_runner import PyTorchJobFailedError, PyTorchJobRunner
from torchtfx.components.torch_trainer.cluster.pytorchjob_settings import PyTorchJobSettings
from torchtfx.components.torch_trainer.handoff.job import TrainResult


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
        """One process per replica with the environment the operator gives its container: with a Master,
        PET_MASTER_ADDR/PORT and PET_NODE_RANK (kubeflow/trainer pkg/controller.v1/pytorch/envvar.go:66-97, master.go
        :33-61@v1.9.2); with an elasticPolicy, the c10d rendezvous at <name>-worker-0 and PET_NNODES "min:max"
        (envvar.go:106-123, elastic.go:78-168@v1.9.2). 127.0.0.1 stands in for the pod names (no pod DNS here)."""
        name, spec = manifest["metadata"]["name"], manifest["spec"]
        replicas = spec["pytorchReplicaSpecs"]
        kinds = [(kind, i) for kind in ("Master", "Worker") for i in range(replicas.get(kind, {}).get("replicas", 0))]
        port, elastic = _free_port(), spec.get("elasticPolicy")
        self.procs[name] = []
        for kind, index in kinds:
            container = replicas[kind]["template"]["spec"]["containers"][0]
            env = {**os.environ, **{e["name"]: e["value"] for e in container["env"] if "value" in e}}
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the image's python
            env["PET_NPROC_PER_NODE"] = spec["nprocPerNode"]
            if "Master" in replicas:
                rank = index + (1 if kind == "Worker" else 0)
                env.update(PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(port), PET_NODE_RANK=str(rank))
            if elastic:
                env.update(
                    PET_RDZV_ENDPOINT=f"127.0.0.1:{port}",
                    PET_RDZV_BACKEND=elastic["rdzvBackend"],
                    PET_NNODES=f"{elastic['minReplicas']}:{elastic['maxReplicas']}",
                    PET_MAX_RESTARTS=str(elastic["maxRestarts"]),
                )
            else:
                env["PET_NNODES"] = str(len(kinds))
            log = (self.log_dir / f"{name}-{kind}-{index}.log").open("w")
            proc = subprocess.Popen(container["command"], env=env, stdout=log, stderr=subprocess.STDOUT)
            self.procs[name].append((kind, proc))

    def _status(self, name: str) -> dict:
        """Failed when a replica failed; Succeeded when the Master did, or every Worker did, or (elasticPolicy) any
        Worker did (pkg/controller.v1/pytorch/pytorchjob_controller.go:375-417@v1.9.2)."""
        codes = [(kind, proc.poll()) for kind, proc in self.procs[name]]
        failed = [kind for kind, code in codes if code not in (None, 0)]
        done = [kind for kind, code in codes if code == 0]
        elastic = "elasticPolicy" in self.manifests[name]["spec"]
        has_master = any(kind == "Master" for kind, _ in codes)
        succeeded = "Master" in done if has_master else (len(done) == len(codes) or (elastic and bool(done)))
        if failed:
            replicas = {kind: {"failed": failed.count(kind)} for kind in set(failed)}
            message = f"PyTorchJob {name} is failed because {len(failed)} {failed[0]} replica(s) failed."
            kind = "Failed"
        elif succeeded:
            replicas, message, kind = {k: {"succeeded": done.count(k)} for k in set(done)}, "completed", "Succeeded"
        else:
            replicas, message, kind = {k: {"active": 1} for k, _ in codes}, "running", "Running"
        return {
            "conditions": [{"type": kind, "status": "True", "reason": f"PyTorchJob{kind}", "message": message}],
            "replicaStatuses": replicas,
        }

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
    return PyTorchJobSettings(
        image="localhost/torchtfx:test",
        num_nodes=2,
        nproc_per_node=1,
        cpu="1",
        volumes=({"claim_name": "shared", "mount_path": str(tmp_path / "shared")},),
        poll_seconds=0.5,
        timeout_seconds=600,
    )


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
    logs = sorted(tmp_path.glob("torchtfx-train-test-*.log"))
    assert [p.name.rsplit("-", 2)[-2] for p in logs] == ["Worker", "Worker"]  # no Master: no init-pytorch
    assert any("epoch 3/3" in p.read_text() for p in logs)  # rank 0, on whichever pod the rendezvous chose


def test_failed_replica_raises_and_keeps_the_staging_folder(tmp_path, tiny_taxi, operator):
    _, runner = operator
    job = helpers.tiny_train_job(tmp_path / "local", tiny_taxi, num_workers=1)
    settings = _settings(tmp_path)
    staging = staging_for(settings, "torchtfx-train-broken")
    staging.root.mkdir(parents=True)  # no arrays staged: every replica fails on start
    with pytest.raises(PyTorchJobFailedError, match="Failed"):
        run_on_cluster(settings, job, staging, "torchtfx-train-broken", runner)
    assert staging.job_file.is_file()  # kept for diagnosis


# ------------------------------------------------------------- TrainJob (Kubeflow Trainer v2)


@pytest.fixture
def trainer(tmp_path):
    """Fake API server + Trainer v2 controller (tests/fakes/trainer_api.py): real local node processes."""
    state = LocalTrainer(tmp_path, served=("trainjobs", "pytorchjobs"))
    with http_server(state.handle) as url:
        api = client.ApiClient(client.Configuration(host=url))
        yield state, client.CustomObjectsApi(api), client.CoreV1Api(api)
        api.close()
    for name in list(state.procs):
        state.stop(name)


def test_two_node_trainjob_trains_and_brings_outputs_back(tmp_path, tiny_taxi, trainer):
    """Real: discovery over HTTP picks the TrainJob (both APIs served), the TrainJob manifest, the runner, two node
    processes with the torch-distributed runtime's PET_* environment, torchrun rendezvous, gloo DDP, the copy back.
    Simulated: the API server and the Trainer/JobSet controllers (tests/fakes/trainer_api.py)."""
    state, api, core = trainer
    job = helpers.tiny_train_job(tmp_path / "local", tiny_taxi, num_workers=1)
    settings = _settings(tmp_path)
    runner = select_runner(settings, api, core)
    assert runner.kind.kind == "TrainJob"
    staging = staging_for(settings, "torchtfx-train-tj")
    staging.root.mkdir(parents=True)
    os.rename(job.data_dir, staging.data_dir)
    run_on_cluster(settings, job, staging, "torchtfx-train-tj", runner)
    result = TrainResult.load(Path(job.run_dir) / contracts.RESULT_FILE)
    assert result.world_size == 2 and result.epochs_run == 3  # 2 nodes x 1 process, one DDP group
    assert (Path(job.model_dir) / contracts.ONNX_FILE).is_file()
    assert not staging.root.exists() and not state.jobs and not state.procs  # removed and deleted
    assert "epoch 3/3" in (tmp_path / "torchtfx-train-tj-node-0-0.log").read_text()


def test_failed_trainjob_node_raises_with_its_log_tail(tmp_path, tiny_taxi, trainer):
    """No arrays staged: every node fails on start; the error carries the Failed condition and a node's log tail
    (read through the real client from the fake's pod list and pod log), and the TrainJob is deleted."""
    state, api, core = trainer
    job = helpers.tiny_train_job(tmp_path / "local", tiny_taxi, num_workers=1)
    settings = _settings(tmp_path)
    staging = staging_for(settings, "torchtfx-train-tj-broken")
    staging.root.mkdir(parents=True)
    with pytest.raises(ClusterJobFailedError) as err:
        run_on_cluster(settings, job, staging, "torchtfx-train-tj-broken", select_runner(settings, api, core))
    text = str(err.value)
    assert "TrainJob" in text and "Failed=FailedJobs" in text and "node: " in text
    assert "--- node pod torchtfx-train-tj-broken-node-0-" in text and "log tail:" in text
    assert staging.job_file.is_file() and not state.jobs
