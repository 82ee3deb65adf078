"""Each span's examples, written once and reused by every run whose window holds the span unchanged.

A daily run over a window of 7 spans reads one new span; the other 6 come from here. An entry is one span's
examples, hash-split into the output splits as ExampleGen splits them, under a name that holds everything its
bytes depend on: the span's number and version, TFX's fingerprint of its files (names, sizes, modification
times), the curated schema's bytes, the reader's settings and the split. A changed input is a new entry; an
entry is written under a temporary name and renamed into place, then marked done, so a run that stopped while
writing leaves nothing a later run reuses. A run's Examples artifact holds hard links to its window's entries
(copies where the store is not on the artifact's file system); entries of spans that left the window are
removed after each run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Iterable

import tensorflow as tf

from torchtfx.data.spans.layout import SpanInput

logger = logging.getLogger(__name__)

# Bump when the bytes an entry holds change for the same inputs (the encoding of a row, the split).
STORE_FORMAT = 1
DONE_FILE = "DONE"
ENTRY_PREFIX = "span-"
WRITING_PREFIX = ".writing-"
STALE_WRITING_S = 24 * 3600  # a temporary folder this old belongs to a run that stopped


@dataclasses.dataclass(frozen=True)
class EntrySettings:
    """What an entry's bytes depend on besides the span's own files."""

    schema_sha256: str
    missing_values: tuple[str, ...]
    max_cell_chars: int
    sample: float
    splits: tuple[tuple[str, int], ...]  # (output split name, hash buckets)

    @classmethod
    def of(
        cls, schema_file: str, missing: tuple[str, ...], max_chars: int, sample: float, splits: Iterable
    ) -> EntrySettings:
        with tf.io.gfile.GFile(schema_file, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        return cls(digest, tuple(missing), max_chars, sample, tuple(splits))

    @property
    def split_names(self) -> list[str]:
        return [name for name, _buckets in self.splits]


class SpanStore:
    def __init__(self, root: str, settings: EntrySettings):
        self.root = root
        self.settings = settings

    def entry(self, span: SpanInput) -> str:
        """The entry's folder: its name says which span it holds and hashes what its bytes depend on."""
        key = json.dumps(
            [
                STORE_FORMAT,
                span.number,
                span.version,
                span.pattern,
                span.fingerprint,
                dataclasses.asdict(self.settings),
            ],
            sort_keys=True,
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return os.path.join(self.root, f"{ENTRY_PREFIX}{span.number}-v{span.version or 0}-{digest}")

    def ready(self, span: SpanInput) -> bool:
        return tf.io.gfile.exists(os.path.join(self.entry(span), DONE_FILE))

    def start(self) -> str:
        """A fresh temporary folder to write an entry into, its split folders made."""
        writing = os.path.join(self.root, f"{WRITING_PREFIX}{uuid.uuid4().hex}")
        for name in self.settings.split_names:
            tf.io.gfile.makedirs(split_folder(writing, name))
        return writing

    def commit(self, span: SpanInput, writing: str) -> None:
        """The written entry into place, then marked done. Another run that wrote the same entry first (Kubeflow
        runs may overlap) has the same bytes: its entry stays, and this one is discarded."""
        entry = self.entry(span)
        if self.ready(span):
            self.discard(writing)
            return
        if tf.io.gfile.exists(entry):  # an entry that never got its mark: a run stopped between rename and mark
            tf.io.gfile.rmtree(entry)
        tf.io.gfile.rename(writing, entry)
        with tf.io.gfile.GFile(os.path.join(entry, DONE_FILE), "w") as handle:
            handle.write(span.label + "\n")

    def discard(self, writing: str) -> None:
        """A temporary folder whose writing failed."""
        if tf.io.gfile.exists(writing):
            tf.io.gfile.rmtree(writing)

    def compose(self, window: list[SpanInput], uris: dict[str, str], train_split: str) -> None:
        """The window's Examples from its entries: the newest span's splits are the output's; every split of an
        older span goes to ``train_split``. Then the entries outside the window are removed."""
        for span in window:
            is_newest = span is window[-1]
            self.link(span, {name: uris[name if is_newest else train_split] for name in self.settings.split_names})
        self.prune(window)

    def link(self, span: SpanInput, targets: dict[str, str]) -> None:
        """Link each of the entry's split files into ``targets`` (entry split -> output split folder); the names
        carry the span, so a window's spans share an output folder."""
        entry = self.entry(span)
        for name, target in targets.items():
            source = split_folder(entry, name)
            for file_name in sorted(tf.io.gfile.listdir(source)):
                linked_name = f"span{span.number}-{name}-{file_name}"  # an older span's splits share the train folder
                _link_or_copy(os.path.join(source, file_name), os.path.join(target, linked_name))

    def prune(self, window: list[SpanInput]) -> None:
        """Remove every entry but the window's (spans that left it, inputs that changed), and temporaries older
        than STALE_WRITING_S (younger ones may be another run's, still writing)."""
        keep = {os.path.basename(self.entry(span)) for span in window}
        for name in tf.io.gfile.listdir(self.root):
            name = name.rstrip("/")
            path = os.path.join(self.root, name)
            if name.startswith(WRITING_PREFIX) and time.time() - _modified_s(path) < STALE_WRITING_S:
                continue
            if (name.startswith(ENTRY_PREFIX) or name.startswith(WRITING_PREFIX)) and name not in keep:
                logger.info("Removing %s from the span store %s", name, self.root)
                tf.io.gfile.rmtree(os.path.join(self.root, name))


def _modified_s(path: str) -> float:
    return tf.io.gfile.stat(path).mtime_nsec / 1e9


def split_folder(folder: str, split: str) -> str:
    return os.path.join(folder, f"Split-{split}")


def _link_or_copy(source: str, target: str) -> None:
    """A hard link (no bytes copied) where both are on one local file system, else a copy."""
    if "://" not in source and "://" not in target:
        try:
            os.link(source, target)
            return
        except FileExistsError:
            raise
        except OSError:  # another device, or a file system without hard links
            pass
    tf.io.gfile.copy(source, target, overwrite=False)
