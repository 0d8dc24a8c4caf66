"""The outcome of a click, said beside the control that was clicked.

A policy form is about 2,000 px tall with its Save at the bottom and its banners at the
top; a group card's row buttons sit far down a long table. A banner the user cannot see is
no feedback, so every action that answers with a re-rendered form or card also renders one
*feedback line* (``templates/dashboard/feedback.html``, ``role="status"``) in the slot of
the control that was pressed: the form's action bar, the target's row, the field's restore
column. Banner and line are rendered from the same view state, so they say the same thing.

Which slot: a view names it in ``where`` (``""`` is the form's action bar, ``"target:<id>"``
a target row, ``"field:<name>"`` a policy field, ``"foot"`` the add-target form under the
targets table); every slot on the page is rendered, hidden unless it is the one named.

Two outcomes never come from the server and are written into the same lines by
``static/dashboard/dashboard.js``: failed requests (``transport``: the nearest slot to the
control) and a save in another window announced over the websocket (``conflict``: the
slots marked ``data-feedback-main``). After a swap the script scrolls the fresh line into
view only when it is off screen (``block: "nearest"``): the page never jumps away from
where the user is working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Tone(StrEnum):
    """How an outcome reads; the names match the banners' classes (``.banner.ok`` …)."""

    OK = "ok"
    ERROR = "error"  # rejected: nothing changed
    CONFLICT = "conflict"  # stale version: nothing changed
    # "transport" (the request never got an answer) exists only in dashboard.js


@dataclass(frozen=True, slots=True)
class Feedback:
    tone: Tone
    text: str


CONFLICT_TEXT = "Not saved: changed in another window — reload to see it."
REJECTED_TEXT = "Not saved: fix the fields marked above. Nothing was changed."


def outcome(
    *,
    conflict: bool = False,
    conflict_text: str = CONFLICT_TEXT,
    general_errors: Sequence[str] = (),
    rejected: bool = False,
    error: str = "",
    notice: str = "",
) -> Feedback | None:
    """The one outcome of an action, most serious first (a conflict hides field errors:
    the user must reload before anything they fix can be saved)."""
    if conflict:
        return Feedback(Tone.CONFLICT, conflict_text)
    if general_errors:
        return Feedback(Tone.ERROR, "Not saved: " + "; ".join(general_errors))
    if rejected:
        return Feedback(Tone.ERROR, REJECTED_TEXT)
    if error:
        return Feedback(Tone.ERROR, error)
    if notice:
        return Feedback(Tone.OK, notice)
    return None
