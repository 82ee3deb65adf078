"""Every setting a user may give, declared once: its key, its one default, and where each layer holds it.

A setting is given on the command line, in the Kubeflow configuration (``pools.yaml``), or in the dataset YAML,
and the first of these that holds it wins (:mod:`torchtfx.pipeline.settings.resolve`); else its default, which is
read from the typed config that carries the value (``TrainerHParams``, ``GateConfig``, ...), so a default is
written in one place. The command line's options are made from this table (``pipeline/cli/setting_options.py``),
and ``torchtfx config show`` prints it, with where each value came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchtfx.components.promoter.public import LABEL_CONFIRMATIONS, SETTING_FLAG, STAGED
from torchtfx.components.shared.mlflow_client import FAIL_IF_UNREACHABLE, UNREACHABLE_POLICIES
from torchtfx.components.torch_trainer.public import TrainerHParams
from torchtfx.data.config.dataset import DATASET_TRAINER_KEYS
from torchtfx.data.config.gates import GateConfig
from torchtfx.data.config.model import ModelConfig
from torchtfx.data.config.serving_precision import PRECISIONS, DriftLimits, ServingConfig
from torchtfx.pipeline.settings.beam_args import BEAM_MODE_AUTO, BEAM_MODES, BeamSettings

LOCAL = "local"  # `torchtfx run`
KUBEFLOW = "kubeflow"  # `torchtfx compile`
BOTH = (LOCAL, KUBEFLOW)
DEFAULT_DATASET = "taxi"
DEFAULT_PIPELINE_ROOT = Path("runs/local")
DEFAULT_BEAM_WORKERS = BeamSettings.default_of("workers")


@dataclass(frozen=True)
class Option:
    """The command line's option for a setting. ``kind``: how its text is read (pipeline/cli/setting_options.py):
    text, int, float, path, auto_or_int, non_negative_int, positive_int, choice, flag, no_flag, pairs."""

    flag: str
    kind: str
    help: str = ""
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Setting:
    key: str  # where the resolved value lives: "trainer.epochs" is TrainerHParams.epochs
    default: Any
    option: Option | None = None
    pools: str | None = None  # its key path in pools.yaml
    dataset: str | None = None  # its key path in the dataset YAML
    runs: tuple[str, ...] = BOTH
    default_text: str = ""  # how help texts name a default that is computed at run time

    @property
    def default_shown(self) -> str:
        return self.default_text or ("none" if self.default is None else str(self.default))


# Trainer hyperparameters that have their own option; every other TrainerHParams field is set in pools.yaml.
_TRAINER_OPTIONS = {
    "epochs": Option("--epochs", "positive_int"),
    "batch_size": Option("--batch-size", "positive_int"),
    "learning_rate": Option(
        "--learning-rate",
        "float",
        "The learning rate; with a pretrained transformers encoder, the encoder's (see --head-learning-rate).",
    ),
    "head_learning_rate": Option(
        "--head-learning-rate",
        "float",
        "The learning rate of every parameter outside a pretrained transformers encoder (the new head, tabular "
        "embeddings); none: --learning-rate.",
    ),
    "warmup_ratio": Option(
        "--warmup-ratio",
        "float",
        "The first fraction of all planned steps (0 <= x < 1) raises the learning rate linearly from 0.",
    ),
    "lr_schedule": Option(
        "--lr-schedule",
        "choice",
        "After the warmup: constant, or a cosine or linear decay to 0 over the remaining steps.",
        ("constant", "cosine", "linear"),
    ),
    "seed": Option("--seed", "int"),
    "num_workers": Option(
        "--num-workers",
        "auto_or_int",
        "DDP processes; auto: one worker in the pipeline's own "
        "process below 50,000 training rows, else one per GPU, or 2 on CPU.",
    ),
    "sync_every": Option(
        "--sync-every",
        "auto_or_int",
        "DDP: 1 all-reduces gradients every step; N > 1 averages "
        "parameters every N steps (local SGD); auto: 1 on GPUs, 16 on CPU.",
    ),
    "max_restarts": Option(
        "--max-restarts",
        "non_negative_int",
        "DDP: how many times torchrun restarts the workers after one dies; they resume from the last checkpoint.",
    ),
    "detect_anomaly": Option(
        "--detect-anomaly", "flag", "torch.autograd anomaly detection: name the op where NaN appears."
    ),
    "device": Option(
        "--device",
        "choice",
        "auto: train on CUDA when torch can use it, else the CPU (the console says which, and why not CUDA on a "
        "GPU node); cuda: require it (the run stops at once, naming torch's reason and the driver it needs); cpu.",
        ("auto", "cuda", "cpu"),
    ),
    "class_weights": Option(
        "--class-weights",
        "choice",
        "Multiclass: balanced weighs class k by n / (K n_k) in the training loss (rare classes count more).",
        ("none", "balanced"),
    ),
}
# Declared on their own (model.*, serving.*): the dataset YAML holds them too.
_TRAINER_NOT_DECLARED = ("model", "serving")
_GATE_OPTIONS = {
    "auc_floor": Option("--auc-threshold", "float", "AUC floor (binary tasks)."),
    "max_auc_drop": Option("--max-auc-drop", "float", "Allowed AUC drop against the champion (binary tasks)."),
}
_MODEL_HELP = (
    "Model factory: mlp, resnet, dcn, ft_transformer, with text features text_transformer, text_moe, text_cnn, "
    "hf_sequence_classifier (tokenizer: pretrained); package.module:function or path/to/file.py:function. Default: "
    "mlp, text_transformer for a dataset with text features, hf_sequence_classifier with a pretrained one."
)


def _trainer_settings() -> list[Setting]:
    return [
        Setting(
            f"trainer.{name}",
            TrainerHParams.default_of(name),
            _TRAINER_OPTIONS.get(name),
            pools=f"trainer.hyperparameters.{name}",
            dataset=f"trainer.{name}" if name in DATASET_TRAINER_KEYS else None,
        )
        for name in TrainerHParams.model_fields
        if name not in _TRAINER_NOT_DECLARED
    ]


def _model_and_serving_settings() -> list[Setting]:
    in_pools = "trainer.hyperparameters"
    settings = [
        Setting(
            "model.factory",
            ModelConfig.default_of("factory"),
            Option("--model", "text", _MODEL_HELP),
            pools=f"{in_pools}.model.factory",
            dataset="model.factory",
        ),
        Setting(
            "model.hparams",
            ModelConfig.default_of("hparams"),
            Option(
                "--model-hparam",
                "pairs",
                "A model hyperparameter KEY=VALUE, the value read as YAML (repeatable): --model-hparam dropout=0.2.",
            ),
            pools=f"{in_pools}.model.hparams",
            dataset="model.hparams",
        ),
        Setting(
            "serving.precision",
            ServingConfig.default_of("precision"),
            Option(
                "--serving-precision",
                "choice",
                "Serve a reduced-precision network if the drift gate passes it (fp16).",
                PRECISIONS,
            ),
            pools=f"{in_pools}.serving.precision",
            dataset="serving.precision",
        ),
    ]
    settings += [
        Setting(
            f"serving.drift_limits.{name}",
            DriftLimits.default_of(name),
            pools=f"{in_pools}.serving.drift_limits.{name}",
            dataset=f"serving.drift_limits.{name}",
        )
        for name in DriftLimits.model_fields
    ]
    return settings


def _gate_settings() -> list[Setting]:
    return [
        Setting(f"gates.{name}", GateConfig.default_of(name), _GATE_OPTIONS.get(name), dataset=f"gates.{name}")
        for name in GateConfig.model_fields
    ]


def _run_settings() -> list[Setting]:
    return [
        Setting(
            "dataset",
            DEFAULT_DATASET,
            Option("--dataset", "text", "A shipped dataset's name or a YAML path."),
            pools="dataset",
        ),
        Setting(
            "serving_address",
            None,
            Option(
                "--serving-address",
                "text",
                "TF Serving's gRPC HOST:PORT: labels move only once it reports "
                "the new version AVAILABLE; none: the label move waits for `torchtfx promote --finish`.",
            ),
            pools="serving_address",
        ),
        Setting(
            "mlflow.unreachable",
            FAIL_IF_UNREACHABLE,
            Option(
                "--mlflow-unreachable",
                "choice",
                "If the MLflow server does not answer: fail before training, or continue untracked (no promotion).",
                UNREACHABLE_POLICIES,
            ),
            pools="mlflow.unreachable",
        ),
    ]


def _local_settings() -> list[Setting]:
    return [
        Setting("pipeline_root", DEFAULT_PIPELINE_ROOT, Option("--pipeline-root", "path"), runs=(LOCAL,)),
        Setting(
            "data_dir",
            None,
            Option("--data-dir", "path", "Folder of CSV files."),
            runs=(LOCAL,),
            default_text="the dataset's packaged data",
        ),
        Setting(
            "serving_dir",
            None,
            Option("--serving-dir", "path"),
            runs=(LOCAL,),
            default_text="<pipeline root>/serving/<dataset>",
        ),
        Setting("cache", True, Option("--no-cache", "no_flag", "Disable MLMD execution caching."), runs=(LOCAL,)),
        Setting(
            "confirm_labels",
            STAGED,
            Option(
                SETTING_FLAG,
                "choice",
                "Without --serving-address: staged (the new version waits for `torchtfx promote --finish` before "
                "the serving labels move onto it), or immediate, where no TF Serving reads the serving folder "
                "(the labels move at once; refused with --serving-address).",
                LABEL_CONFIRMATIONS,
            ),
            runs=(LOCAL,),
        ),
        Setting(
            "beam.mode",
            BEAM_MODE_AUTO,
            Option(
                "--beam-mode",
                "choice",
                "Beam DirectRunner: in_memory (one process), multi_processing, or "
                "auto (in_memory below 32 MiB of CSV).",
                BEAM_MODES,
            ),
            runs=(LOCAL,),
        ),
        Setting(
            "beam.workers",
            DEFAULT_BEAM_WORKERS,
            Option("--beam-workers", "positive_int", "Beam DirectRunner processes (multi_processing)."),
            runs=(LOCAL,),
        ),
    ]


SETTINGS: tuple[Setting, ...] = tuple(
    _run_settings() + _local_settings() + _trainer_settings() + _model_and_serving_settings() + _gate_settings()
)
BY_KEY = {setting.key: setting for setting in SETTINGS}


def settings_for(run: str) -> tuple[Setting, ...]:
    """The settings a run of this kind (``LOCAL`` or ``KUBEFLOW``) uses."""
    return tuple(s for s in SETTINGS if run in s.runs)
