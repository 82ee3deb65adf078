"""The span store's bookkeeping where runs may overlap (Kubeflow runs share it on the volume)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from torchtfx.components.csv_input.span_store import DONE_FILE, EntrySettings, SpanStore, split_folder
from torchtfx.data.spans.layout import SpanInput


def _store(tmp_path: Path) -> SpanStore:
    schema = tmp_path / "schema.pbtxt"
    schema.write_text('feature { name: "fare" type: FLOAT }\n')
    return SpanStore(str(tmp_path / "store"), EntrySettings.of(str(schema), (), 1024, 1.0, [("train", 2), ("eval", 1)]))


def _span(number: int) -> SpanInput:
    return SpanInput(number, None, f"day-{number}/*.csv", f"fingerprint-{number}", is_date=False)


def _write(store: SpanStore, span: SpanInput, text: str) -> str:
    writing = store.start()
    Path(split_folder(writing, "train"), "part.gz").write_text(text)
    store.commit(span, writing)
    return writing


def test_a_second_writer_of_the_same_entry_keeps_the_first_and_discards_its_own(tmp_path):
    store = _store(tmp_path)
    _write(store, _span(1), "first")
    second = _write(store, _span(1), "second")
    assert Path(split_folder(store.entry(_span(1)), "train"), "part.gz").read_text() == "first"
    assert not Path(second).exists()


def test_prune_keeps_the_window_and_young_temporaries_and_removes_the_rest(tmp_path):
    store = _store(tmp_path)
    for number in (1, 2, 3):
        _write(store, _span(number), str(number))
    young, old = store.start(), store.start()  # another run still writing, and one that stopped long ago
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))

    store.prune([_span(2), _span(3)])

    left = sorted(p.name for p in Path(store.root).iterdir())
    assert left == sorted([Path(young).name, Path(store.entry(_span(2))).name, Path(store.entry(_span(3))).name])
    assert Path(store.entry(_span(3)), DONE_FILE).read_text() == "span 3\n"


def test_an_entry_depends_on_the_schemas_bytes(tmp_path):
    store = _store(tmp_path)
    (tmp_path / "schema.pbtxt").write_text('feature { name: "fare" type: INT }\n')
    changed = SpanStore(
        store.root, EntrySettings.of(str(tmp_path / "schema.pbtxt"), (), 1024, 1.0, store.settings.splits)
    )
    assert changed.entry(_span(1)) != store.entry(_span(1))
