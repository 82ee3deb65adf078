"""The one base class of every pipeline stage's deliberate stop: bad data, a model that does not train, export or
match its parity check, a champion that cannot be resolved, a serving change or submission that failed. Its
message is meant for the user and names the fix; the command line shows it without a traceback.

Its own module without imports, so the command line can test ``isinstance(err, StageFailure)`` without importing
TensorFlow or torch to start. A ``RuntimeError``, as each of these errors was before it had a base of its own.
"""

from __future__ import annotations


class StageFailure(RuntimeError):
    """A stage stopped the run on purpose, with a message meant for the user."""
