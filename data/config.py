"""Dataset configuration: one YAML file plus a curated schema fully describe a dataset.

The pipeline, the Transform ``preprocessing_fn``, the model and the Evaluator slices are all built
from a :class:`DatasetConfig`; nothing downstream knows which dataset it is running on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATASETS_DIR = Path(__file__).resolve().parent / "datasets"

LABEL_OPS = ("greater", "greater_equal", "less", "less_equal", "equal", "in")
TRANSFORMED_SUFFIX = "_xf"


class DatasetConfigError(ValueError):
    """The dataset config file is malformed or inconsistent."""


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """How the binary label is derived from raw columns.

    ``column <op> threshold`` (times ``relative_to`` when set), or ``column in positive_values``.
    Rows whose ``column`` (or ``relative_to``) is missing get label 0.
    """

    name: str
    column: str
    op: str = "greater"
    threshold: float = 0.0
    relative_to: str | None = None
    positive_values: tuple[str, ...] = ()

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return (self.column,) + ((self.relative_to,) if self.relative_to else ())


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """Features, label rule, split and slices of one dataset."""

    name: str
    schema_path: Path
    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    bucketized: dict[str, int]
    label: LabelRule
    split: dict[str, int]
    slices: tuple[tuple[str, ...], ...]
    vocab_top_k: int = 1000
    vocab_num_oov_buckets: int = 10
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    source_package: str | None = None
    source_path: str | None = None
    gates: dict[str, Any] = dataclasses.field(default_factory=dict)  # see torchtfx.pipeline.gates.GateConfig

    @property
    def embedded_features(self) -> tuple[str, ...]:
        """Features that enter the model as integer ids (categorical, then bucketized by name).

        Bucketized features are sorted: the config reaches the executors as JSON with sorted keys, so a
        config read from YAML must give the same order, or a model would be fed its columns shuffled."""
        return self.categorical + tuple(sorted(self.bucketized))

    @property
    def raw_feature_columns(self) -> tuple[str, ...]:
        return self.dense + self.categorical + tuple(self.bucketized)

    @property
    def label_key(self) -> str:
        return transformed_name(self.label.name)

    def to_json(self) -> str:
        """Serialize for TFX ``custom_config`` (execution properties must be JSON)."""
        payload = dataclasses.asdict(self)
        payload["schema_path"] = str(self.schema_path)
        return json.dumps(payload, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DatasetConfig:
        raw = json.loads(text)
        raw["schema_path"] = Path(raw["schema_path"])
        raw["label"] = LabelRule(**{**raw["label"], "positive_values": tuple(raw["label"]["positive_values"])})
        for key in ("dense", "categorical"):
            raw[key] = tuple(raw[key])
        raw["slices"] = tuple(tuple(s) for s in raw["slices"])
        return cls(**raw)


def transformed_name(key: str) -> str:
    return key + TRANSFORMED_SUFFIX


def _as_names(value: Any, field: str, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetConfigError(f"{path}: '{field}' must be a list of column names, got {value!r}")
    return tuple(value)


def _parse_label(raw: Any, path: Path) -> LabelRule:
    if not isinstance(raw, dict) or "column" not in raw or "name" not in raw:
        raise DatasetConfigError(f"{path}: 'label' needs at least 'name' and 'column', got {raw!r}")
    op = raw.get("op", "greater")
    if op not in LABEL_OPS:
        raise DatasetConfigError(f"{path}: label op {op!r} is not one of {', '.join(LABEL_OPS)}")
    positive = tuple(str(v) for v in raw.get("positive_values", ()))
    if op == "in" and not positive:
        raise DatasetConfigError(f"{path}: label op 'in' needs a non-empty 'positive_values' list")
    if op == "in" and raw.get("relative_to"):
        raise DatasetConfigError(f"{path}: label op 'in' cannot be combined with 'relative_to'")
    return LabelRule(
        name=str(raw["name"]),
        column=str(raw["column"]),
        op=op,
        threshold=float(raw.get("threshold", 0.0)),
        relative_to=raw.get("relative_to"),
        positive_values=positive,
    )


def _parse_split(raw: Any, path: Path) -> dict[str, int]:
    split = raw if raw is not None else {"train": 2, "eval": 1}
    if not isinstance(split, dict) or set(split) != {"train", "eval"}:
        raise DatasetConfigError(f"{path}: 'split' must map exactly 'train' and 'eval' to hash buckets, got {raw!r}")
    if not all(isinstance(v, int) and v > 0 for v in split.values()):
        raise DatasetConfigError(f"{path}: 'split' hash buckets must be positive integers, got {split!r}")
    return {"train": split["train"], "eval": split["eval"]}


def _check_consistency(cfg: DatasetConfig, path: Path) -> None:
    names = cfg.raw_feature_columns
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DatasetConfigError(f"{path}: features listed more than once: {', '.join(duplicates)}")
    if not names:
        raise DatasetConfigError(f"{path}: no features configured (dense, categorical or bucketized)")
    if cfg.label.column in names:
        raise DatasetConfigError(f"{path}: label column {cfg.label.column!r} is also a feature (label leak)")
    bad_buckets = {k: v for k, v in cfg.bucketized.items() if not isinstance(v, int) or v < 2}
    if bad_buckets:
        raise DatasetConfigError(f"{path}: bucket counts must be integers >= 2, got {bad_buckets!r}")
    for slice_keys in cfg.slices:
        unknown = [k for k in slice_keys if k not in names]
        if unknown:
            raise DatasetConfigError(f"{path}: slice {list(slice_keys)} names unknown features {unknown}")
    if not cfg.schema_path.is_file():
        raise DatasetConfigError(f"{path}: schema file {cfg.schema_path} does not exist")


_SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def _safe_name(value: object, path: Path) -> str:
    """The dataset name becomes folder and pipeline names (serving/<name>, torchtfx-<name>)."""
    name = str(value)
    if not _SAFE_NAME.match(name):
        raise DatasetConfigError(
            f"{path}: name {name!r} must be lowercase letters, digits, '-' or '_' (it names folders)"
        )
    return name


def _inside(base: Path, relative: Path, key: str, path: Path) -> Path:
    """``base / relative``, normalized; a relative path may not climb out of ``base`` with '..'."""
    if relative.is_absolute() and key != "schema":
        raise DatasetConfigError(f"{path}: '{key}' must be relative, got {str(relative)!r}")
    resolved = Path(os.path.normpath(base / relative))
    if resolved != base and base not in resolved.parents:
        raise DatasetConfigError(
            f"{path}: '{key}' {str(relative)!r} points outside {base}; relative paths stay inside it"
        )
    return resolved


def _package_relative(value: object, path: Path) -> str | None:
    """A file inside the source package: relative, and no '..' out of it."""
    if not value:
        return None
    relative = Path(str(value))
    _inside(Path("/package"), relative, "source.path", path)
    return relative.as_posix()


def load_dataset_config(name_or_path: str | Path) -> DatasetConfig:
    """Load ``data/datasets/<name>.yaml`` or an explicit YAML path and validate it."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = DATASETS_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in DATASETS_DIR.glob("*.yaml"))
        raise DatasetConfigError(f"dataset config {path} not found; known datasets: {', '.join(known)}")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict) or "name" not in raw:
        raise DatasetConfigError(f"{path}: expected a mapping with at least 'name'")
    features = raw.get("features") or {}
    vocab = raw.get("vocabulary") or {}
    source = raw.get("source") or {}
    name = _safe_name(raw["name"], path)
    schema = Path(raw.get("schema", f"schema/{name}/schema.pbtxt"))
    source_path = _package_relative(source.get("path"), path)
    cfg = DatasetConfig(
        name=name,
        schema_path=schema if schema.is_absolute() else _inside(PROJECT_ROOT, schema, "schema", path),
        dense=_as_names(features.get("dense"), "features.dense", path),
        categorical=_as_names(features.get("categorical"), "features.categorical", path),
        bucketized=dict(features.get("bucketized") or {}),
        label=_parse_label(raw.get("label"), path),
        split=_parse_split(raw.get("split"), path),
        slices=tuple(tuple(_as_names(s, "slices", path)) for s in raw.get("slices") or ()),
        vocab_top_k=int(vocab.get("top_k", 1000)),
        vocab_num_oov_buckets=int(vocab.get("num_oov_buckets", 10)),
        defaults=dict(raw.get("defaults") or {}),
        source_package=source.get("package"),
        source_path=source_path,
        gates=dict(raw.get("gates") or {}),
    )
    _check_consistency(cfg, path)
    return cfg
