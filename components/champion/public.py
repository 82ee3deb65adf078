"""What the layer above (pipeline/) uses of the ChampionModel component: the component, and the champion it resolves
(also ``torchtfx predict``'s model).

Each name is imported from its module when first used (components/shared/public_names.py: the CLI starts
without TFX or torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchtfx.components.shared.public_names import lazy_names

if TYPE_CHECKING:  # the names' types, for mypy
    from torchtfx.components.champion.component import ChampionModel
    from torchtfx.components.champion.resolve import Champion, checked_version, resolve_champion

__all__ = [
    "Champion",
    "ChampionModel",
    "checked_version",
    "resolve_champion",
]
__getattr__ = lazy_names(
    __name__,
    {
        "ChampionModel": "torchtfx.components.champion.component",
        "Champion": "torchtfx.components.champion.resolve",
        "checked_version": "torchtfx.components.champion.resolve",
        "resolve_champion": "torchtfx.components.champion.resolve",
    },
)
