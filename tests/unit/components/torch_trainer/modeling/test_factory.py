"""Loading the model a user names: zoo names, installed modules, files outside the repository, and every
way a factory can be wrong (each a clear error naming the factory, before training)."""

from __future__ import annotations

import inspect
import textwrap
import time

import pytest
import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.factory import build_model, embed_source, load_factory
from torchtfx.components.torch_trainer.modeling.spec import ModelSpec, SequenceInput
from torchtfx.data.config.model import ModelConfig, ModelConfigError

SPEC = ModelSpec(("a", "b"), ("c",), (7,))

USER_MODEL = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, spec, width):
        super().__init__()
        self.emb = nn.Embedding(spec.cardinalities[0], 3)
        self.out = nn.Linear(len(spec.dense_features) + 3, width)

    def forward(self, dense, categorical):
        return self.out(torch.cat([dense, self.emb(categorical[:, 0])], dim=1)).sum(dim=1)

    def loss(self, outputs, labels):
        return ((outputs - labels) ** 2).mean()


def build(spec, width=4):
    return Tiny(spec, width)


def not_a_module(spec):
    return "model"


def wrong_shape(spec):
    return nn.Linear(len(spec.dense_features), 1)  # [batch, 1] and never reads categorical


def broken(spec):
    raise RuntimeError("boom")
"""


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "x" / "my_model.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(USER_MODEL))
    return path


def test_a_file_outside_the_repository_is_embedded_and_built(user_file):
    config = embed_source(ModelConfig(factory=f"{user_file}:build", hparams={"width": 5}))
    assert config.source == user_file.read_text()
    user_file.unlink()  # every later process loads the carried source, not the file
    model = build_model(config, SPEC)
    assert model.out.out_features == 5 and callable(model.loss)
    assert model(torch.zeros(4, 2), torch.zeros(4, 1, dtype=torch.int64)).shape == (4,)


def test_a_relative_file_path_resolves_against_the_given_folder(user_file):
    config = embed_source(ModelConfig(factory="x/my_model.py:build"), base_dir=user_file.parent.parent)
    assert config.factory == f"{user_file.resolve()}:build"


def test_zoo_names_and_installed_modules_load_the_same_way():
    zoo = build_model(ModelConfig(factory="dcn", hparams={"n_cross_layers": 1}), SPEC)
    installed = build_model(ModelConfig(factory="torchtfx.components.torch_trainer.modeling.zoo.dcn:build"), SPEC)
    assert type(zoo) is type(installed)


@pytest.mark.parametrize(
    ("factory", "hparams", "message"),
    [
        ("not_a_module", {}, r"returned str, not a torch.nn.Module"),
        ("wrong_shape", {}, r"failed on a batch of 3: forward\(dense float32 \[batch, 2\]"),
        ("broken", {}, r"raised RuntimeError: boom"),
        ("build", {"widht": 3}, r"does not accept hparams \['widht'\].*it takes width"),
        ("missing", {}, r"has no callable 'missing'"),
    ],
)
def test_a_wrong_factory_is_refused_naming_it(user_file, factory, hparams, message):
    with pytest.raises(ModelConfigError, match=message) as err:
        build_model(embed_source(ModelConfig(factory=f"{user_file}:{factory}", hparams=hparams)), SPEC)
    assert "my_model.py" in str(err.value)


def test_an_output_of_the_wrong_shape_names_the_shape_expected(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "from torch import nn\nclass M(nn.Module):\n    def forward(self, d, c):\n        return d[:, :1] + c[:, :1]\n"
        "def build(spec):\n    return M()\n"
    )
    with pytest.raises(ModelConfigError, match=r"returned \(3, 1\) torch.float32.*shape \(3,\) \(squeeze"):
        build_model(ModelConfig(factory=f"{path}:build"), SPEC)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("no_such_package.models:build", r"could not be imported: ModuleNotFoundError"),
        ("/nowhere/model.py:build", r"file /nowhere/model.py does not exist"),
        (
            "tabnet",
            r"is not a zoo model \(mlp, resnet, dcn, ft_transformer, text_transformer, text_moe, text_cnn, "
            r"hf_sequence_classifier\)",
        ),
    ],
)
def test_a_factory_that_cannot_be_found_is_refused(factory, message):
    with pytest.raises(ModelConfigError, match=message):
        load_factory(ModelConfig(factory=factory))


def test_a_factory_without_a_function_is_refused_when_parsed():
    with pytest.raises(ModelConfigError, match=r"names no function; write 'path/to/file.py:build'"):
        ModelConfig(factory="my_model.py")


def test_a_file_that_fails_to_import_names_the_error(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import torch\nraise ImportError('needs torch_geometric')\n")
    with pytest.raises(ModelConfigError, match=r"could not be imported: ImportError: needs torch_geometric"):
        load_factory(ModelConfig(factory=f"{path}:build"))


EXITING_MODEL = """
import sys

import torch.distributed as dist
from torch import nn


class Exits(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.lin = nn.Linear(len(spec.dense_features), 1)

    def forward(self, dense, categorical):
        sys.exit(3)


class Fine(Exits):
    def forward(self, dense, categorical):
        return self.lin(dense).squeeze(1) + 0 * categorical[:, 0]


def build(spec):
    sys.exit(0)


def exits_in_forward(spec):
    return Exits(spec)


def exits_in_training(spec):
    if dist.is_initialized():  # the Trainer, not the check before the run
        sys.exit(0)
    return Fine(spec)
"""


@pytest.fixture
def exiting_file(tmp_path):
    path = tmp_path / "outside" / "exiting.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(EXITING_MODEL))
    return path


@pytest.mark.parametrize(
    ("source", "function", "message"),
    [
        (None, "build", r"called sys\.exit\(0\) while building the model; a factory must return"),
        ("import sys\nsys.exit(0)\n", "build", r"called sys\.exit\(0\) while its module was imported"),
        (None, "exits_in_forward", r"called sys\.exit\(3\) in the model's forward"),
    ],
)
def test_a_factory_that_calls_sys_exit_is_refused_naming_it(exiting_file, source, function, message):
    """SystemExit is no Exception: it went past every check and ended the process with the status it gave."""
    path = exiting_file
    if source:
        path.write_text(source)
    with pytest.raises(ModelConfigError, match=message) as err:
        build_model(embed_source(ModelConfig(factory=f"{path}:{function}")), SPEC)
    assert f"{path}:{function}" in str(err.value)


def test_torchtfx_run_fails_naming_a_factory_that_calls_sys_exit(exiting_file, tmp_path):
    """`torchtfx run --model file.py:build` with ``sys.exit(0)`` in the factory exited 0, silently."""
    from click.testing import CliRunner

    from torchtfx.pipeline.cli.main import cli

    result = CliRunner().invoke(
        cli, ["run", "--model", f"{exiting_file}:build", "--pipeline-root", str(tmp_path / "root")]
    )
    assert result.exit_code == 1, result.output
    assert f"Error: model factory '{exiting_file}:build' called sys.exit(0) while building the model" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "root").exists()


def test_a_factory_that_exits_in_the_trainer_fails_the_training(exiting_file, tmp_path, tiny_taxi):
    """Only where training runs (the in-process worker, as in a DDP rank): SystemExit passed through the worker."""
    from tests import helpers
    from torchtfx.components.torch_trainer.handoff.errors import TrainingFailedError
    from torchtfx.components.torch_trainer.worker.in_process import run_in_process

    model = embed_source(ModelConfig(factory=f"{exiting_file}:exits_in_training"))
    build_model(model, tiny_taxi.layout.model_spec())  # the check before the run passes
    job = helpers.tiny_train_job(tmp_path, tiny_taxi, num_workers=1, model=model)
    with pytest.raises(TrainingFailedError, match=r"exiting\.py:exits_in_training' called sys\.exit\(0\) while buil"):
        run_in_process(job, tmp_path / "train.log")


def test_a_tabular_model_on_a_dataset_with_text_features_is_refused_naming_the_text_models():
    spec = ModelSpec(("a",), ("b",), (3,), sequences=(SequenceInput("text_xf", 50, 16),))
    with pytest.raises(ModelConfigError, match=r"text_xf int64 \[batch, <= 16\].*choose a text model \(text_"):
        build_model(ModelConfig(factory="mlp"), spec)


class SqueezedThenIndexed(nn.Module):
    """Runs at any batch size but 1: squeeze() drops the batch axis of a one-row batch, then the index fails."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.linear = nn.Linear(len(spec.dense_features), 2)

    def forward(self, dense, categorical):
        h = self.linear(dense).unsqueeze(1).squeeze()  # [batch, 2]; [2] for one row
        return h[:, 0] - h[:, 1]


class EndsWithSqueeze(nn.Module):
    """Returns [batch] scores at any batch size but 1, where squeeze() leaves a scalar."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.linear = nn.Linear(len(spec.dense_features), 1)

    def forward(self, dense, categorical):
        return self.linear(dense).squeeze()


def squeezed_then_indexed(spec):
    return SqueezedThenIndexed(spec)


def ends_with_squeeze(spec):
    return EndsWithSqueeze(spec)


def test_a_model_that_fails_in_pytorch_at_one_row_is_refused_in_seconds_with_torch_s_error_and_the_line():
    line = inspect.getsourcelines(SqueezedThenIndexed.forward)[1] + 2
    start = time.perf_counter()
    with pytest.raises(ModelConfigError) as err:
        build_model(ModelConfig(factory=f"{__name__}:squeezed_then_indexed"), SPEC)
    assert time.perf_counter() - start < 10
    message = str(err.value)
    assert "failed on a batch of 1: forward(dense float32 [batch, 2]" in message
    assert "raised IndexError: too many indices for tensor of dimension 1" in message
    assert f"{__file__}:{line} in forward: `return h[:, 0] - h[:, 1]`" in message
    assert "x.squeeze(-1), not x.squeeze()" in message and "\n" not in message


def test_a_forward_ending_in_squeeze_is_refused_at_one_row_naming_the_dropped_batch_axis():
    with pytest.raises(
        ModelConfigError,
        match=r"returned \(\) torch.float32 for a batch of 1; .* shape \(1,\) \(the "
        r"batch axis was dropped for one row: squeeze\(-1\), not squeeze\(\), keeps it\)",
    ):
        build_model(ModelConfig(factory=f"{__name__}:ends_with_squeeze"), SPEC)
