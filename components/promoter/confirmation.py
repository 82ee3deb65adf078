"""Who confirms that TF Serving loaded a promoted version before its stable/canary labels move onto it, and the
check a run makes at its start that no earlier promotion still waits for that confirmation.

``staged`` (the default, the safe one): a TF Serving address confirms each load itself; without one the version
is staged in models.config and the labels move once the user confirms (``torchtfx promote --finish``). Until
then no new promotion starts, and a ``torchtfx run`` refuses at its start, in seconds, rather than after training
and evaluating. ``immediate``: the setting itself is the confirmation, for a folder that no TF Serving reads (a
local ``make run``): the labels move in the same promotion. It is refused with a server address, which confirms
loads itself.

It imports nothing: ``pipeline/settings/declared.py`` imports it at the command line's start, and the Promoter's
modules import it (the check at a run's start is ``journal.require_no_pending_promotion``).
"""

from __future__ import annotations

STAGED, IMMEDIATE = "staged", "immediate"
LABEL_CONFIRMATIONS = (STAGED, IMMEDIATE)
SETTING_FLAG = "--confirm-labels"


def moves_at_once(confirm_labels: str, server_address: str | None) -> bool:
    """The labels move in the promotion itself, nobody asked (``immediate`` and no server to ask)."""
    return confirm_labels == IMMEDIATE and not server_address
