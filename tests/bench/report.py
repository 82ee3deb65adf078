"""``tests/bench/results/README.md`` and plots, rebuilt from whatever ``tests/bench/results/*.json`` holds."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tests.bench.evaluator_bench import report_lines as evaluator_report_lines
from tests.bench.report_parts import STAGE_ROLES, met, role_seconds
from tests.bench.report_predict import predict_section
from tests.bench.report_pretrained import pretrained_finetune_section, serving_pretrained_section
from tests.bench.report_scale import peak_processes
from tests.bench.report_serving import reference_signature_lines
from tests.bench.serving_bench import ratios

logger = logging.getLogger(__name__)


def _load(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def _reference_section(r: dict) -> list[str]:
    ours, ref = r["ours"], r["reference"]
    auc, ref_auc = ours["metrics"].get("auc"), ref["metrics"].get("auc")
    lines = [
        "## 1. Against TFX's native-Keras taxi pipeline",
        "",
        *(
            [
                f"{len(r['rounds'])} rounds, reference then ours, each from cold roots: the table is the last round's, "
                "the ratios below are medians over the rounds.",
                "",
            ]
            if len(r.get("rounds", [])) > 1
            else []
        ),
        "| stage | torchtfx (s) | reference (s) |",
        "|---|---:|---:|",
    ]
    for role, our_ids, ref_ids in STAGE_ROLES:
        lines.append(
            f"| {role} | {role_seconds(ours['stages'], our_ids):.1f} | {role_seconds(ref['stages'], ref_ids):.1f} |"
        )
    lines += [
        f"| **wall (whole command)** | **{ours['wall_seconds']:.1f}** | **{ref['wall_seconds']:.1f}** |",
        f"| AUC on our eval split (TFMA, same metrics config) | {auc:.4f} | {ref_auc:.4f} |",
        f"| peak RSS, process tree (GiB) | {ours['peak_rss_gib']:.2f} | {ref['peak_rss_gib']:.2f} |",
        f"| peak PSS, process tree (GiB) | {ours.get('peak_pss_gib', 0.0):.2f} | {ref.get('peak_pss_gib', 0.0):.2f} |",
        "",
        *_ratio_lines(r, auc),
        f"At the peak (MiB of RSS, the last round): torchtfx {peak_processes(ours)}; reference {peak_processes(ref)}.",
        "",
        "![stage times](stages_vs_reference.png)",
        "",
    ]
    return lines


def _ratio_lines(r: dict, auc: float) -> list[str]:
    """The wall and PSS ratios: medians over interleaved rounds with the rounds beside them (one round before
    issue #45)."""
    ours, ref = r["ours"], r["reference"]
    rounds = r.get("rounds") or [
        {"wall_ratio": r["wall_ratio"], "pss_ratio": ours["peak_pss_gib"] / ref["peak_pss_gib"]}
    ]
    lines = []
    for label, key, target in (
        ("Wall", "wall_ratio", r["target_wall_ratio"]),
        ("Peak PSS", "pss_ratio", r["target_pss_ratio"]),
    ):
        values = [each[key] for each in rounds]
        median = r.get(key, values[0])
        spread = (
            f" (median of {len(values)} interleaved rounds, min {min(values):.2f}, max {max(values):.2f})"
            if len(values) > 1
            else ""
        )
        lines.append(f"{label} ratio {median:.2f}{spread} (target ≤ {target}): {met(median <= target)}.")
    lines.append(f"AUC {auc:.4f} (target ≥ {r['target_auc']}): {met(auc >= r['target_auc'])}.")
    if len(rounds) > 1:
        lines.append(
            "Rounds (reference s / ours s, reference GiB / ours GiB): "
            + "; ".join(
                f"{each['reference_wall_seconds']:.1f} / {each['ours_wall_seconds']:.1f} s, "
                f"{each['reference_peak_pss_gib']:.2f} / {each['ours_peak_pss_gib']:.2f} GiB"
                for each in rounds
            )
            + "."
        )
    return lines


def _trainer_sections(results: dict) -> list[str]:
    lines = []
    if "input_path" in results:
        r = results["input_path"]
        eps = r["examples_per_second_overall"]
        lines += [
            "## 2. Trainer input path",
            "",
            f"{r['train_rows']} training rows, {r['epochs']} epochs per run, one worker, one thread. Materializing the "
            f"raw examples through the transform graph took {r['materialize_seconds']:.1f} s.",
            "",
            "| | from the examples (the Trainer's path) | in memory (limit) |",
            "|---|---:|---:|",
            f"| examples/s, whole run | {eps['transform_output']:.0f} | {eps['in_memory']:.0f} |",
        ]
        per = r["examples_per_second_per_epoch"]
        for i, (a, b) in enumerate(zip(per["transform_output"], per["in_memory"], strict=False), start=1):
            lines.append(f"| examples/s, epoch {i} | {a:.0f} | {b:.0f} |")
        lines += [
            "",
            f"Ratio {r['ratio_overall']:.2f} over the whole runs (materializing included), "
            f"{r['ratio_per_epoch']:.2f} per epoch, over {r['rounds']} rounds in mirrored order. "
            f"Per epoch (target ≥ {r['target']}): {met(r['ratio_per_epoch'] >= r['target'])}.",
            "",
        ]
    if "ddp" in results:
        r = results["ddp"]
        lines += [
            "## 3. DDP scaling",
            "",
            f"{r['train_rows']} training rows, {r.get('epochs', '?')} epochs, one thread per worker; the mean of "
            f"{r.get('rounds', 1)} rounds in mirrored order.",
            "",
            "| variant | examples/s | each round | speed-up | wall with process start (s) | eval AUC |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for x in r["runs"]:
            rounds = ", ".join(f"{v:.0f}" for v in x.get("examples_per_second_each_round", []))
            speedup = f"{x['speedup']:.2f}x" if "speedup" in x else "1.00x"
            lines.append(
                f"| {x.get('name', x['workers'])} | {x['examples_per_second']:.0f} | {rounds} | {speedup} "
                f"| {x['wall_seconds_with_process_start']:.1f} | {x['eval_auc']:.4f} |"
            )
        lines.append("")
        for x in r["runs"][1:]:
            ok = x["speedup"] >= r["target_speedup"] and x["auc_difference"] <= r["target_auc_difference"]
            judged = met(ok) if "default" in x["name"] else "for comparison"
            lines.append(
                f"- {x['name']}: speed-up {x['speedup']:.2f}x (target ≥ {r['target_speedup']} with the default "
                f"settings), AUC difference {x['auc_difference']:.4f} (target ≤ {r['target_auc_difference']}): "
                f"{judged}."
            )
        lines.append("")
        lines += _small_data_lines(r.get("small_data"))
    return lines


def _small_data_lines(r: dict | None) -> list[str]:
    if not r:
        return []
    inproc, ddp = r["runs"]["in_process"], r["runs"]["torchrun_2_workers"]
    return [
        f"Small data ({r['train_rows']} training rows, taxi), default settings, wall with process start: one "
        f"worker in the executor's process {inproc['wall_seconds_with_process_start']:.1f} s (AUC "
        f"{inproc['eval_auc']:.4f}) against 2 DDP workers under torchrun "
        f"{ddp['wall_seconds_with_process_start']:.1f} s (AUC {ddp['eval_auc']:.4f}): {r['wall_ratio']:.2f}x; "
        "`num_workers: auto` trains in process below 50,000 training rows.",
        "",
    ]


def _serving_section(r: dict) -> list[str]:
    names = list(r["latency"])
    lines = [
        "## 4. Serving latency (median ms per call)",
        "",
        "| batch | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for batch in sorted(next(iter(r["latency"].values())), key=int):
        lines.append(f"| {batch} | " + " | ".join(f"{r['latency'][n][batch]['median_ms']:.3f}" for n in names) + " |")
    lines += [
        "",
        *_network_target_lines(r),
        "",
        *reference_signature_lines(r),
        f"ONNX -> TF conversion {r['onnx2tf_conversion_seconds']:.1f} s (in a warm process); "
        f"parity over {r['parity_examples']} eval rows: "
        f"max |SavedModel - PyTorch| = {r['parity_max_abs_diff']:.2e}.",
        "",
        "![serving latency](serving_latency.png)",
        "",
    ]
    return lines


def _by_batch(by_batch: dict[str, float]) -> str:
    return ", ".join(f"{b}: {v:.2f}" for b, v in sorted(by_batch.items(), key=lambda kv: int(kv[0])))


def _network_target_lines(r: dict) -> list[str]:
    """Issue 15's targets for the converted network: ≤ 1.5x onnxruntime at batch 1024, ≤ PyTorch eager at
    every batch; judged on ``target_runtime`` (Session::Run from C, as TF Serving calls the graph)."""
    if "target_runtime" not in r:  # results written before the C API runtime existed
        return []
    vs_ort, vs_torch = r["converted_vs_onnxruntime"], r["converted_vs_torch"]
    at_1024 = vs_ort.get("1024", float("inf"))
    python_ort = _by_batch(ratios(r["latency"], "converted_network", "onnxruntime"))
    python_torch = _by_batch(ratios(r["latency"], "converted_network", "torch"))
    target = r.get("target", 1.5)  # zoo rows hold no target: the serving benchmark's
    lines = [
        f"- `{r['target_runtime']}` / onnxruntime: {_by_batch(vs_ort)}; at batch 1024 {at_1024:.2f} (target ≤ "
        f"{target}): {met(at_1024 <= target)}.",
        f"- `{r['target_runtime']}` / PyTorch eager: {_by_batch(vs_torch)} (target ≤ 1 at every batch): "
        f"{met(bool(vs_torch) and max(vs_torch.values()) <= 1.0)}.",
        f"- From Python (`converted_network`, a ConcreteFunction call): / onnxruntime {python_ort}; / PyTorch "
        f"eager {python_torch}. `tf_call_floor` is what any TF call costs from Python here; TF Serving calls the "
        "graph from C++, as the `*_session` runtimes do.",
    ]
    if r.get("c_api_unavailable"):
        lines.append(f"- The C API runtimes were left out: {r['c_api_unavailable']}.")
    return lines


_TEXT_RUNTIMES = (
    "savedmodel_signature_session",
    "savedmodel_signature",
    "converted_network_session",
    "converted_network_session_onednn_off",
    "converted_network",
    "onnxruntime",
    "torch",
    "torch_spinning",
    "tf_session_floor",
    "tf_call_floor",
)
_TEXT_TARGETS = (("vs_onnxruntime", "onnxruntime"), ("vs_torch", "PyTorch eager"))


def _numeric(keyed: dict) -> list:
    return sorted(keyed.items(), key=lambda kv: int(kv[0]))


def _text_profile_lines(r: dict, top: int = 4) -> list[str]:
    lines = []
    for key, found in sorted(r.get("op_profile", {}).items(), key=lambda kv: [int(x) for x in kv[0].split("x")]):
        ops = sorted(found["ops"].items(), key=lambda kv: -kv[1]["ms_per_call"])[:top]
        shown = ", ".join(f"{op} {v['ms_per_call']:.2f} ms ({v['nodes']} nodes)" for op, v in ops)
        lines.append(f"- {key}: {found['wall_ms']:.2f} ms per traced call, {found.get('nodes', '?')} nodes; {shown}.")
    return lines


def _text_missed_line(r: dict, length: str, batch: str) -> str | None:
    """Where the network misses a target at this batch and length: its two costliest op types (shares of the
    traced call) and what it takes with oneDNN's rewrites off."""
    found, t = r["by_length"][length], r["targets"]
    missed = [
        f"{found[f'converted_{key}'][batch]:.2f}x {name}"
        for key, name in _TEXT_TARGETS
        if found[f"converted_{key}"][batch] > t[key]
    ]
    if int(batch) < t["min_batch"] or not missed:
        return None
    line = f"- Missed at batch {batch} x {length} tokens ({', '.join(missed)})"
    profile = r.get("op_profile", {}).get(f"{batch}x{length}")
    if profile:
        total = sum(v["ms_per_call"] for v in profile["ops"].values())
        ops = sorted(profile["ops"].items(), key=lambda kv: -kv[1]["ms_per_call"])[:2]
        shares = " and ".join(f"{op} ({v['nodes']} nodes) {v['ms_per_call'] / total:.0%}" for op, v in ops)
        line += f": under Session::Run, {shares} of the traced time"
    latency, torch = found["latency"], found.get("fastest_torch", {}).get(batch, "torch")
    off = latency.get("converted_network_session_onednn_off", {}).get(batch, {}).get("median_ms")
    if off:
        vs = ", ".join(f"{off / latency[name][batch]['median_ms']:.2f}x {name}" for name in ("onnxruntime", torch))
        line += f"; with oneDNN off the network takes {off:.2f} ms ({vs})"
    return line + "."


def _text_caption(r: dict) -> str:
    loads = [x for found in r["by_length"].values() for x in found["load_average_1min"]]
    env = ", ".join(f"`{k}={v}`" for k, v in r.get("measure_env", {}).items())
    return (
        f"Every {r['sample_every']}th packaged review through `torchtfx run` (`{' '.join(r['run_args'])}`); its "
        f"{r['eval_rows']} eval texts, each cut to exactly `length` tokens (a shorter one repeated first) and checked "
        f"against Transform's ids. Median ms per call, the runtimes taking turns in {r.get('rounds', 5)} rounds "
        f"({r.get('seconds_per_runtime', 1.5):g} s of calls each), {r['threads']} threads each, on {r['threads']} "
        f"cores shared with other work (1-minute load average {min(loads):.1f} to {max(loads):.1f} while measuring). "
        "`*_session`: TF_SessionRun from C, as TF Serving runs the graph; `_onednn_off`: the same with "
        "`TF_ENABLE_ONEDNN_OPTS=0` (not judged); the floors: a graph that only doubles its first input. Network: "
        f"{r['strategy']} (repairs: {', '.join(r['repairs']) or 'none'}). Measured in a process with {env}: "
        "`torch`'s OpenMP threads sleep while they wait (with libgomp's default, spinning, PyTorch eager took 184 ms "
        "instead of 0.8 ms per call at batch 1 x 16 tokens on loaded cores: `MEASURE_ENV` in "
        "tests/bench/sequence_serving_bench.py); `torch_spinning`: the same model in a child process with the default, "
        "faster where the cores are free. The ratios to PyTorch eager take the faster of the two at each batch."
    )


def serving_text_section(r: dict) -> list[str]:
    """``serving_text``: median ms per runtime at each token length and batch, the network's targets at batch ≥
    ``min_batch``, the runtimes' agreement, and where the network's time goes (``op_profile``)."""
    t, runtime, by_length = r["targets"], r["target_runtime"], _numeric(r["by_length"])
    names = [n for n in _TEXT_RUNTIMES if n in by_length[0][1]["latency"]]
    lines = [
        f"## 8. Serving latency with token sequences ({r['dataset']}, {r['model']})",
        "",
        _text_caption(r),
        "",
        "| length | batch | " + " | ".join(names) + f" | `{runtime}` / onnxruntime | / faster torch |",
        "|---:|---:|" + "---:|" * (len(names) + 2),
    ]
    for length, found in by_length:
        for batch, _ in _numeric(found["latency"][names[0]]):
            times = " | ".join(f"{found['latency'][n][batch]['median_ms']:.3f}" for n in names)
            vs_ort, vs_torch = found["converted_vs_onnxruntime"][batch], found["converted_vs_torch"][batch]
            lines.append(f"| {length} | {batch} | {times} | {vs_ort:.2f} | {vs_torch:.2f} |")
    lines += ["", f"Targets at batch ≥ {t['min_batch']}, judged on `{runtime}`:", ""]
    for key, name in _TEXT_TARGETS:
        each = "; ".join(
            f"length {n}: "
            + ", ".join(f"{b}: {v:.2f}" for b, v in _numeric(f[f"converted_{key}"]) if int(b) >= t["min_batch"])
            for n, f in by_length
        )
        lines.append(f"- network / {name}: {each} (target ≤ {t[key]}): {met(r['met'][key])}.")
    diffs = "; ".join(
        f"length {n}: " + ", ".join(f"{k} {v:.1e}" for k, v in f["max_abs_diff_vs_torch"].items()) for n, f in by_length
    )
    missed = [_text_missed_line(r, n, b) for n, f in by_length for b, _ in _numeric(f["converted_vs_onnxruntime"])]
    lines += [
        f"- Same outputs: max |runtime - PyTorch eager| at batch {max(r['batch_sizes'])}: {diffs}.",
        *filter(None, missed),
        "",
    ]
    if r.get("c_api_unavailable"):
        lines += [f"The C API runtimes were left out: {r['c_api_unavailable']}.", ""]
    if r.get("op_profile"):
        lines += [
            "The network's time by op type under Session::Run, batch x length (step stats of 20 traced calls; "
            "tracing adds to every node, so read them as shares; slowest nodes in serving_text.json):",
            "",
            *_text_profile_lines(r),
            "",
        ]
    return lines


def _scale_section(r: dict) -> list[str]:
    from tests.bench.report_scale import scale_section  # it imports this module's stage roles

    return scale_section(r)


def _zoo_section(r: dict) -> list[str]:
    batches = [str(b) for b in r["batch_sizes"]]
    lines = [
        "## 6. Model zoo (taxi, one pipeline run per model)",
        "",
        "Median ms per call, " + " / ".join(r["runtimes"]) + " on the same eval rows (the network runtimes on "
        f"transformed rows, the signature on raw tf.Examples), {r['threads']} threads each; "
        "`*_session`: run by TF_SessionRun from C, as TF Serving runs the graph; ratio = converted_network_session "
        "(converted_network where the C harness did not run) / onnxruntime; the floors: a graph that does nothing "
        "but double its input.",
        "",
        "| model | strategy | repairs | conversion (s) | parity max abs diff | "
        + " | ".join(f"ms at {b} (ratio)" for b in batches)
        + " | AUC (TFMA) | AUC (PyTorch) |",
        "|---|---|---|---:|---:|" + "---:|" * len(batches) + "---:|---:|",
    ]
    for m in r["models"]:
        if "error" in m:
            error = " ".join(m["error"][-160:].replace("|", "/").split())
            lines.append(f"| {m['model']} | failed: {error} |")
            continue
        times = [
            " / ".join(f"{m['latency'][n][b]['median_ms']:.3f}" for n in r["runtimes"] if n in m["latency"])
            + f" ({m['converted_vs_onnxruntime'][b]:.2f})"
            for b in batches
        ]
        lines.append(
            f"| {m['model']} | {m['strategy']} | {', '.join(m['repairs']) or 'none'} | "
            f"{m['conversion_seconds']:.2f} | {m['parity_max_abs_diff']:.2e} | "
            + " | ".join(times)
            + f" | {_num(m.get('tfma_auc'))} | {_num(m.get('torch_eval_auc'))} |"
        )
    targets = [
        f"- {m['model']}: " + "; ".join(line[2:].rstrip(".") for line in _network_target_lines(m)) + "."
        for m in r["models"]
        if "target_runtime" in m
    ]
    return [*lines, "", f"AUC: {r['auc_source']}.", "", *targets, "", *_fp16_lines(r), ""]


RESEARCH_RESULT = "research_zoo"  # tests/bench/results/research_zoo.json
_RESEARCH_BATCHES = ("1", "1024")


def _research_caption(r: dict) -> str:
    return (
        f"Third-party published models (tests/bench/research_zoo/), each through `torchtfx run` on the first "
        f"{r['sample_rows']:,} rows of the taxi CSV (`{' '.join(r['run_args'])}`), one pipeline root for all. "
        "Exporter, repairs and symbolics: the Trainer's (the Model artifact's `onnx_conversion`); parity: max "
        "|SavedModel - PyTorch| on the eval split; ratio: the converted network (Session::Run from C where the C "
        f"harness ran) / onnxruntime, median ms per call, {r['threads']} threads; dynamo: the same trained network "
        "exported again with `torch.onnx.export(dynamo=True)` in its own process, as the Trainer runs it (seconds "
        "include the process's start and imports: start = a child that only imports torch and onnxscript) against "
        f"the legacy exporter's trace in this process, ok where its graph translates with parity ≤ "
        f"{r.get('parity_tolerance', 1e-5):g} against onnxruntime on the legacy graph."
    )


def _research_fixes(m: dict) -> str:
    conversion = m.get("conversion", {})
    fixes = ", ".join(conversion.get("repairs", [])) or "none"
    symbolics = conversion.get("symbolics", [])
    return fixes + (f"; symbolics: {', '.join(symbolics)}" if symbolics else "")


def _research_dynamo(m: dict) -> tuple[str, str]:
    """(verdict, "dynamo s / legacy s") of a row's dynamo exporter figures."""
    d = m.get("dynamo")
    if not d:
        return "n/a", "n/a"
    if d.get("ok"):
        verdict = f"ok ({d['parity_max_abs_diff']:.2e})"
    else:
        verdict = "failed: " + " ".join(str(d.get("error", "?"))[:160].replace("|", "/").split())  # what failed
    dynamo, legacy = d.get("dynamo_export_seconds"), d.get("legacy_export_seconds")
    start = d.get("dynamo_child_start_seconds")
    seconds = "n/a" if dynamo is None else f"{dynamo:.2f}" + ("" if start is None else f" (start {start:.2f})")
    return verdict, f"{seconds} / {'failed' if legacy is None else f'{legacy:.2f}'}"


def research_table(r: dict) -> list[str]:
    """The corpus table: one row per model, a failed run with its error."""
    lines = [
        "| model | package | version | class | exporter | repairs / symbolics | parity max abs diff | "
        + " | ".join(f"converted / onnxruntime at {b}" for b in _RESEARCH_BATCHES)
        + " | AUC (TFMA) | AUC (PyTorch) | dynamo exporter | export s, dynamo / legacy |",
        "|---|---|---|---|---|---|---:|" + "---:|" * len(_RESEARCH_BATCHES) + "---:|---:|---|---:|",
    ]
    for m in r["models"]:
        version = m.get("version") or "not installed"
        head = f"| {m['model']} | {m.get('package', '?')} | {version} | `{m.get('class')}` |"
        if "parity_max_abs_diff" not in m:
            error = " ".join(m.get("error", "no result")[-160:].replace("|", "/").split())
            lines.append(f"{head} failed: {error} |")
            continue
        by_batch = m.get("converted_vs_onnxruntime", {})
        ratio = [f"{by_batch[b]:.2f}" if b in by_batch else "n/a" for b in _RESEARCH_BATCHES]
        verdict, seconds = _research_dynamo(m)
        lines.append(
            f"{head} {m.get('conversion', {}).get('exporter') or 'n/a'} | {_research_fixes(m)} | "
            f"{m['parity_max_abs_diff']:.2e} | "
            + " | ".join(ratio)
            + f" | {_num(m.get('tfma_auc'))} | {_num(m.get('torch_eval_auc'))} | {verdict} | {seconds} |"
        )
    return lines


def _research_papers(r: dict) -> list[str]:
    return [f"- {m['model']}: {m['paper']}." for m in r["models"] if m.get("paper")]


def _research_section(r: dict) -> list[str]:
    errors = [
        f"- {m['model']}: {' '.join(m['error'][-600:].split())}"
        for m in r["models"]
        if "error" in m and "parity_max_abs_diff" in m
    ]
    return [
        "## 6b. Research model corpus (taxi sample, one pipeline run per model)",
        "",
        _research_caption(r),
        "",
        *research_table(r),
        "",
        *(["Measurements that failed after the run:", "", *errors, ""] if errors else []),
        "Papers:",
        "",
        *_research_papers(r),
        "",
        f"AUC: {r['auc_source']}.",
        "",
        *_fp16_lines(r),
        "",
    ]


def research_readme_table(out: Path | None = None) -> str:
    """The corpus table as a block of its own (section 6b of the results README has it), from
    ``<out>/research_zoo.json`` (default tests/bench/results):
    ``python -c "from tests.bench.report import research_readme_table; print(research_readme_table())"``."""
    r = json.loads(((out or Path(__file__).parent / "results") / f"{RESEARCH_RESULT}.json").read_text())
    return "\n".join([_research_caption(r), "", *research_table(r), "", *_research_papers(r)]) + "\n"


def _fp16_lines(r: dict) -> list[str]:
    """The fp16 variant per model: drift against FP32 on every eval row, the gate's verdict, latency."""
    batches = [str(b) for b in r["batch_sizes"]]
    lines = [
        "FP16 variant (`--serving-precision fp16`) against the FP32 network, every eval row, default drift "
        "limits; ms = median per call, fp16 / fp32 (ratio).",
        "",
        "| model | method | max abs diff | mean abs diff | flips | drift gate | "
        + " | ".join(f"ms at {b} (ratio)" for b in batches)
        + " |",
        "|---|---|---:|---:|---:|---|" + "---:|" * len(batches),
    ]
    for m in r["models"]:
        fp16 = m.get("fp16")
        if not fp16:
            continue
        if "error" in fp16:
            lines.append(f"| {m['model']} | no variant: {' '.join(fp16['error'][-160:].split())} |")
            continue
        f, lat = fp16["figures"], fp16["latency"]
        times = [
            f"{lat['fp16_network'][b]['median_ms']:.3f} / {lat['fp32_network'][b]['median_ms']:.3f} "
            f"({fp16['fp16_vs_fp32'][b]:.2f})"
            for b in batches
        ]
        verdict = "passed" if fp16["passed"] else "refused: " + "; ".join(fp16["violations"])
        lines.append(
            f"| {m['model']} | {fp16['method']} | {f.get('fp16_max_abs_diff', float('nan')):.2e} | "
            f"{f.get('fp16_mean_abs_diff', float('nan')):.2e} | {int(f.get('fp16_flips', 0))} | {verdict} | "
            + " | ".join(times)
            + " |"
        )
    return lines


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _plots(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "reference" in results:
        r = results["reference"]
        roles = [role for role, _, _ in STAGE_ROLES]
        ours = [role_seconds(r["ours"]["stages"], ids) for _, ids, _ in STAGE_ROLES]
        ref = [role_seconds(r["reference"]["stages"], ids) for _, _, ids in STAGE_ROLES]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        y = range(len(roles))
        ax.barh([i + 0.2 for i in y], ours, 0.4, label=f"torchtfx ({r['ours']['wall_seconds']:.0f} s wall)")
        ax.barh(
            [i - 0.2 for i in y], ref, 0.4, label=f"TFX taxi native Keras ({r['reference']['wall_seconds']:.0f} s wall)"
        )
        ax.set_yticks(list(y), roles)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (ML Metadata execution time)")
        ax.set_title("Stage times against the reference pipeline")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "stages_vs_reference.png", dpi=110)
        plt.close(fig)
    if "serving" in results:
        r = results["serving"]
        names = list(r["latency"])
        batches = sorted(next(iter(r["latency"].values())), key=int)
        fig, ax = plt.subplots(figsize=(8, 4))
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            ax.bar(
                [b + i * width for b in range(len(batches))],
                [r["latency"][name][b]["median_ms"] for b in batches],
                width,
                label=name,
            )
        ax.set_xticks([b + 0.4 - width / 2 for b in range(len(batches))], [f"batch {b}" for b in batches])
        ax.set_yscale("log")
        ax.set_ylabel("median ms per call (log)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "serving_latency.png", dpi=110)
        plt.close(fig)
    if "scale" in results:
        from tests.bench.report_scale import scale_plot

        scale_plot(results["scale"], out)


def _drop_stale(results: dict[str, dict], out: Path) -> None:
    from tests.bench.report_scale import is_current

    if "scale" in results and not is_current(results["scale"]):
        logger.info(
            "%s: left out of the report, written before scale ran the reference beside ours", out / "scale.json"
        )
        del results["scale"]


SCALE_NOTES = "scale_profile.md"


def write_report(out: Path) -> Path:
    results = _load(out)
    _drop_stale(results, out)
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`python -m tests.bench`); every target is a ratio against a reference run in the "
        "same command.",
        "",
    ]
    if "reference" in results:
        lines += _reference_section(results["reference"])
    lines += _trainer_sections(results)
    if "serving" in results:
        lines += _serving_section(results["serving"])
    if "predict" in results:
        lines += predict_section(results["predict"])
    if "scale" in results:
        lines += _scale_section(results["scale"])
    notes = out / SCALE_NOTES  # written by hand: what limits the slowest stage at scale, what was tried
    if notes.exists():
        lines += [notes.read_text().rstrip(), ""]
    if "zoo" in results:
        lines += _zoo_section(results["zoo"])
    if RESEARCH_RESULT in results:
        lines += _research_section(results[RESEARCH_RESULT])
    if "evaluator" in results:
        lines += evaluator_report_lines(results["evaluator"])
    if "serving_text" in results:
        lines += serving_text_section(results["serving_text"])
    if "pretrained_finetune" in results:
        lines += pretrained_finetune_section(results["pretrained_finetune"])
    if "serving_pretrained" in results:
        lines += serving_pretrained_section(results["serving_pretrained"])
    _plots(results, out)
    path = out / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path
