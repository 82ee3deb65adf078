"""The architecture, checked: the installed namespace, no import cycles among the project's modules (lazy
imports inside functions count too), and the layers only import downwards: the benchmarks (tests/bench) ->
pipeline -> components -> data."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.paths import PROJECT_ROOT

PACKAGE_LAYERS = ("pipeline", "components", "data")  # installed as torchtfx.<layer>
BENCH = "tests.bench"  # make bench: above the pipeline, imported by nothing of the package
LAYERS = (BENCH, *PACKAGE_LAYERS)  # each may import only the ones after it


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return name if name.startswith(BENCH) else "torchtfx." + name


def _layer(module: str) -> int:
    return 0 if module.startswith(BENCH) else LAYERS.index(module.split(".")[1])


def _graph() -> dict[str, set[str]]:
    folders = [PROJECT_ROOT / layer for layer in PACKAGE_LAYERS] + [PROJECT_ROOT / "tests" / "bench"]
    files = {_module_name(p): p for folder in folders for p in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in files else node.module for a in node.names
                }
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    graph = _graph()
    assert len(graph) > 50  # the walk found the project
    assert _cycles(graph) == []


def test_layers_import_only_downwards():
    upward = []
    graph = _graph()
    assert any(m.startswith(BENCH) for m in graph)  # the benchmarks are walked too
    for module, targets in graph.items():
        upward += [(module, t) for t in targets if _layer(t) < _layer(module)]
    assert upward == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_torchtfx_namespace_is_installed(tmp_path):
    """From outside the repository, generic names do not import; torchtfx.* does."""
    probe = (
        "import importlib.util, sys\n"
        "assert all(importlib.util.find_spec(n) is None for n in ('pipeline', 'components', 'data')), 'generic'\n"
        "import torchtfx.pipeline, torchtfx.components, torchtfx.data\n"
        "import importlib.metadata as md\n"
        "print(md.distribution('torchtfx').read_text('top_level.txt').split())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['torchtfx']"]


def test_a_regular_install_holds_only_torchtfx_packages(tmp_path):
    """What `pip install .` (a wheel) puts into site-packages: torchtfx/... and its dist-info, nothing generic."""
    import zipfile

    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--use-pep517",
        "-w",
        str(tmp_path),
        str(PROJECT_ROOT),
    ]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("torchtfx-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"torchtfx", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    names = zipfile.ZipFile(wheel).namelist()
    assert "torchtfx/pipeline/pipeline.py" in names and "torchtfx/data/datasets/taxi.yaml" in names


CONVERTER = "torchtfx.components.converter"
# The converter is a library of its own (DEVELOPMENT.md): ONNX in, TensorFlow out, proved against onnxruntime.
CONVERTER_MAY_NOT_IMPORT = (
    "tfx",
    "tensorflow_transform",
    "tensorflow_model_analysis",
    "mlflow",
    "apache_beam",
    "torch",
    "ml_metadata",
    "kfp",
)


def test_the_converter_imports_nothing_from_the_rest_of_torchtfx():
    graph = _graph()
    members = [m for m in graph if m == CONVERTER or m.startswith(CONVERTER + ".")]
    assert len(members) > 5
    outside = [(m, t) for m in members for t in graph[m] if not (t == CONVERTER or t.startswith(CONVERTER + "."))]
    assert outside == []


def test_the_converter_imports_no_pipeline_framework():
    found = []
    for path in (PROJECT_ROOT / "components" / "converter").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            )
            found += [(path.name, n) for n in names if n.split(".")[0] in CONVERTER_MAY_NOT_IMPORT]
    assert found == []


TF_SERVING = "torchtfx.components.tf_serving"
# The TF Serving library serves what the Promoter decided (DEVELOPMENT.md): it never imports its callers.
TF_SERVING_MAY_NOT_IMPORT = ("torchtfx.pipeline", "torchtfx.components.promoter")


def test_the_tf_serving_library_imports_neither_the_pipeline_nor_the_promoter():
    graph = _graph()
    members = [m for m in graph if m == TF_SERVING or m.startswith(TF_SERVING + ".")]
    assert len(members) > 5
    upward = [(m, t) for m in members for t in graph[m] if t.startswith(TF_SERVING_MAY_NOT_IMPORT)]
    assert upward == []


def _component_package(module: str) -> str | None:
    """``shared`` for torchtfx.components.shared.x; None for a module at the components root (stage_failure)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["torchtfx", "components"] and len(parts) > 3 else None


def test_no_two_component_packages_import_each_other():
    """shared <-> tf_serving was such a tie, only for StageFailure: it now sits below both (components/)."""
    ties = set()
    for module, targets in _graph().items():
        ties |= {(_component_package(module), _component_package(t)) for t in targets}
    ties = {(a, b) for a, b in ties if a and b and a != b}
    assert ("shared", "tf_serving") in ties  # the walk sees the component packages
    assert sorted((a, b) for a, b in ties if (b, a) in ties) == []


PIPELINE_LOOSE_MODULES = {"__init__.py", "pipeline.py"}  # the DAG (create_pipeline); all else in a stage package


def test_pipeline_holds_only_the_dag_beside_its_stage_packages():
    """pipeline/ by stage (issue #42): Transform's module code (transform/), the Evaluator's plug-ins
    (evaluation/), the settings with the model check and Beam's arguments (settings/), runners, CLI, reporting."""
    folder = PROJECT_ROOT / "pipeline"
    assert {p.name for p in folder.glob("*.py")} == PIPELINE_LOOSE_MODULES
    packages = {p.parent.name for p in folder.glob("*/__init__.py")}
    assert {"transform", "evaluation", "settings"} <= packages


TRAINER = "torchtfx.components.torch_trainer"


def _trainer_package(module: str, packages: set[str]) -> str:
    """The package a trainer module sits in; the trainer's root modules (component, executor, flow: the
    orchestration) count as one node, ``torch_trainer``."""
    return module if module in packages else module.rsplit(".", 1)[0]


def test_no_two_trainer_packages_import_each_other():
    """The trainer cut along its process seams (issue #42): handoff/ (the executor-to-worker contract),
    torch_to_onnx/ (the worker's export), savedmodel/ (the executor's SavedModel and gates), worker/, cluster/,
    modeling/; the root only imports them, nothing below imports the root."""
    folder = PROJECT_ROOT / "components" / "torch_trainer"
    packages = {_module_name(p) for p in folder.rglob("__init__.py")}
    edges = set()
    for module, targets in _graph().items():
        if module.startswith(TRAINER):
            edges |= {
                (_trainer_package(module, packages), _trainer_package(t, packages))
                for t in targets
                if t.startswith(TRAINER)
            }
    edges = {(a, b) for a, b in edges if a != b}
    assert (TRAINER, TRAINER + ".worker") in edges  # the walk sees the trainer's packages
    assert sorted((a, b) for a, b in edges if (b, a) in edges) == []


SERVED_INTERFACE = PROJECT_ROOT / "components" / "shared" / "served_interface.py"
# Names only the served interface uses ("examples" and "predictions" also name TFX's channel and predict's file).
SERVED_NAMES = ("serving_default", "transform_features", "probabilities", "classes")


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, value) of each string constant that is not a docstring."""
    tree = ast.parse(path.read_text(), str(path))
    bodies = [n.body for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    docs = {id(b[0].value) for b in bodies if b and isinstance(b[0], ast.Expr)}
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_the_served_interface_is_typed_once():
    """The signature and output names live in components/shared/served_interface.py; the converter, a library
    that imports nothing of ours, keeps its own generic name."""
    folders = [PROJECT_ROOT / layer for layer in PACKAGE_LAYERS] + [PROJECT_ROOT / "tests" / "bench"]
    found = [
        (str(p.relative_to(PROJECT_ROOT)), line, value)
        for folder in folders
        for p in folder.rglob("*.py")
        if p != SERVED_INTERFACE and "converter" not in p.relative_to(PROJECT_ROOT).parts
        for line, value in _string_constants(p)
        if value in SERVED_NAMES
    ]
    assert {v for _, v in _string_constants(SERVED_INTERFACE)} >= set(SERVED_NAMES)
    assert found == []


def test_the_pipeline_imports_no_components_executor():
    """A component's executor is TFX's entry point, not a library: what the layer above shares with it (the CSV
    core of ExampleGen and `torchtfx predict`) lives below, in data/csv_reader/."""
    graph = _graph()
    pipeline = [m for m in graph if m.startswith("torchtfx.pipeline.")]
    found = [
        (m, t) for m in pipeline for t in graph[m] if t.startswith("torchtfx.components.") and t.endswith(".executor")
    ]
    assert found == []


# Below the pipeline, what it may import of components/: a component's public module, and the libraries.
PIPELINE_LIBRARIES = ("shared", "tf_serving", "converter", "stage_failure")


def test_the_pipeline_imports_only_a_components_public_module():
    """Component internals are no library to the layer above: pipeline/ reaches a component through its
    ``public.py`` (components/shared/public_names.py says why not its ``__init__``)."""
    graph = _graph()
    pipeline = [m for m in graph if m.startswith("torchtfx.pipeline.")]
    found = []
    for module in pipeline:
        for target in graph[module]:
            parts = target.split(".")
            if parts[1] == "components" and parts[2] not in PIPELINE_LIBRARIES and parts[3:] != ["public"]:
                found.append((module, target))
    assert found == []
