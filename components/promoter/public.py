"""What the layer above (pipeline/) uses of the Promoter: the component, where a promotion acts, the label
confirmation settings, and the ``torchtfx promote`` actions.

Each name is imported from its module when first used (components/shared/public_names.py: the CLI starts
without TFX or torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchtfx.components.shared.public_names import lazy_names

if TYPE_CHECKING:  # the names' types, for mypy
    from torchtfx.components.promoter.component import Promoter
    from torchtfx.components.promoter.confirmation import IMMEDIATE, LABEL_CONFIRMATIONS, SETTING_FLAG, STAGED
    from torchtfx.components.promoter.journal import require_no_pending_promotion
    from torchtfx.components.promoter.promotion import finish, rollback, set_champion
    from torchtfx.components.promoter.target import PromotionError, ServingTarget

__all__ = [
    "IMMEDIATE",
    "LABEL_CONFIRMATIONS",
    "SETTING_FLAG",
    "STAGED",
    "Promoter",
    "PromotionError",
    "ServingTarget",
    "finish",
    "require_no_pending_promotion",
    "rollback",
    "set_champion",
]
__getattr__ = lazy_names(
    __name__,
    {
        "Promoter": "torchtfx.components.promoter.component",
        "IMMEDIATE": "torchtfx.components.promoter.confirmation",
        "LABEL_CONFIRMATIONS": "torchtfx.components.promoter.confirmation",
        "SETTING_FLAG": "torchtfx.components.promoter.confirmation",
        "STAGED": "torchtfx.components.promoter.confirmation",
        "require_no_pending_promotion": "torchtfx.components.promoter.journal",
        "finish": "torchtfx.components.promoter.promotion",
        "rollback": "torchtfx.components.promoter.promotion",
        "set_champion": "torchtfx.components.promoter.promotion",
        "PromotionError": "torchtfx.components.promoter.target",
        "ServingTarget": "torchtfx.components.promoter.target",
    },
)
