"""The research-model corpus: third-party published models, each a factory file here (``<name>.py`` with
``build(spec, **hparams)``, run as ``torchtfx run --model tests/bench/research_zoo/<name>.py:build``).

``CORPUS`` names, per file, the pip package the model comes from, its class, and the paper; the installed
version is read with :mod:`importlib.metadata` when a benchmark runs (``requirements-research.in`` pins it),
never written down here.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from pathlib import Path

HERE = Path(__file__).parent

_RTDL_2021 = 'Gorishniy et al., "Revisiting Deep Learning Models for Tabular Data", NeurIPS 2021'
_RTDL_2022 = 'Gorishniy et al., "On Embeddings for Numerical Features in Tabular Deep Learning", NeurIPS 2022'
_TABM = 'Gorishniy et al., "TabM: Advancing Tabular Deep Learning with Parameter-Efficient Ensembling", ICLR 2025'


@dataclasses.dataclass(frozen=True)
class CorpusModel:
    """One factory file of the corpus."""

    name: str  # the file's stem: tests/bench/research_zoo/<name>.py
    package: str  # the pip distribution the model class comes from
    model: str  # the class, as the package names it
    paper: str
    also: tuple[str, ...] = ()  # further pip distributions the adapter uses (e.g. MLP under an embedding)

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.py"

    @property
    def factory(self) -> str:
        """The ``--model`` value of ``torchtfx run``."""
        return f"{self.path}:build"

    def versions(self) -> dict[str, str | None]:
        """pip distribution -> installed version (None: not installed), the model's package first."""
        return {package: installed_version(package) for package in (self.package, *self.also)}

    def describe(self) -> dict:
        """What a result row records about the model besides its measurements."""
        versions = self.versions()
        return {
            "package": self.package,
            "version": versions[self.package],
            "class": self.model,
            "paper": self.paper,
            "packages": versions,
        }


def installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


CORPUS: tuple[CorpusModel, ...] = (
    CorpusModel("rtdl_mlp", "rtdl_revisiting_models", "rtdl_revisiting_models.MLP", _RTDL_2021),
    CorpusModel("rtdl_resnet", "rtdl_revisiting_models", "rtdl_revisiting_models.ResNet", _RTDL_2021),
    CorpusModel("rtdl_ft_transformer", "rtdl_revisiting_models", "rtdl_revisiting_models.FTTransformer", _RTDL_2021),
    CorpusModel(
        "rtdl_mlp_periodic",
        "rtdl_num_embeddings",
        "rtdl_num_embeddings.PeriodicEmbeddings (MLP-PLR)",
        _RTDL_2022,
        ("rtdl_revisiting_models",),
    ),
    CorpusModel(
        "rtdl_mlp_piecewise_linear",
        "rtdl_num_embeddings",
        "rtdl_num_embeddings.PiecewiseLinearEmbeddings (MLP-QLR)",
        _RTDL_2022,
        ("rtdl_revisiting_models",),
    ),
    CorpusModel(
        "rtdl_mlp_linear_relu",
        "rtdl_num_embeddings",
        "rtdl_num_embeddings.LinearReLUEmbeddings (MLP-LR)",
        _RTDL_2022,
        ("rtdl_revisiting_models",),
    ),
    CorpusModel("tabm_ensemble", "tabm", "tabm.TabM (arch_type=tabm)", _TABM),
    CorpusModel(
        "tabm_mini", "tabm", "tabm.TabM (arch_type=tabm-mini, periodic embeddings)", _TABM, ("rtdl_num_embeddings",)
    ),
    CorpusModel(
        "tabnet",
        "pytorch-tabnet",
        "pytorch_tabnet.tab_network.TabNet",
        'Arik & Pfister, "TabNet: Attentive Interpretable Tabular Learning", AAAI 2021',
    ),
    CorpusModel(
        "tab_transformer",
        "tab-transformer-pytorch",
        "tab_transformer_pytorch.TabTransformer",
        'Huang et al., "TabTransformer: Tabular Data Modeling Using Contextual Embeddings", 2020',
    ),
    CorpusModel(
        "lucidrains_ft_transformer", "tab-transformer-pytorch", "tab_transformer_pytorch.FTTransformer", _RTDL_2021
    ),
    CorpusModel(
        "top2_moe",
        "mixture-of-experts",
        "mixture_of_experts.MoE",
        'Shazeer et al., "Outrageously Large Neural Networks: The Sparsely-Gated Mixture-of-Experts Layer", ICLR 2017',
    ),
    CorpusModel(
        "soft_moe",
        "soft-moe-pytorch",
        "soft_moe_pytorch.SoftMoE",
        'Puigcerver et al., "From Sparse to Soft Mixtures of Experts", ICLR 2024',
    ),
)


def by_name(names: list[str] | tuple[str, ...] | None = None) -> tuple[CorpusModel, ...]:
    """The corpus, or the named models of it in corpus order; an unknown name is an error."""
    if not names:
        return CORPUS
    unknown = sorted(set(names) - {m.name for m in CORPUS})
    if unknown:
        raise ValueError(f"not in the research corpus: {', '.join(unknown)}")
    return tuple(m for m in CORPUS if m.name in names)
