"""Dataset configuration: one YAML file plus a curated schema fully describe a dataset.

The pipeline, the Transform ``preprocessing_fn``, the model and the Evaluator slices are all built
from a :class:`DatasetConfig`; nothing downstream knows which dataset it is running on.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pydantic

from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.missing import (
    DEFAULT_MISSING_VALUES,
    LABEL_MISSING,
    REFUSE,
    checked_markers,
    optional_columns,
)
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import ServingConfig
from torchtfx.data.config.spans import SpanConfig
from torchtfx.data.config.strict import (
    ConfigError,
    FiniteFloat,
    StrictConfig,
    finite_number,
    load_yaml,
    one_of,
    whole_number,
)
from torchtfx.data.config.task import BINARY, MULTICLASS, REGRESSION, TASKS
from torchtfx.data.config.text import TextFeature, length_bucket_key, schema_problems, text_vocabulary_name
from torchtfx.data.resources import SCHEMA_FILE, datasets_dir, schemas_dir, shipped_schema

LABEL_OPS = ("greater", "greater_equal", "less", "less_equal", "equal", "in")
# The most characters one CSV cell may hold (``max_cell_chars``; csv's field_size_limit,
# data/csv_reader/sources.py). Python's own 131,072 refused a long text value outright; 1 Mi characters reads a
# long document and still bounds what a quote that never closes pulls into memory (at most 4 MiB as one str)
# before the reader names it.
MAX_CELL_CHARS = 1 << 20
MAX_CELL_CHARS_RANGE = (1 << 10, 1 << 30)
CellChars = whole_number(*MAX_CELL_CHARS_RANGE)
TRANSFORMED_SUFFIX = "_xf"
# ``sample``: the fraction of the CSV's rows that ExampleGen keeps, chosen by a hash of each row (the same rows every
# run, whatever the files' order); 1 keeps every row. For a first look at a large dataset, or a model too slow to
# train on all of it on the machine at hand (data/datasets/movie_reviews_minilm.yaml).
SampleFraction = finite_number(above=0)


def _a_fraction(value: float) -> float:
    if value > 1:
        raise ValueError(f"must be a fraction of the rows, > 0 and <= 1 (1 keeps them all), got {value:g}")
    return value


# Quantile buckets of one bucketized feature: at least 2 (one bucket is a constant); at most 10,000, where each
# bucket of even 10M rows holds 1,000 and its embedding row is trained on them (1e9 was accepted, issue #41).
BucketCount = whole_number(2, 10_000)
_SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


# The trainer hyperparameters a dataset YAML may hold under ``trainer:`` (a training recipe for its model: a
# pretrained encoder fine-tunes at ~1e-5 with warmup, not at the tabular default of 3e-3); their bounds are
# TrainerHParams', checked when the settings are resolved (pipeline/settings/resolve.py).
DATASET_TRAINER_KEYS = (
    "epochs",
    "batch_size",
    "learning_rate",
    "head_learning_rate",
    "weight_decay",
    "optimizer",
    "lr_schedule",
    "warmup_ratio",
    "grad_clip_norm",
    "early_stopping_patience",
)


def _trainer_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(recipe) - set(DATASET_TRAINER_KEYS))
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} cannot be set in a dataset YAML; it may hold "
            f"{', '.join(DATASET_TRAINER_KEYS)} (the others: pools.yaml or the command line)"
        )
    return recipe


class DatasetConfigError(ConfigError):
    """The dataset config file is malformed or inconsistent."""


class _DatasetSection(StrictConfig):
    config_error = DatasetConfigError


class LabelRule(_DatasetSection):
    """How the label is derived from raw columns; which fields apply depends on the dataset's ``task``.

    - binary: ``column <op> threshold`` (times ``relative_to`` when set), or ``column in positive_values``.
      A row whose ``column`` (or ``relative_to``) is missing (no value, NaN, or an empty string) is refused under
      ``missing: refuse`` (the default); ``missing: negative`` gives it label 0 instead (data/config/missing.py).
    - multiclass: the ``num_classes`` most frequent values of the categorical ``column`` in the analyzed
      (train) data are the classes, ids in TFT's vocabulary order. There is no OOV class: a row whose
      label is missing or not one of the classes is refused (weight 0: neither trained nor evaluated).
    - regression: the numeric ``column``, trained on ``log1p(column)`` when ``log1p`` is set (predictions
      are served and evaluated in the column's own units). Rows with a missing or non-finite target, or a
      negative one under ``log1p``, are refused.
    """

    model_config = pydantic.ConfigDict(coerce_numbers_to_str=True)  # positive_values: [1, 2] means "1", "2"

    name: str
    column: str
    op: str = "greater"
    threshold: FiniteFloat = 0.0  # .nan was accepted and made every label 0
    relative_to: str | None = None
    positive_values: tuple[str, ...] = ()
    num_classes: int | None = pydantic.Field(None, ge=2)
    log1p: bool = False
    missing: str = REFUSE  # binary: refuse | negative

    _known_op = one_of("op", LABEL_OPS, "label op")
    _known_missing = one_of("missing", LABEL_MISSING, "label.missing")

    @pydantic.model_validator(mode="after")
    def _membership_rule(self) -> LabelRule:
        if self.op == "in" and not self.positive_values:
            raise ValueError("label op 'in' needs a non-empty 'positive_values' list")
        if self.op == "in" and self.relative_to:
            raise ValueError("label op 'in' cannot be combined with 'relative_to'")
        return self

    def problems_for(self, task: str) -> list[str]:
        """Fields that do not apply to ``task`` (compared with their defaults, so a JSON round trip passes)."""
        binary_only = {"op": "greater", "threshold": 0.0, "relative_to": None, "positive_values": ()}
        binary_only["missing"] = REFUSE  # multiclass and regression always refuse a missing label
        applies = {
            BINARY: set(binary_only),
            MULTICLASS: {"num_classes"},
            REGRESSION: {"log1p"},
        }[task]
        defaults = {**binary_only, "num_classes": None, "log1p": False}
        stray = [k for k, default in defaults.items() if k not in applies and getattr(self, k) != default]
        problems = [f"label.{k} does not apply to a {task} task" for k in stray]
        if task == MULTICLASS and self.num_classes is None:
            problems.append("a multiclass label needs 'num_classes' (how many of the column's values are classes)")
        return problems

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return (self.column,) + ((self.relative_to,) if self.relative_to else ())


Split = dict[str, pydantic.PositiveInt]


def _train_and_eval(split: Split) -> Split:
    if set(split) != {"train", "eval"}:
        raise ValueError(f"'split' must map exactly 'train' and 'eval' to hash buckets, got {split!r}")
    return {"train": split["train"], "eval": split["eval"]}


class DatasetConfig(_DatasetSection):
    """Features, label rule, split, slices and gates of one dataset, resolved: what the executors get as JSON."""

    name: str
    schema_path: Path
    task: str = BINARY
    dense: tuple[str, ...]
    categorical: tuple[str, ...]
    bucketized: dict[str, BucketCount]
    text: dict[str, TextFeature] = {}
    label: LabelRule
    split: Split
    slices: tuple[tuple[str, ...], ...]
    vocab_top_k: pydantic.PositiveInt = 1000
    vocab_num_oov_buckets: pydantic.NonNegativeInt = 10
    defaults: dict[str, Any] = {}
    missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES
    max_cell_chars: CellChars = MAX_CELL_CHARS
    # ExampleGen's alone (its custom_config): left out of the JSON the other components receive.
    sample: float = pydantic.Field(1.0, exclude=True)
    # The label columns the curated schema lets be missing, read when the config is loaded; None: not read, so
    # every label column may be missing. A binary label refuses rows only where a value can be missing.
    optional_label_columns: tuple[str, ...] | None = None
    source_package: str | None = None
    source_path: str | None = None
    gates: GateConfig = GateConfig()
    # The YAML's model choice, a default for the Trainer's hyperparameters. Left out of the JSON that
    # Transform and the other components receive: a new model must not invalidate Transform's cache.
    model: ModelConfig = pydantic.Field(ModelConfig(), exclude=True)
    # The YAML's serving precision, a default for the Trainer's; left out of the JSON for the same reason.
    serving: ServingConfig = pydantic.Field(ServingConfig(), exclude=True)
    # The YAML's trainer hyperparameters (DATASET_TRAINER_KEYS), defaults for the Trainer's; left out likewise.
    trainer: dict[str, Any] = pydantic.Field({}, exclude=True)
    # How the data root holds spans (data/config/spans.py); None: its *.csv files are one input. ExampleGen's alone.
    spans: SpanConfig | None = pydantic.Field(None, exclude=True)

    _split = pydantic.field_validator("split")(staticmethod(_train_and_eval))

    _sample = pydantic.field_validator("sample")(staticmethod(_a_fraction))
    _missing_values = pydantic.field_validator("missing_values", mode="before")(staticmethod(checked_markers))
    _known_task = one_of("task", TASKS, "task")

    @pydantic.model_serializer(mode="wrap")
    def _without_empty_text(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A dataset without text features writes the JSON it wrote before they existed: Transform's cache key
        (the JSON is an execution property) and the compiled Kubeflow spec stay as they were."""
        data = handler(self)
        if not self.text:
            data.pop("text", None)
        if self.max_cell_chars == MAX_CELL_CHARS:  # the same for max_cell_chars, read by ExampleGen's checks
            data.pop("max_cell_chars", None)
        return data

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> DatasetConfig:
        names = self.raw_feature_columns
        problems = self._overlaps()
        if not names:
            problems.append("no features configured (dense, categorical, bucketized or text)")
        if self.label.column in names:
            problems.append(f"label column {self.label.column!r} is also a feature (label leak)")
        sliceable = names + tuple(length_bucket_key(k) for k in self.text)
        for slice_keys in self.slices:
            unknown = [k for k in slice_keys if k not in sliceable]
            if unknown:
                problems.append(f"slice {list(slice_keys)} names unknown features {unknown}")
        problems += self.label.problems_for(self.task) + self.gates.problems_for(self.task)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _overlaps(self) -> list[str]:
        """A column listed under two kinds (or twice under one), and Transform vocabularies that share a file."""
        kinds = {
            "dense": self.dense,
            "categorical": self.categorical,
            "bucketized": tuple(self.bucketized),
            "text": tuple(self.text),
        }
        listed: dict[str, list[str]] = {}
        for kind, keys in kinds.items():
            for key in keys:
                listed.setdefault(key, []).append(kind)
        twice = {k: v for k, v in listed.items() if len(v) > 1}
        problems = []
        if twice:
            where = ", ".join(f"{k} ({' and '.join(v)})" for k, v in sorted(twice.items()))
            problems.append(f"features listed more than once: {where}; list each column under one kind")
        vocabularies = [text_vocabulary_name(k) for k in self.text]
        clash = sorted(set(vocabularies) & (set(self.categorical) | {self.label_vocabulary}))
        if clash:
            problems.append(
                f"the text vocabularies {clash} have the names of categorical vocabularies; rename the "
                "categorical column or the text column"
            )
        return problems

    @property
    def embedded_features(self) -> tuple[str, ...]:
        """Features that enter the model as integer ids (categorical, then bucketized by name).

        Bucketized features are sorted: the config reaches the executors as JSON with sorted keys, so a
        config read from YAML must give the same order, or a model would be fed its columns shuffled."""
        return self.categorical + tuple(sorted(self.bucketized))

    @property
    def raw_feature_columns(self) -> tuple[str, ...]:
        return self.dense + self.categorical + tuple(self.bucketized) + tuple(self.text)

    @property
    def evaluation_slices(self) -> tuple[tuple[str, ...], ...]:
        """The Evaluator's slices besides the overall one: the configured ones, then one per text feature by its
        token count (:func:`length_bucket_key`), unless the config lists that one already."""
        added = tuple((length_bucket_key(k),) for k in sorted(self.text))
        return self.slices + tuple(s for s in added if s not in self.slices)

    @property
    def label_key(self) -> str:
        """The training target: a 0/1 label, a class id, or the (log1p of the) regression target."""
        return transformed_name(self.label.name)

    @property
    def refuses_missing_labels(self) -> bool:
        """Whether a row can be refused for its label: always for multiclass and regression; for binary under
        ``label.missing: refuse`` when the curated schema lets a label column be missing (a column it requires
        cannot be: Transform reads it dense, and a row without it stops the run)."""
        if self.task != BINARY:
            return True
        return self.label.missing == REFUSE and self.optional_label_columns != ()

    @property
    def label_weight_key(self) -> str | None:
        """1.0 for rows with a usable label, 0.0 for refused ones; None where no row can be refused (binary with
        required label columns, or ``label.missing: negative``: the transform output and EvalConfig of before)."""
        return transformed_name(self.label.name + "_weight") if self.refuses_missing_labels else None

    @property
    def eval_label_key(self) -> str:
        """What TFMA compares predictions with: the target in the units the model serves."""
        if self.task == REGRESSION and self.label.log1p:
            return transformed_name(self.label.name + "_original")
        return self.label_key

    @property
    def label_vocabulary(self) -> str | None:
        """The TFT vocabulary file of a multiclass label's classes."""
        return f"label_{self.label.name}" if self.task == MULTICLASS else None


def transformed_name(key: str) -> str:
    return key + TRANSFORMED_SUFFIX


def _inside(base: Path, relative: Path, key: str) -> Path:
    """``base / relative``, normalized; a relative path may not climb out of ``base`` with '..'."""
    resolved = Path(os.path.normpath(base / relative))
    if resolved != base and base not in resolved.parents:
        raise ValueError(f"'{key}' {str(relative)!r} points outside {base}; relative paths stay inside it")
    return resolved


# -- the YAML file: data/datasets/<name>.yaml ----------------------------------------------------------------
class _Features(_DatasetSection):
    dense: tuple[str, ...] = ()  # z-scored floats
    categorical: tuple[str, ...] = ()  # vocabulary + OOV buckets -> embedding
    bucketized: dict[str, BucketCount] = {}  # quantile buckets -> embedding
    text: dict[str, TextFeature] = {}  # tokens -> ids [max_length] (data/config/text.py)


class _Vocabulary(_DatasetSection):
    top_k: int = 1000
    num_oov_buckets: int = 10


class _Source(_DatasetSection):
    """Where the default data lives: a file inside an installed Python package (the taxi CSV in tfx)."""

    package: str | None = None
    path: str | None = None

    @pydantic.field_validator("path")
    @classmethod
    def _relative_to_package(cls, value: str | None) -> str | None:
        if not value:
            return None
        relative = Path(value)
        if relative.is_absolute():
            raise ValueError(f"'source.path' must be relative, got {value!r}")
        _inside(Path("/package"), relative, "source.path")
        return relative.as_posix()


class DatasetFile(_DatasetSection):
    """The dataset YAML as written; :func:`load_dataset_config` resolves it into a :class:`DatasetConfig`."""

    name: str
    task: str = BINARY  # binary, multiclass or regression: decides the label rule, loss, outputs and gates
    # A shipped schema (relative: schema/<dataset>/schema.pbtxt) or one of the user's (absolute); default: the
    # shipped schema/<name>/schema.pbtxt.
    schema_file: Path | None = pydantic.Field(None, alias="schema")
    features: _Features = _Features()
    vocabulary: _Vocabulary = _Vocabulary()
    defaults: dict[str, Any] = {}  # fill values for missing inputs; unlisted features default to 0 / ""
    # text that means "no value" in a numeric column (data/config/missing.py); an empty cell always does
    missing_values: tuple[str, ...] = DEFAULT_MISSING_VALUES
    # the most characters one CSV cell may hold; a longer one stops the run by file and line
    max_cell_chars: CellChars = MAX_CELL_CHARS
    sample: SampleFraction = 1.0  # the fraction of rows ExampleGen keeps (SampleFraction)
    label: LabelRule
    split: Split = {"train": 2, "eval": 1}
    slices: tuple[tuple[str, ...], ...] = ()
    source: _Source = _Source()
    gates: GateConfig = GateConfig()
    model: ModelConfig = ModelConfig()  # factory + hparams; --model / --model-hparam override it
    serving: ServingConfig = ServingConfig()  # precision + drift limits; --serving-precision overrides it
    trainer: dict[str, Any] = {}  # learning_rate, warmup_ratio, ... (DATASET_TRAINER_KEYS); --learning-rate, ...
    spans: SpanConfig | None = None  # pattern + window: the data root holds a folder per span (data/spans/)

    _split = pydantic.field_validator("split")(staticmethod(_train_and_eval))

    _sample = pydantic.field_validator("sample")(staticmethod(_a_fraction))
    _trainer = pydantic.field_validator("trainer")(staticmethod(_trainer_recipe))
    _missing_values = pydantic.field_validator("missing_values", mode="before")(staticmethod(checked_markers))

    @pydantic.field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        """The dataset name becomes folder and pipeline names (serving/<name>, torchtfx-<name>)."""
        if not _SAFE_NAME.match(name):
            raise ValueError(f"name {name!r} must be lowercase letters, digits, '-' or '_' (it names folders)")
        return name

    @pydantic.field_validator("schema_file")
    @classmethod
    def _shipped_or_absolute(cls, schema: Path | None) -> Path | None:
        if schema is None or schema.is_absolute():
            return schema
        return shipped_schema(schema, "schema")

    def resolve(self) -> DatasetConfig:
        features = self.features
        schema_path = self.schema_file or schemas_dir() / self.name / SCHEMA_FILE
        return DatasetConfig(
            name=self.name,
            task=self.task,
            schema_path=schema_path,
            dense=features.dense,
            categorical=features.categorical,
            bucketized=features.bucketized,
            text=features.text,
            label=self.label,
            split=self.split,
            slices=self.slices,
            vocab_top_k=self.vocabulary.top_k,
            vocab_num_oov_buckets=self.vocabulary.num_oov_buckets,
            defaults=self.defaults,
            missing_values=self.missing_values,
            max_cell_chars=self.max_cell_chars,
            sample=self.sample,
            optional_label_columns=_optional_label_columns(schema_path, self.label),
            source_package=self.source.package,
            source_path=self.source.path,
            gates=self.gates,
            model=self.model,
            serving=self.serving,
            trainer=self.trainer,
            spans=self.spans,
        )


def _optional_label_columns(schema_path: Path, label: LabelRule) -> tuple[str, ...] | None:
    """The label columns the curated schema lets be missing (None while the schema cannot be read: the loader
    names a missing file; a malformed one is named here)."""
    if not schema_path.is_file():
        return None
    try:
        return optional_columns(schema_path, label.raw_columns)
    except ValueError as err:
        raise DatasetConfigError(str(err)) from None


def dataset_yaml_path(name_or_path: str | Path) -> Path:
    """The YAML file of a shipped dataset's name (``data/datasets/<name>.yaml``, package data of
    ``torchtfx.data``) or of an explicit ``.yaml`` path; a clear error naming the known datasets if none."""
    path = Path(name_or_path)
    shipped = datasets_dir()
    known = ", ".join(sorted(p.stem for p in shipped.glob("*.yaml")))
    if path.suffix not in (".yaml", ".yml"):
        path = shipped / f"{name_or_path}.yaml"
        if not path.is_file():
            raise DatasetConfigError(
                f"dataset {str(name_or_path)!r} is not shipped with torchtfx (known datasets: "
                f"{known}); give the path of a dataset YAML (.yaml) instead"
            )
    if not path.is_file():
        raise DatasetConfigError(f"dataset config {path} not found; known datasets: {known}")
    return path


def load_dataset_config(name_or_path: str | Path) -> DatasetConfig:
    """Load a shipped dataset by name or an explicit YAML path (:func:`dataset_yaml_path`), and validate it."""
    path = dataset_yaml_path(name_or_path)
    parsed = DatasetFile.parse(load_yaml(path, DatasetConfigError), str(path))
    try:
        cfg = parsed.resolve()
    except DatasetConfigError as err:
        raise DatasetConfigError(f"{path}: {err}") from None
    if not cfg.schema_path.is_file():
        raise DatasetConfigError(f"{path}: schema file {cfg.schema_path} does not exist")
    problems = schema_problems(cfg.schema_path, tuple(cfg.text))  # the schema parsed in resolve()
    if problems:
        raise DatasetConfigError(f"{path}: " + "; ".join(problems))
    return cfg
