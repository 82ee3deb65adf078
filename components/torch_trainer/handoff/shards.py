"""Columnar shards of the transformed examples, read by the DDP workers without TensorFlow.

The executor writes each split once as ``.npy`` arrays (dense float32 [N, D], categorical ids [N, C], label
float32 [N], and per text feature its token ids [N, max_length], padded at the end). Ids are stored in the
narrowest signed integer type that holds their vocabulary (:func:`id_dtype`: int16 for taxi's tables) and widened
to the model's int64 batch by batch (:meth:`ArraySplit.model_inputs`): at 5M taxi rows the int64 ids were 87% of
the arrays, and every DDP worker holds its shard of them (stop 38).

Every rank memory-maps them and reads only its own contiguous shard; batches are taken by fancy indexing, so
nothing is converted row by row in Python. A batch's token ids are cut to its longest row (:func:`trim_padding`):
the model sees each batch at its own length, as in serving, and a batch of short texts costs what short texts
cost.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from torchtfx.components.shared.batching import rows_per_call
from torchtfx.data.config.text import PADDING_ID

DENSE_FILE = "dense.npy"
CATEGORICAL_FILE = "categorical.npy"
LABEL_FILE = "label.npy"
SEQUENCE_NAMES_FILE = "sequences.json"


def write_sequence_names(directory: Path, names: tuple[str, ...]) -> None:
    """The text features' names, in the order of the ``sequence_<i>.npy`` files (none: a tabular split)."""
    if names:
        (directory / SEQUENCE_NAMES_FILE).write_text(json.dumps(list(names)))


def sequence_file(index: int) -> str:
    return f"sequence_{index}.npy"


def id_dtype(vocabulary_sizes: tuple[int, ...]) -> np.dtype:
    """The narrowest signed integer type that holds every id below each of ``vocabulary_sizes`` (int64 for none)."""
    largest = max(vocabulary_sizes, default=0) - 1
    for dtype in (np.int8, np.int16, np.int32):
        if vocabulary_sizes and largest <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def trim_padding(ids: np.ndarray) -> np.ndarray:
    """Token ids [rows, max_length] without the padding columns that no row reaches (at least one column: a batch
    of empty texts is one padding column, which the model must take)."""
    if ids.shape[1] <= 1:
        return ids
    used = np.flatnonzero((ids != PADDING_ID).any(axis=0))
    return ids[:, : max(1, int(used[-1]) + 1 if used.size else 1)]


@dataclasses.dataclass(frozen=True)
class ArraySplit:
    dense: np.ndarray
    categorical: np.ndarray
    label: np.ndarray
    sequences: tuple[np.ndarray, ...] = ()  # token ids [N, max_length] per text feature, padded at the end
    sequence_names: tuple[str, ...] = ()  # the text features' transformed names: the ONNX inputs' names

    def __len__(self) -> int:
        return len(self.label)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / DENSE_FILE, self.dense)
        np.save(directory / CATEGORICAL_FILE, self.categorical)
        np.save(directory / LABEL_FILE, self.label)
        for index, ids in enumerate(self.sequences):
            np.save(directory / sequence_file(index), ids)
        write_sequence_names(directory, self.sequence_names)

    def rows(self, index: slice | np.ndarray) -> ArraySplit:
        """The split's rows at ``index`` (a copy for an index array, a view for a slice)."""
        return ArraySplit(
            self.dense[index],
            self.categorical[index],
            self.label[index],
            tuple(ids[index] for ids in self.sequences),
            self.sequence_names,
        )

    def model_inputs(self, index: slice | np.ndarray = slice(None)) -> tuple[np.ndarray, ...]:
        """``forward``'s arguments for the rows at ``index``: dense, categorical, then each text feature's ids
        cut to the longest of these rows; contiguous, in the dtypes the model and the ONNX graph take."""
        inputs = (np.asarray(self.dense[index], np.float32), np.asarray(self.categorical[index], np.int64))
        inputs += tuple(trim_padding(np.asarray(ids[index], np.int64)) for ids in self.sequences)
        return tuple(np.ascontiguousarray(x) for x in inputs)

    @classmethod
    def load(cls, directory: Path, mmap: bool = True) -> ArraySplit:
        mode = "r" if mmap else None
        names_file = directory / SEQUENCE_NAMES_FILE
        names = tuple(json.loads(names_file.read_text())) if names_file.is_file() else ()
        sequences = tuple(np.load(directory / sequence_file(i), mmap_mode=mode) for i in range(len(names)))
        return cls(
            dense=np.load(directory / DENSE_FILE, mmap_mode=mode),
            categorical=np.load(directory / CATEGORICAL_FILE, mmap_mode=mode),
            label=np.load(directory / LABEL_FILE, mmap_mode=mode),
            sequences=sequences,
            sequence_names=names,
        )

    def shard(self, rank: int, world_size: int, equal: bool) -> ArraySplit:
        """Rank's contiguous slice. ``equal`` drops the remainder so every rank takes the same
        number of steps (DDP's collectives would hang otherwise); eval keeps every row."""
        n = len(self)
        if equal:
            size = n // world_size
            start, stop = rank * size, (rank + 1) * size
        else:
            start, stop = rank * n // world_size, (rank + 1) * n // world_size
        # np.array copies this rank's rows out of the read-only memory map into writable memory
        # (torch tensors need writable buffers); each rank holds only its own shard.
        return ArraySplit(
            dense=np.array(self.dense[start:stop]),
            categorical=np.array(self.categorical[start:stop]),
            label=np.array(self.label[start:stop]),
            sequences=tuple(np.array(ids[start:stop]) for ids in self.sequences),
            sequence_names=self.sequence_names,
        )


def eval_batch_size(split: ArraySplit) -> int:
    """Rows per evaluation batch of ``split`` (:func:`rows_per_call`)."""
    return rows_per_call(sum(ids.shape[1] for ids in split.sequences))


class ShardBatches:
    """Mini-batches ``(inputs, label)`` over one rank's shard, reshuffled each epoch from ``seed + epoch``;
    ``inputs`` are ``forward``'s arguments (:meth:`ArraySplit.model_inputs`) as tensors.

    Like ``DistributedSampler``, every rank must call :meth:`set_epoch` before iterating so that
    shuffling differs between epochs but is reproducible.
    """

    def __init__(self, split: ArraySplit, batch_size: int, shuffle: bool, seed: int) -> None:
        self.split = split
        self.label = torch.from_numpy(split.label)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _stop(self) -> int:
        """Rows iterated. Training drops a trailing batch of one row: BatchNorm cannot train on a single row
        (it raises), and the shuffle moves a different row there every epoch."""
        n = len(self.label)
        return n - 1 if self.shuffle and n > 1 and n % self.batch_size == 1 else n

    def __len__(self) -> int:
        return (self._stop() + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        n = len(self.label)
        if self.shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(self.seed + self.epoch)).numpy()
        for start in range(0, self._stop(), self.batch_size):
            index = order[start : start + self.batch_size] if self.shuffle else slice(start, start + self.batch_size)
            yield tuple(map(torch.from_numpy, self.split.model_inputs(index))), self.label[index]
