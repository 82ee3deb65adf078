"""A dataset's ``sample`` (data/config/dataset.py): the fraction of rows ExampleGen keeps, chosen by a hash of each
row's tf.Example, so the same rows every run whatever the files' order or the Beam workers. The hash is keyed
(``_PERSON``), so the sample does not follow TFX's own hash split: each split keeps about the same fraction."""

from __future__ import annotations

import hashlib
from typing import Any

_PERSON = b"torchtfx-sample"
_SCALE = float(1 << 64)


def in_sample(record: Any, fraction: float) -> bool:
    """Whether ``record`` (a serialized tf.Example, or one to serialize) is in the sample."""
    data = record if isinstance(record, bytes) else record.SerializeToString(deterministic=True)
    digest = hashlib.blake2b(data, digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "big") / _SCALE < fraction
