"""ONNX's own backend conformance tests, run through the translator: ``make conformance``.

The suites ship inside the installed ``onnx`` wheel (``onnx/backend/test/data/<suite>/test_*/``: ``model.onnx``
and ``test_data_set_*/{input,output}_*.pb``). Each model is translated and traced as a ``tf.function`` over its
inputs' exact shapes with unknown values (as a SavedModel's graph is: nothing an input carries is folded into
the graph), run on every data set, and compared as ONNX's own runner compares
(``onnx/backend/test/runner/__init__.py:assert_similar_outputs``): same dtype, ``rtol=1e-3, atol=1e-7``.

Excluded, with the reason shown per test (the issue's list): float8, int4/uint4 and bfloat16 tensors; string
tensors; sequence, optional and map types; training-mode operators; operators outside the default domain.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

SUITES = ("node", "pytorch-operator", "pytorch-converted", "simple")
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.runner's defaults
# The targets: the share of the node suite's included tests that pass; all of the pytorch-* suites.
TARGETS = {"node": 0.95, "pytorch-operator": 1.0, "pytorch-converted": 1.0}

_EXCLUDED_TYPES = {
    TensorProto.BFLOAT16: "bfloat16", TensorProto.STRING: "string tensors",
    TensorProto.FLOAT8E4M3FN: "float8", TensorProto.FLOAT8E4M3FNUZ: "float8", TensorProto.FLOAT8E5M2: "float8",
    TensorProto.FLOAT8E5M2FNUZ: "float8", TensorProto.UINT4: "int4", TensorProto.INT4: "int4",
}  # fmt: skip
_TRAINING_DOMAIN = "ai.onnx.preview.training"
_TRAINING_NAMES = re.compile(r"training_mode|^test_training_dropout")
_SEQUENCE_OPS = re.compile(r"^(Sequence\w*|SplitToSequence|ConcatFromSequence|Optional\w*)$")


@dataclasses.dataclass
class CaseResult:
    suite: str
    name: str
    ops: list[str]
    status: str  # passed | failed | unsupported | excluded
    detail: str = ""


def data_root() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def _value_types(graph: onnx.GraphProto) -> Iterable[onnx.TypeProto]:
    for value in [*graph.input, *graph.output, *graph.value_info]:
        yield value.type
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.HasField("g") or attr.graphs else []:
                yield from _value_types(sub)


def _tensor_types(graph: onnx.GraphProto) -> Iterable[int]:
    yield from (t.data_type for t in graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.name in ("to", "output_dtype", "dtype") and attr.type == onnx.AttributeProto.INT:
                yield attr.i
            if attr.HasField("t"):
                yield attr.t.data_type


def exclusion(case: str, model: onnx.ModelProto) -> str | None:
    """Why a test is outside the target's scope, or ``None``."""
    graph = model.graph
    domains = {n.domain for n in graph.node} - {"", "ai.onnx"}
    if _TRAINING_DOMAIN in domains or _TRAINING_NAMES.search(case):
        return "training mode"
    if domains:
        return f"domain {sorted(domains)[0]}"
    if any(_SEQUENCE_OPS.match(n.op_type) for n in graph.node):
        return "sequence/optional types"
    for value_type in _value_types(graph):
        kind = value_type.WhichOneof("value")
        if kind != "tensor_type":
            return "sequence/optional types"
        if value_type.tensor_type.elem_type in _EXCLUDED_TYPES:
            return _EXCLUDED_TYPES[value_type.tensor_type.elem_type]
    for elem in _tensor_types(graph):
        if elem in _EXCLUDED_TYPES:
            return _EXCLUDED_TYPES[elem]
    return None


def _load_tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
    tensors = []
    for path in files:
        proto = TensorProto()
        proto.ParseFromString(path.read_bytes())
        tensors.append(numpy_helper.to_array(proto))
    return tensors


def _compare(expected: list[np.ndarray], got: list[np.ndarray]) -> str:
    if len(expected) != len(got):
        return f"{len(got)} outputs, expected {len(expected)}"
    for index, (ref, out) in enumerate(zip(expected, got, strict=True)):
        if ref.dtype != out.dtype:
            return f"output {index}: dtype {out.dtype}, expected {ref.dtype}"
        if ref.shape != out.shape:
            return f"output {index}: shape {out.shape}, expected {ref.shape}"
        try:
            np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, equal_nan=True)
        except AssertionError as err:
            lines = [line.strip() for line in str(err).splitlines() if "Max" in line]
            return f"output {index}: {'; '.join(lines) or 'values differ'}"
    return ""


def run_case(suite: str, case_dir: Path) -> CaseResult:
    import tensorflow as tf

    from torchtfx.components.converter.translator import OnnxGraphModule, UnsupportedOpsError

    model = onnx.load(str(case_dir / "model.onnx"))
    ops = sorted({n.op_type for n in model.graph.node})
    result = CaseResult(suite, case_dir.name, ops, "passed")
    reason = exclusion(case_dir.name, model)
    if reason:
        return dataclasses.replace(result, status="excluded", detail=reason)
    try:
        module = OnnxGraphModule(model, fuse=False)
    except UnsupportedOpsError as err:
        return dataclasses.replace(result, status="unsupported", detail=", ".join(sorted(err.unsupported)))
    except Exception as err:
        return dataclasses.replace(result, status="failed", detail=_first_line(err))
    for data_set in sorted(case_dir.glob("test_data_set_*")):
        inputs, expected = _load_tensors(data_set, "input"), _load_tensors(data_set, "output")
        try:
            signature = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in inputs]
            traced = tf.function(lambda *xs: module(*xs), input_signature=signature, autograph=False)
            got = [np.asarray(t) for t in traced(*inputs)]
        except Exception as err:
            return dataclasses.replace(result, status="failed", detail=_first_line(err))
        problem = _compare(expected, got)
        if problem:
            return dataclasses.replace(result, status="failed", detail=f"{data_set.name}: {problem}")
    return result


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}"


def _cases(suites: Iterable[str], pattern: str | None) -> list[tuple[str, Path]]:
    root = data_root()
    found = []
    for suite in suites:
        for case_dir in sorted((root / suite).glob("test_*")):
            if (case_dir / "model.onnx").exists() and (not pattern or re.search(pattern, case_dir.name)):
                found.append((suite, case_dir))
    return found


def _run_chunk(chunk: list[tuple[str, str]]) -> list[CaseResult]:
    _quiet()
    return [run_case(suite, Path(case_dir)) for suite, case_dir in chunk]


def run_suites(suites: Iterable[str], pattern: str | None = None, jobs: int = 1) -> list[CaseResult]:
    cases = [(s, str(d)) for s, d in _cases(suites, pattern)]
    if jobs <= 1 or len(cases) < 20:
        return _run_chunk(cases)
    import multiprocessing

    chunks = [cases[i::jobs] for i in range(jobs)]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        parts = pool.map(_run_chunk, chunks)
    order = {(s, Path(d).name): i for i, (s, d) in enumerate(cases)}
    return sorted((r for part in parts for r in part), key=lambda r: order[(r.suite, r.name)])


def suite_figures(results: list[CaseResult]) -> dict[str, dict[str, float]]:
    """Per suite: counts by status, and the share of included tests passed."""
    figures: dict[str, dict[str, float]] = {}
    for suite in dict.fromkeys(r.suite for r in results):
        counts = Counter(r.status for r in results if r.suite == suite)
        included = counts["passed"] + counts["failed"] + counts["unsupported"]
        rate = counts["passed"] / included if included else 1.0
        figures[suite] = {**{k: counts[k] for k in ("passed", "failed", "unsupported", "excluded")},
                          "included": included, "pass_rate": rate}  # fmt: skip
    return figures


def operator_table(results: list[CaseResult]) -> list[tuple[str, int, int, int, int]]:
    """(operator, passed, failed, unsupported, excluded) per operator of the single-operator tests (the
    ``node`` suite; a test counts for every operator it holds), most failing first."""
    rows: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        if result.suite == "node":
            for name in result.ops:
                rows[name][result.status] += 1
    table = [(name, c["passed"], c["failed"], c["unsupported"], c["excluded"]) for name, c in rows.items()]
    return sorted(table, key=lambda r: (-(r[2] + r[3]), r[0]))


def render(results: list[CaseResult], failures: bool = True) -> str:
    lines = ["suite               passed  failed  unsupported  excluded  pass rate (of included)"]
    for suite, f in suite_figures(results).items():
        lines.append(f"{suite:<18} {f['passed']:>7} {f['failed']:>7} {f['unsupported']:>12} {f['excluded']:>9}"
                     f"  {f['pass_rate']:.1%} of {f['included']}")  # fmt: skip
    excluded = Counter(r.detail for r in results if r.status == "excluded")
    lines.append("excluded: " + ", ".join(f"{why} {n}" for why, n in excluded.most_common()))
    if failures:
        lines.append("")
        lines.append("not passing:")
        lines += [f"  {r.suite}/{r.name} [{r.status}] {r.detail}" for r in results
                  if r.status in ("failed", "unsupported")]  # fmt: skip
    return "\n".join(lines)


def markdown_table(results: list[CaseResult]) -> str:
    """The per-operator table of the node suite for the README, operators with a test not passing first."""
    lines = ["| operator | passed | failed | not supported | excluded |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {p} | {f} | {u} | {e} |" for name, p, f, u, e in operator_table(results)]
    return "\n".join(lines)


def meets_targets(results: list[CaseResult]) -> list[str]:
    """The targets not met, in words (empty: all met)."""
    misses = []
    for suite, f in suite_figures(results).items():
        if suite in TARGETS and f["pass_rate"] < TARGETS[suite]:
            misses.append(f"{suite}: {f['pass_rate']:.1%} passed, target {TARGETS[suite]:.0%}")
    return misses


def _quiet() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.getLogger("torchtfx").setLevel(logging.WARNING)
    try:
        import tensorflow as tf

        tf.get_logger().setLevel(logging.ERROR)
    except ImportError:  # pragma: no cover
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="conformance", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=SUITES, help="a suite (repeatable; default: all)")
    parser.add_argument("-k", "--pattern", help="only tests whose name matches this regular expression")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--json", type=Path, help="write every test's result here")
    parser.add_argument("--markdown", type=Path, help="write the node suite's per-operator table here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args(argv)
    _quiet()
    started = time.monotonic()
    results = run_suites(args.suite or SUITES, args.pattern, args.jobs)
    print(render(results))
    print(f"\n{len(results)} tests in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    if args.markdown:
        args.markdown.write_text(markdown_table(results) + "\n")
    misses = meets_targets(results)
    for miss in misses:
        print(f"target not met: {miss}")
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
