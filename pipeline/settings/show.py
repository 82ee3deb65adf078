"""``torchtfx config show``: every resolved setting, its value, and where the value came from."""

from __future__ import annotations

import json
from typing import Any

from torchtfx.data.config.metrics import TASK_GATES
from torchtfx.pipeline.settings.declared import BY_KEY
from torchtfx.pipeline.settings.layers import DEFAULT
from torchtfx.pipeline.settings.resolve import Resolved, ResolvedSettings


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _shown(key: str, resolved: Resolved) -> str:
    """The value; a default computed at run time (the packaged data, <root>/serving/<dataset>) by its rule."""
    rule = BY_KEY[key].default_text
    return f"({rule})" if resolved.source == DEFAULT and rule else _text(resolved.value)


def settings_table(resolved: ResolvedSettings) -> list[str]:
    """One line per setting, ``key  value  source``, in columns, sorted by key; the gates of other tasks than the
    dataset's are left out (they cannot be set for it)."""
    task = resolved.loaded_dataset.task
    other_tasks = {f"gates.{field}" for other, fields in TASK_GATES.items() if other != task for field in fields}
    rows = [(key, _shown(key, r), r.source) for key, r in sorted(resolved.values.items()) if key not in other_tasks]
    key_width = max(len(row[0]) for row in rows)
    value_width = min(max(len(row[1]) for row in rows), 40)
    header = f"{'setting':<{key_width}}  {'value':<{value_width}}  source"
    return [header] + [f"{key:<{key_width}}  {value:<{value_width}}  {source}" for key, value, source in rows]
