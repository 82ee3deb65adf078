"""PyTorchJob path: manifest structure against the kubernetes client's own models, settings validation, and the
runner against a fake Kubernetes API server (a real HTTP server in a thread, spoken to by the real client)."""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from kubernetes import client

from tests.fakes.http_server import http_server
from torchtfx.components.torch_trainer.cluster import job_runner
from torchtfx.components.torch_trainer.cluster import pytorchjob_manifest as manifests
from torchtfx.components.torch_trainer.cluster import pytorchjob_runner as runners
from torchtfx.components.torch_trainer.cluster import pytorchjob_settings as job_settings

NS, NAME = "kubeflow", "taxi-train-0123456789"
LOGGER = job_runner.__name__  # the shared runner logs for both job kinds


def settings(**overrides) -> job_settings.PyTorchJobSettings:
    base = dict(
        namespace=NS,
        image="registry.example/torchtfx:1.0",
        num_nodes=2,
        nproc_per_node=4,
        gpus_per_node=4,
        cpu="16",
        node_selector={"nvidia.com/gpu.product": "H100"},
        tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
        volumes=({"claim_name": "pipeline-root", "mount_path": "/mnt/pipeline"},),
        env_from_secrets=({"secret": "mlflow", "key": "password", "env": "MLFLOW_TRACKING_PASSWORD"},),
        service_account="trainer",
        image_pull_secrets=("registry-pull",),
    )
    base.update(overrides)
    return job_settings.PyTorchJobSettings(**base)


def manifest(**overrides) -> dict:
    command = manifests.worker_command("/mnt/pipeline/job.json", 0, "/mnt/pipeline/run/fatal_error.txt")
    return manifests.build_manifest(settings(**overrides), NAME, command, {"app": "torchtfx"})


# ---------------------------------------------------------------- manifest


def _templates(m: dict) -> dict[str, dict]:
    return {rtype: spec["template"] for rtype, spec in m["spec"]["pytorchReplicaSpecs"].items()}


def _assert_pod_template(template: dict) -> None:
    spec = template["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "H100"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["serviceAccountName"] == "trainer"
    assert {"name": "data-0", "persistentVolumeClaim": {"claimName": "pipeline-root"}} in spec["volumes"]
    (container,) = spec["containers"]
    assert container["name"] == "pytorch"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["imagePullSecrets"] == [{"name": "registry-pull"}]
    assert container["command"][:3] == ["python", "-m", "torch.distributed.run"]
    assert container["resources"]["limits"] == {"cpu": "16", "memory": "16Gi", "nvidia.com/gpu": "4"}
    assert container["resources"]["requests"] == {"cpu": "16", "memory": "16Gi"}
    assert {"name": "data-0", "mountPath": "/mnt/pipeline"} in container["volumeMounts"]
    env = {e["name"]: e for e in container["env"]}
    assert env["OMP_NUM_THREADS"]["value"] == "4"
    assert env["MLFLOW_TRACKING_PASSWORD"] == {
        "name": "MLFLOW_TRACKING_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "mlflow", "key": "password"}},
    }
    assert all("value" not in e for e in container["env"] if "valueFrom" in e)


def test_static_manifest_runs_every_node_as_worker():
    """Real build_manifest output for 2 nodes x 4 GPUs; checked against the PyTorchJob v1 rules (nothing simulated).
    No Master, so the operator adds no init-pytorch container (test_pod_security.py): a fixed-size elasticPolicy."""
    m = manifest()
    assert (m["apiVersion"], m["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert m["metadata"] == {"name": NAME, "namespace": "kubeflow", "labels": {"app": "torchtfx"}}
    replicas = m["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Worker": 2}
    assert {v["restartPolicy"] for v in replicas.values()} == {"OnFailure"}
    assert m["spec"]["nprocPerNode"] == "4"
    assert m["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 2, "rdzvBackend": "c10d", "maxRestarts": 3}
    run_policy = m["spec"]["runPolicy"]
    assert run_policy["backoffLimit"] == 3 and run_policy["activeDeadlineSeconds"] == 24 * 3600
    assert run_policy["cleanPodPolicy"] == "None"
    for template in _templates(m).values():
        _assert_pod_template(template)
    text = json.dumps(m).lower().replace("secretkeyref", "").replace("imagepullsecrets", "")
    assert "secret" not in text  # no literal secret material


def test_elastic_manifest_runs_every_node_as_worker():
    """Real build_manifest output with an elastic policy: the operator's rendezvous host is <name>-worker-0 and
    min/maxReplicas bound the Worker count, so all nodes are Workers (nothing simulated)."""
    m = manifest(elastic_min_nodes=2, elastic_max_nodes=4, max_restarts=2)
    replicas = m["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Worker": 2}
    assert m["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": 2}
    _assert_pod_template(replicas["Worker"]["template"])


@pytest.mark.parametrize("elastic", [False, True])
def test_pod_templates_survive_the_kubernetes_models(elastic):
    """Real kubernetes client models: each pod template deserializes into V1PodTemplateSpec and serializes back
    unchanged, so no field is misspelled or dropped. Only the HTTP response wrapper is a stand-in."""
    m = manifest(**({"elastic_min_nodes": 2, "elastic_max_nodes": 2} if elastic else {}))
    api = client.ApiClient()
    for template in _templates(m).values():
        model = api.deserialize(SimpleNamespace(data=json.dumps(template)), "V1PodTemplateSpec")
        assert isinstance(model, client.V1PodTemplateSpec)
        assert model.spec.containers[0].resources.limits["nvidia.com/gpu"] == "4"
        assert api.sanitize_for_serialization(model) == template


def test_namespace_defaults_to_the_pods_own(tmp_path, monkeypatch):
    """Unset, the job goes where the creating pod runs (the KFP run's namespace, where its PVC and secrets are on
    multi-user Kubeflow): the service account's namespace file, else the kubeconfig's current context, else
    ``default``. Real build_manifest and kubernetes kubeconfig parsing; the files are stand-ins for a pod's."""
    namespace_file = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(manifests, "SERVICE_ACCOUNT_NAMESPACE", namespace_file)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent-kubeconfig"))
    assert job_settings.PyTorchJobSettings(image="img:1", num_nodes=2).namespace is None
    assert manifest(namespace=None)["metadata"]["namespace"] == "default"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "lab",
                "contexts": [{"name": "lab", "context": {"cluster": "c", "user": "u", "namespace": "team-b"}}],
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert manifest(namespace=None)["metadata"]["namespace"] == "team-b"
    namespace_file.parent.mkdir()
    namespace_file.write_text("team-a")  # as Kubernetes mounts it: no newline
    assert manifest(namespace=None)["metadata"]["namespace"] == "team-a"
    assert manifest(namespace="training")["metadata"]["namespace"] == "training"


def test_job_name_is_a_short_dns_label():
    """Real job_name on awkward inputs (nothing simulated)."""
    names = [manifests.job_name(p, "run-1") for p in ("Taxi_Trainer.v2", "0day", "x" * 200, "--")]
    for name in names:
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 48, name
    assert manifests.job_name("taxi", "run-1") != manifests.job_name("taxi", "run-2")
    assert manifests.job_name("taxi", "run-1") == manifests.job_name("taxi", "run-1")


def test_worker_command_matches_the_local_entry_point():
    """Real worker_command (nothing simulated)."""
    assert manifests.worker_command("/mnt/job.json", 3, "/mnt/run/fatal_error.txt") == [
        "python",
        "-m",
        "torch.distributed.run",
        "--max-restarts=3",
        "-m",
        "torchtfx.components.torch_trainer.cluster.lifeline",
        "--unless-exists",
        "/mnt/run/fatal_error.txt",
        "python",
        "-u",
        "-m",
        "torchtfx.components.torch_trainer.worker.train",
        "--job",
        "/mnt/job.json",
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_nodes": 1}, "num_nodes must be >= 2"),
        ({"nproc_per_node": 0}, "nproc_per_node must be >= 1"),
        ({"gpus_per_node": -1}, "gpus_per_node must be >= 0"),
        ({"image": " "}, "image must be a non-empty"),
        ({"namespace": "Kube_Flow"}, "is not a DNS-1123 label"),
        ({"cpu": "lots"}, "not a positive Kubernetes CPU quantity"),
        ({"elastic_min_nodes": 2}, "must be set together"),
        ({"elastic_min_nodes": 3, "elastic_max_nodes": 2}, "1 <= min <= max"),
        ({"elastic_min_nodes": 0, "elastic_max_nodes": 2}, "1 <= min <= max"),
        ({"elastic_min_nodes": 3, "elastic_max_nodes": 4}, "must lie within elastic"),
        ({"volumes": ({"claim_name": "c", "mount_path": "rel/path"},)}, "absolute mount_path"),
        ({"tolerations": ({"key": "k", "operator": "In"},)}, "operator must be Equal or Exists"),
        ({"tolerations": ({"key": "k", "operator": "Equal", "effect": "Never"},)}, "effect must be one of"),
        ({"tolerations": ({"key": "k", "operator": "Exists", "value": "v"},)}, "Exists takes no value"),
        ({"env_from_secrets": ({"secret": "s", "env": "E"},)}, "needs secret, key and env"),
        ({"image_pull_secrets": ("Not_A_Name",)}, "each must be a Secret name"),
        ({"run_as_user": 0}, "run_as_user must be a non-root UID"),
    ],
)
def test_settings_validation_names_the_problem(overrides, message):
    """Real settings validation on one bad setting at a time (nothing simulated)."""
    with pytest.raises(job_settings.PyTorchJobConfigError, match=re.escape(message)):
        settings(**overrides)


def test_settings_json_round_trip():
    """Real to_json/from_json: tuples come back as tuples, so the frozen settings compare equal."""
    original = settings(elastic_min_nodes=2, elastic_max_nodes=3)
    text = original.to_json()
    assert json.loads(text) == dict(sorted(json.loads(text).items()))
    restored = job_settings.PyTorchJobSettings.from_json(text)
    assert restored == original and isinstance(restored.tolerations, tuple)
    assert restored.model_dump() == original.model_dump()


# ------------------------------------------------------- fake API server


def cond(kind: str, message: str = "") -> dict:
    return {"type": kind, "status": "True", "reason": f"PyTorchJob{kind}", "message": message}


def status(*kinds: str, message: str = "", **replicas: dict) -> dict:
    """Operator-style status: every condition kept, only the newest one True."""
    conditions = [{**cond(k), "status": "False"} for k in kinds[:-1]] + [cond(kinds[-1], message)]
    return {"conditions": conditions, "replicaStatuses": replicas}


class FakeKubernetes:
    """Just enough of the API server: pytorchjobs create/get/delete, pod list, pod log. Records every request."""

    def __init__(self) -> None:
        self.statuses: list[dict | int] = []  # one per GET of the job (the last one repeats); an int is an error
        self.create_code = 201
        self.pods: list[dict] = []
        self.pod_list_code = 200
        self.delete_code = 200
        self.log_text = ""
        self.jobs: dict[str, dict] = {}
        self.requests: list[dict] = []
        self._gets = 0

    def handle(self, method: str, url: str, body: bytes, headers: dict) -> tuple[int, str | dict]:
        parsed = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        self.requests.append(
            {
                "method": method,
                "path": parsed.path,
                "query": query,
                "headers": headers,
                "body": json.loads(body) if body else None,
            }
        )
        job = re.fullmatch(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/pytorchjobs(?:/([^/]+))?", parsed.path)
        pods = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)/log)?", parsed.path)
        if job and method == "POST":
            if self.create_code != 201:
                return self.create_code, {"kind": "Status", "code": self.create_code, "message": "simulated"}
            obj = json.loads(body)
            self.jobs[obj["metadata"]["name"]] = obj
            return 201, obj
        if job and job.group(2) not in self.jobs:
            return 404, {"kind": "Status", "code": 404, "message": "not found"}
        if job and method == "GET":
            step = self.statuses[min(self._gets, len(self.statuses) - 1)]
            self._gets += 1
            return (step, {"kind": "Status", "code": step}) if isinstance(step, int) else (200, {"status": step})
        if job and method == "DELETE":
            del self.jobs[job.group(2)]
            return self.delete_code, {"kind": "Status", "code": self.delete_code}
        if pods and pods.group(2):
            return 200, self.log_text
        if pods:
            wanted = dict(kv.split("=") for kv in query.get("labelSelector", "").split(",") if kv)
            items = [p for p in self.pods if wanted.items() <= p["metadata"]["labels"].items()]
            return self.pod_list_code, {"kind": "PodList", "items": items}
        return 404, {"kind": "Status", "code": 404}

    def calls(self, method: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method]


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    state = FakeKubernetes()
    with http_server(state.handle) as url:
        state.url = url
        yield state


@pytest.fixture
def runner(fake) -> Iterator[tuple[runners.PyTorchJobRunner, FakeClock]]:
    clock = FakeClock()
    api_client = client.ApiClient(client.Configuration(host=fake.url))
    yield (
        runners.PyTorchJobRunner(
            client.CustomObjectsApi(api_client), client.CoreV1Api(api_client), sleep=clock.sleep, clock=clock
        ),
        clock,
    )
    api_client.close()


class FakeClock:
    """Simulated time: sleep() advances the clock instantly."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def worker_pod(exit_code: int) -> dict:
    """A Worker pod whose training container crashed and is restarting (restartPolicy OnFailure)."""
    return {
        "metadata": {"name": f"{NAME}-worker-0", "labels": {runners.JOB_LABEL: NAME, runners.REPLICA_LABEL: "worker"}},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "image": "img",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
                }
            ],
        },
    }


def master_pod() -> dict:
    return {
        "metadata": {"name": f"{NAME}-master-0", "labels": {runners.JOB_LABEL: NAME, runners.REPLICA_LABEL: "master"}},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "image": "img",
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {}},
                }
            ],
        },
    }


# ---------------------------------------------------------------- runner


def test_success_returns_status_and_deletes(fake, runner):
    """Real client + real HTTP to a fake API server scripted Created -> Running -> Succeeded; simulated clock."""
    run, clock = runner
    fake.statuses = [
        status("Created"),
        status("Created", "Running", Master={"active": 1}, Worker={"active": 1}),
        status("Created", "Running", "Succeeded", Master={"succeeded": 1}, Worker={"succeeded": 1}),
    ]
    final = run.run(manifest(), timeout_seconds=600, poll_seconds=10)
    assert runners._latest_condition(final)["type"] == "Succeeded"
    (post,) = fake.calls("POST")
    assert post["path"] == f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
    assert post["body"] == manifest()  # the real client sent the manifest unchanged
    assert len(fake.calls("GET")) == 3 and clock.sleeps == [10, 10]
    (delete,) = fake.calls("DELETE")
    assert delete["path"].endswith(f"/pytorchjobs/{NAME}")
    assert delete["body"]["propagationPolicy"] == "Foreground"
    assert fake.jobs == {}


def test_failure_names_replica_condition_and_log_tail(fake, runner):
    """Fake API server scripted Running -> Failed with a crashed Worker pod; real client fetches the pod list and
    the previous container's log; the job is still deleted."""
    run, _ = runner
    message = "PyTorchJob taxi is failed because 1 Worker replica(s) failed."
    fake.statuses = [
        status("Created", "Running", Master={"active": 1}, Worker={"active": 1}),
        status("Created", "Running", "Failed", message=message, Master={"active": 1}, Worker={"failed": 1}),
    ]
    fake.pods = [master_pod(), worker_pod(exit_code=1)]
    fake.log_text = "epoch 3\nTraceback (most recent call last):\nRuntimeError: NCCL timeout\n"
    with pytest.raises(runners.PyTorchJobFailedError) as err:
        run.run(manifest(), timeout_seconds=600, poll_seconds=10)
    text = str(err.value)
    assert not isinstance(err.value, runners.PyTorchJobTimeoutError)
    assert "Worker: 1 failed" in text and "Master" not in text.splitlines()[0]
    assert f"Failed=PyTorchJobFailed: {message}" in text
    assert "RuntimeError: NCCL timeout" in text and f"{NAME}-worker-0 (exit code 1)" in text
    assert f"kubectl -n {NS} describe pytorchjob {NAME}" in text
    (log_call,) = [r for r in fake.calls("GET") if r["path"].endswith("/log")]
    assert log_call["query"]["container"] == "pytorch" and log_call["query"]["previous"].lower() == "true"
    pod_list = next(r for r in fake.calls("GET") if r["path"].endswith("/pods"))
    assert pod_list["query"]["labelSelector"] == f"{runners.JOB_LABEL}={NAME}"
    assert len(fake.calls("DELETE")) == 1 and fake.jobs == {}


def test_failure_still_raises_when_pods_cannot_be_listed(fake, runner, caplog):
    """Fake API server answers the pod list with 403: a warning names the reason, the failure is still raised."""
    run, _ = runner
    fake.statuses = [status("Created", "Failed", message="backoff limit exceeded", Worker={"failed": 1})]
    fake.pod_list_code = 403
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(runners.PyTorchJobFailedError, match="backoff"):
        run.run(manifest(), timeout_seconds=600, poll_seconds=10)
    assert any(
        "Could not read the failed pods' logs" in r.getMessage() and "403" in r.getMessage() for r in caplog.records
    )
    assert fake.jobs == {}


def test_timeout_raises_and_deletes(fake, runner):
    """Fake API server that stays Running; simulated clock/sleep make 60 s pass instantly."""
    run, clock = runner
    fake.statuses = [status("Created", "Running", Master={"active": 1}, Worker={"active": 1})]
    with pytest.raises(runners.PyTorchJobTimeoutError, match="Running=PyTorchJobRunning") as err:
        run.run(manifest(), timeout_seconds=60, poll_seconds=10)
    assert "within 60s" in str(err.value)
    assert sum(clock.sleeps) == 60 and len(fake.calls("GET")) == 7
    assert fake.jobs == {} and len(fake.calls("DELETE")) == 1


def test_transient_poll_error_is_retried(fake, runner):
    """Fake API server answers one GET with 503; the real client raises ApiException, the runner keeps polling."""
    run, _ = runner
    fake.statuses = [status("Created"), 503, status("Created", "Succeeded")]
    assert runners._latest_condition(run.run(manifest(), 600, 10))["type"] == "Succeeded"


def test_delete_tolerates_404(fake, runner, caplog):
    """Fake API server answers the DELETE with 404 (the job is already gone): no error, no warning."""
    run, _ = runner
    fake.statuses, fake.delete_code = [status("Created", "Succeeded")], 404
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run.run(manifest(), timeout_seconds=60, poll_seconds=10)
    assert len(fake.calls("DELETE")) == 1 and not caplog.records


@pytest.mark.parametrize(
    ("code", "hint"),
    [(404, "the PyTorchJob CRD (kubeflow.org/v1) is not installed"), (403, "RBAC: grant create, get, delete")],
)
def test_create_errors_give_a_hint_and_delete_nothing(fake, runner, code, hint):
    """Fake API server rejects the POST; the real client raises ApiException, which the runner explains."""
    run, _ = runner
    fake.create_code = code
    with pytest.raises(runners.PyTorchJobFailedError, match=re.escape(hint)) as err:
        run.run(manifest(), timeout_seconds=60, poll_seconds=10)
    assert f"({code} " in str(err.value) and "simulated" in str(err.value)
    assert fake.calls("DELETE") == [] and fake.calls("GET") == []


def test_status_changes_are_logged_once(fake, runner, caplog):
    """Fake API server repeats each status several times; caplog sees one line per change."""
    run, _ = runner
    running = status("Created", "Running", Master={"active": 1}, Worker={"active": 1})
    fake.statuses = [status("Created"), status("Created"), running, running, running, status("Succeeded")]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run.run(manifest(), timeout_seconds=600, poll_seconds=1)
    changes = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"PyTorchJob {NS}/{NAME}:")]
    assert len(changes) == 3, changes
    assert "Created" in changes[0] and "Running" in changes[1] and "Master: 1 active; Worker: 1 active" in changes[1]
    assert "Succeeded" in changes[2]


# ------------------------------------------------------------ credentials


def test_load_apis_without_credentials_is_a_clear_error(monkeypatch, tmp_path):
    """Real kubernetes config loaders with no service account env and a missing kubeconfig."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(job_settings.PyTorchJobConfigError, match="No Kubernetes credentials"):
        runners.load_kubernetes_apis()


def test_load_apis_uses_the_kubeconfig_token(fake, monkeypatch, tmp_path):
    """Real kubeconfig file pointing at the fake API server: the token comes from the file, not from parameters."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": fake.url}}],
        "users": [{"name": "u", "user": {"token": "file-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
    }
    (tmp_path / "config").write_text(json.dumps(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    custom, core = runners.load_kubernetes_apis()
    core.list_namespaced_pod(NS)
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer file-token"
    custom.api_client.close()
