"""Find, load and check the model factory a :class:`ModelConfig` names.

Loading a factory runs the user's code, so it is only ever loaded from the zoo, a module the user named,
or the file the user named (carried as its source text once the pipeline is built, see
:func:`embed_source`). Every failure is a :class:`ModelConfigError` that names the factory and the fix, a
``sys.exit()`` in the user's code included (it would otherwise end the run, or a worker, as if it had succeeded).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchtfx.components.torch_trainer.modeling.determinism import find_nondeterminism
from torchtfx.components.torch_trainer.modeling.heads import ModelOutputError, split_output
from torchtfx.components.torch_trainer.modeling.spec import BINARY, ModelSpec, SequenceInput
from torchtfx.components.torch_trainer.modeling.tracebacks import torch_error
from torchtfx.data.config.model import ModelConfig, ModelConfigError

logger = logging.getLogger(__name__)

_ZOO_PACKAGE = "torchtfx.components.torch_trainer.modeling.zoo"
TABULAR_ZOO = ("mlp", "resnet", "dcn", "ft_transformer")
# They read a dataset's text features (spec.sequences); hf_sequence_classifier a pretrained checkpoint's.
TEXT_ZOO = ("text_transformer", "text_moe", "text_cnn", "hf_sequence_classifier")
ZOO = TABULAR_ZOO + TEXT_ZOO
_CHECK_BATCH = 3
# Then one row: squeeze() and the like drop the batch axis of a one-row batch (TF Serving's single requests).
_CHECK_BATCHES = (_CHECK_BATCH, 1)


def _split(factory: str) -> tuple[str, str]:
    if factory in ZOO:
        return f"{_ZOO_PACKAGE}.{factory}", "build"
    target, _, function = factory.rpartition(":")
    if not target or not function:
        raise ModelConfigError(
            f"model factory {factory!r} is not a zoo model ({', '.join(ZOO)}) nor 'module:function' "
            "or 'path/to/file.py:function'"
        )
    return target, function


@contextlib.contextmanager
def _no_exit(name: str, during: str) -> Iterator[None]:
    """A ``sys.exit()`` in the user's code as a ModelConfigError: SystemExit is no Exception, and would end the
    run (or a DDP worker) with the status it was given, 0 included."""
    try:
        yield
    except SystemExit as exit_:
        raise ModelConfigError(
            f"model factory {name!r} called sys.exit({exit_.code!r}) {during}; a factory must return a "
            "torch.nn.Module, and report a problem by raising an exception, never by exiting"
        ) from None


def embed_source(config: ModelConfig, base_dir: Path | None = None) -> ModelConfig:
    """A file factory with its source text inside (and its path made absolute); others unchanged."""
    target, function = _split(config.factory)
    if not target.endswith(".py") or config.source is not None:
        return config
    path = Path(target).expanduser()
    path = path if path.is_absolute() else (base_dir or Path.cwd()) / path
    if not path.is_file():
        raise ModelConfigError(f"model factory {config.factory!r}: file {path} does not exist")
    return config.replace(factory=f"{path.resolve()}:{function}", source=path.read_text(encoding="utf-8"))


def _module_from_source(path: str, source: str):
    """Execute the carried source as a module named after its content (one module per distinct file)."""
    name = f"torchtfx_user_model_{hashlib.sha256(source.encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses and pickling look the module up by name while it executes
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_target(config: ModelConfig, target: str):
    if target.endswith(".py"):
        if config.source is None:
            config = embed_source(config)
        return _module_from_source(target, config.source)
    return importlib.import_module(target)


def load_factory(config: ModelConfig) -> Callable[..., nn.Module]:
    target, function = _split(config.factory)
    try:
        with _no_exit(config.factory, "while its module was imported"):
            module = _import_target(config, target)
    except ModelConfigError:
        raise
    except Exception as err:  # the user's module failed to import: say which and why
        raise ModelConfigError(
            f"model factory {config.factory!r} could not be imported: {type(err).__name__}: {err}. "
            "Check that the file or package is installed where the Trainer runs and imports cleanly."
        ) from err
    factory = getattr(module, function, None)
    if not callable(factory):
        raise ModelConfigError(f"model factory {config.factory!r}: {target} has no callable {function!r}")
    return factory


def _check_hparams(factory: Callable[..., Any], config: ModelConfig, spec: ModelSpec) -> None:
    try:
        inspect.signature(factory).bind(spec, **config.hparams)
    except TypeError as err:
        params = [p for p in inspect.signature(factory).parameters][1:]
        raise ModelConfigError(
            f"model factory {config.factory!r} does not accept hparams {sorted(config.hparams)}: {err}; "
            f"it takes {', '.join(params) or 'only the spec'}"
        ) from None


def build_model(config: ModelConfig, spec: ModelSpec) -> nn.Module:
    """``factory(spec, **hparams)``, checked to be a module whose output has the task's shape."""
    factory = load_factory(config)
    _check_hparams(factory, config, spec)
    with _no_exit(config.factory, "while building the model"):
        try:
            model = factory(spec, **config.hparams)
        except Exception as err:
            raise ModelConfigError(
                f"model factory {config.factory!r} raised {type(err).__name__}: {err} (hparams {config.hparams})"
            ) from err
    if not isinstance(model, nn.Module):
        raise ModelConfigError(
            f"model factory {config.factory!r} returned {type(model).__name__}, not a torch.nn.Module"
        )
    check_output(model, spec, config.factory)
    return model


def check_inputs(spec: ModelSpec, batch: int) -> tuple[torch.Tensor, ...]:
    """A batch of ``forward``'s arguments: zeros for the tabular inputs, and token ids for each text feature
    where the last row is an empty text (all padding) and the others are of different lengths."""
    dense = torch.zeros(batch, len(spec.dense_features))
    categorical = torch.zeros(batch, len(spec.categorical_features), dtype=torch.int64)
    sequences = []
    for seq in spec.sequences:
        length = min(seq.max_length, 5)
        ids = torch.arange(batch * length).reshape(batch, length) % max(1, seq.vocab_size - 1) + 1
        used = torch.arange(length)[None, :] < torch.linspace(length, 0, batch).round()[:, None]
        sequences.append(torch.where(used, ids, seq.padding_id).to(torch.int64))
    return (dense, categorical, *sequences)


def _signature(spec: ModelSpec) -> str:
    text = "".join(f", {s.name} int64 [batch, <= {s.max_length}]" for s in spec.sequences)
    return (
        f"forward(dense float32 [batch, {len(spec.dense_features)}], categorical int64 [batch, "
        f"{len(spec.categorical_features)}]{text})"
    )


def check_output(model: nn.Module, spec: ModelSpec, name: str) -> None:
    """Run a tiny batch, then a batch of one row (TF Serving's and the Evaluator's single requests), through
    ``forward(dense, categorical, *sequences)`` and check what comes back."""
    was_training = model.training
    try:
        for batch in _CHECK_BATCHES:
            inputs = check_inputs(spec, batch)
            _check_shape(_forward(model.eval(), inputs, spec, name, batch), spec, name, batch)
            if batch == _CHECK_BATCH:
                varying = find_nondeterminism(model, inputs)
                if varying is not None:
                    raise ModelConfigError(varying.describe(name))
    finally:
        model.train(was_training)


def _forward(model: nn.Module, inputs: tuple[torch.Tensor, ...], spec: ModelSpec, name: str, batch: int):
    """``model(*inputs)``; torch's own error, with the user's source line, as a ModelConfigError."""
    try:
        with torch.no_grad(), _no_exit(name, "in the model's forward"):
            out = model(*inputs)
    except ModelConfigError:  # the forward exited
        raise
    except Exception as err:
        hint = ""
        if spec.sequences and isinstance(err, TypeError) and "positional argument" in str(err):
            hint = (
                f"; the dataset has text features, so forward also takes their token ids: choose a text model "
                f"({', '.join(TEXT_ZOO)}) or write forward(dense, categorical, *sequences)"
            )
        elif batch == 1:
            hint = (
                "; TF Serving and the Evaluator call the model with one row, so forward must work for any number "
                "of rows, one included (e.g. x.squeeze(-1), not x.squeeze(), which drops the batch axis)"
            )
        raise ModelConfigError(
            f"model {name!r} failed on a batch of {batch}: {_signature(spec)} raised {torch_error(err)}{hint}"
        ) from err
    try:
        return split_output(out)[0]
    except ModelOutputError as err:
        raise ModelConfigError(f"model {name!r}: {err}") from None


def _check_shape(out, spec: ModelSpec, name: str, batch: int) -> None:
    expected = spec.output_shape(batch)
    if isinstance(out, torch.Tensor) and out.is_floating_point() and tuple(out.shape) == expected:
        return
    got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
    what = "logits [batch, num_outputs]" if len(expected) == 2 else "one raw score per row, shape [batch]"
    hint = " (squeeze the last dimension)" if got.startswith(f"({batch}, 1)") else ""
    if batch == 1 and isinstance(out, torch.Tensor) and out.dim() < len(expected):
        hint = " (the batch axis was dropped for one row: squeeze(-1), not squeeze(), keeps it)"
    raise ModelConfigError(
        f"model {name!r} returned {got} for a batch of {batch}; a {spec.task} model must return "
        f"{what}, i.e. a float tensor of shape {expected}{hint}"
    )


def provisional_spec(
    dense: tuple[str, ...],
    categorical: tuple[str, ...],
    task: str = BINARY,
    num_outputs: int = 1,
    sequences: tuple[SequenceInput, ...] = (),
) -> ModelSpec:
    """A spec to check a factory before Transform has counted the vocabularies (cardinality 2 each; text
    features with their vocabulary's upper bound)."""
    return ModelSpec(dense, categorical, tuple(2 for _ in categorical), task, num_outputs, sequences)
