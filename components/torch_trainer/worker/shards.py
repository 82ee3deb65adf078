"""Columnar shards of the transformed examples, read by the DDP workers without TensorFlow.

The executor writes each split once as three ``.npy`` arrays (dense float32 [N, D], categorical
int64 [N, C], label float32 [N]). Every rank memory-maps them and reads only its own contiguous
shard; batches are taken by fancy indexing, so nothing is converted row by row in Python.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

DENSE_FILE = "dense.npy"
CATEGORICAL_FILE = "categorical.npy"
LABEL_FILE = "label.npy"


@dataclasses.dataclass(frozen=True)
class ArraySplit:
    dense: np.ndarray
    categorical: np.ndarray
    label: np.ndarray

    def __len__(self) -> int:
        return len(self.label)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / DENSE_FILE, self.dense)
        np.save(directory / CATEGORICAL_FILE, self.categorical)
        np.save(directory / LABEL_FILE, self.label)

    @classmethod
    def load(cls, directory: Path, mmap: bool = True) -> ArraySplit:
        mode = "r" if mmap else None
        return cls(
            dense=np.load(directory / DENSE_FILE, mmap_mode=mode),
            categorical=np.load(directory / CATEGORICAL_FILE, mmap_mode=mode),
            label=np.load(directory / LABEL_FILE, mmap_mode=mode),
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
        )


class ShardBatches:
    """Mini-batches over one rank's shard, reshuffled each epoch from ``seed + epoch``.

    Like ``DistributedSampler``, every rank must call :meth:`set_epoch` before iterating so that
    shuffling differs between epochs but is reproducible.
    """

    def __init__(self, split: ArraySplit, batch_size: int, shuffle: bool, seed: int) -> None:
        self.dense = torch.from_numpy(split.dense)
        self.categorical = torch.from_numpy(split.categorical)
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
            order = torch.randperm(n, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        for start in range(0, self._stop(), self.batch_size):
            if self.shuffle:
                idx = order[start : start + self.batch_size]
                yield self.dense[idx], self.categorical[idx], self.label[idx]
            else:
                stop = start + self.batch_size
                yield self.dense[start:stop], self.categorical[start:stop], self.label[start:stop]
