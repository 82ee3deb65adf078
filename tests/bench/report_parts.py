"""Figures and labels that more than one report section uses (report.py and report_scale.py import this module;
neither imports the other)."""

from __future__ import annotations

# Our component ids and the reference's, lined up by role for the side-by-side plot and table.
STAGE_ROLES = (
    ("ExampleGen", ("CsvExampleGen",), ("CsvExampleGen",)),
    ("StatisticsGen", ("StatisticsGen",), ("StatisticsGen",)),
    ("Schema", ("ImportSchemaGen",), ("SchemaGen",)),
    ("Validation", ("ExampleValidator", "DataGate"), ("ExampleValidator",)),
    ("Transform", ("Transform",), ("Transform",)),
    ("Trainer", ("TorchTrainer",), ("Trainer",)),
    ("Evaluator", ("ChampionModel", "Evaluator"), ("latest_blessed_model_resolver", "Evaluator")),
    ("Push/promote", ("Promoter",), ("Pusher",)),
)


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def role_seconds(stages: dict[str, float], names: tuple[str, ...]) -> float:
    return sum(stages.get(n, 0.0) for n in names)


def process_label(name: str) -> str:
    """``pid command`` -> a short role name."""
    if "sdk_worker_main" in name:
        return "Beam worker"
    if "[ddp-rank" in name:
        return "DDP worker"
    if "torch.distributed.run" in name or "cluster.agent" in name:
        return "DDP launcher"
    if "--job" in name:
        return "DDP worker"
    return "pipeline process"
