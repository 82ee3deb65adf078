"""The results README's pretrained-checkpoint sections (issue 43): the MiniLM fine-tune against the from-scratch
text_transformer on the same split (``pretrained_finetune.json``), and the served signature's latency against
``tokenizers`` + onnxruntime and ``tokenizers`` + PyTorch eager (``serving_pretrained.json``)."""

from __future__ import annotations

from tests.bench.report_parts import met

_SCOPES = {
    "sample": "the MiniLM YAML's sample of the reviews",
    "full": "every review (MiniLM for one epoch: `FULL_EPOCHS` in tests/bench/pretrained_finetune_bench.py)",
}


def _auc(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def pretrained_finetune_section(r: dict) -> list[str]:
    """Per scope run: AUC (the Evaluator's, and the Trainer's PyTorch eval AUC), eval rows and wall for both
    models, and the target (MiniLM's AUC above text_transformer's on the same split)."""
    lines = [
        "## 9. Pretrained checkpoint: MiniLM fine-tuned against text_transformer from scratch",
        "",
        "`torchtfx run --dataset movie_reviews_minilm` (all-MiniLM-L6-v2 fine-tuned with the YAML's recipe, its "
        "WordPiece tokenizer in the served graph) and `torchtfx run --dataset movie_reviews` (`text_transformer`, "
        "its own words tokenizer, from scratch), each from a cold pipeline root on the same rows and split; AUC: "
        "the Evaluator's (TFMA, eval split, Overall); wall: the whole command on this machine's "
        f"{r.get('machine', {}).get('cpus', '?')} cores.",
        "",
    ]
    for scope, caption in _SCOPES.items():
        if scope not in r:
            continue
        found = r[scope]
        lines += [
            f"On {caption}:",
            "",
            "| model | sample | eval rows | AUC | Trainer's eval AUC | wall (min) | Trainer (min) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name in ("minilm", "text_transformer"):
            run = found[name]
            trainer = run.get("trainer_seconds")
            lines.append(
                f"| {run['model']} ({run['dataset'].rsplit('/', 1)[-1]}) | {run['sample']:g} | "
                f"{run['eval_examples']:,} | {_auc(run['tfma_auc'])} | {_auc(run['torch_eval_auc'])} | "
                f"{run['wall_seconds'] / 60:.1f} | {'n/a' if trainer is None else f'{trainer / 60:.1f}'} |"
            )
        gain = found.get("auc_gain")
        lines += [
            "",
            f"Target: MiniLM's AUC above text_transformer's on the same split: "
            f"{'n/a' if gain is None else f'{gain:+.4f}'}: {met(bool(found['met']))}.",
            "",
        ]
    if "full" not in r:
        lines += [
            "Every review: not run here (`python -m tests.bench --only pretrained_finetune --pretrained-full`).",
            "",
        ]
    return lines


_COLUMNS = ("savedmodel_signature_session", "savedmodel_signature", "hf_onnxruntime", "hf_torch")


def _cell(latency: dict, name: str, batch: str) -> str:
    found = latency.get(name, {}).get(batch)
    return "n/a" if found is None else f"{found['median_ms']:.2f}"


def _ratio(found: dict, key: str, batch: str, target: float) -> str:
    ratio = found.get(key, {}).get(batch)
    return "n/a" if ratio is None else f"{ratio:.2f}x{'' if ratio <= target else ' (**not met**)'}"


def _network_ratio(latency: dict, batch: str) -> str:
    """The converted network's median over onnxruntime's, both alone on the same ids (not judged)."""
    ours, theirs = (latency.get(name, {}).get(batch) for name in ("converted_network", "onnxruntime_network"))
    return "n/a" if not ours or not theirs else f"{ours['median_ms'] / theirs['median_ms']:.2f}x"


def serving_pretrained_section(r: dict) -> list[str]:
    """Median ms per call of each runtime at every length and batch, and ours over each Hugging Face path beside
    its target."""
    targets, runtime = r["targets"], r["target_runtime"]
    lines = [
        "## 10. Pretrained checkpoint: serving latency (raw text in, probabilities out)",
        "",
        f"`{r['dataset']}`'s model ({r['checkpoint']} fine-tuned), median ms per call over {r['rounds']} "
        f"interleaved rounds, {r['threads']} threads for every runtime (TensorFlow's pools, onnxruntime's intra-op, "
        "torch.set_num_threads; `tokenizers` its default), eval reviews cut to exactly the length in word pieces "
        "([CLS] and [SEP] included). Tokenization is in every judged column:",
        "",
        *(f"- `{name}`: {label}." for name, label in r["runtimes"].items()),
        "",
        f"Judged on `{runtime}`: ours / `hf_onnxruntime` ≤ {targets['vs_onnxruntime']}x and ours / `hf_torch` ≤ "
        f"{targets['vs_torch']}x at every batch and length.",
        "",
        "| tokens | batch | ours, C API | ours, Python | tokenizers + onnxruntime | tokenizers + torch | ours / ORT "
        "| ours / torch | network alone: ours / ORT |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for length, found in r["by_length"].items():
        latency = found["latency"]
        for batch in map(str, r["batch_sizes"]):
            cells = " | ".join(_cell(latency, name, batch) for name in _COLUMNS)
            lines.append(
                f"| {length} | {batch} | {cells} | {_ratio(found, 'vs_onnxruntime', batch, targets['vs_onnxruntime'])} "
                f"| {_ratio(found, 'vs_torch', batch, targets['vs_torch'])} | {_network_ratio(latency, batch)} |"
            )
    diffs = "; ".join(
        f"{length} tokens: " + ", ".join(f"{k} {v:.1e}" for k, v in found["max_abs_diff_vs_torch"].items())
        for length, found in r["by_length"].items()
    )
    verdict = r["met"]
    lines += [
        "",
        f"Targets: ≤ {targets['vs_onnxruntime']}x onnxruntime: {met(verdict['vs_onnxruntime'])}; ≤ "
        f"{targets['vs_torch']}x torch: {met(verdict['vs_torch'])}. Largest difference from `hf_torch`'s "
        f"probabilities at batch {max(r['batch_sizes'])}: {diffs}.",
        "",
    ]
    if r.get("c_api_unavailable"):
        lines += [f"The C API harness could not run here ({r['c_api_unavailable']}): judged on the Python call.", ""]
    return lines
