"""A scriptable, OpenAI-compatible upstream simulator on loopback.

Used by the test-suite, by ``manage.py demo`` and by benchmarks. Deliberately free of
Django: tests import it with and without Django configured.

    from routing.simulator import FakeUpstream, Fail, Reply

Scripting an agent's tool loop (any of the three wires)::

    up.script("m", [], then=When('"tool_result"', Reply("done."),
                                 otherwise=Reply("", tool_call={"name": "Bash",
                                     "arguments": {"command": "echo hi"}})))

``Reply.tool_call`` names any function (or a custom/freeform tool: ``{"name", "input"}``);
``When`` picks by what the request's last conversation item carries; queues
(``script(model, [...], then=...)``) and ``Flaky`` give failures on demand, per request.

See ``script`` for the behaviours, ``server`` for ``FakeUpstream`` and ``app`` for the
HTTP routes (including the ``/_control`` API other processes script it with).
"""

from routing.simulator.script import (
    Behaviour,
    ContentFilter,
    ContextLength,
    Delay,
    DropAfter,
    Empty,
    EndBeforeFinish,
    Fail,
    Flaky,
    KeyEcho,
    Malformed,
    NoDone,
    Reply,
    Reset,
    Silent,
    StallAfter,
    StreamError,
    UsageThenError,
    When,
    behaviour_from_dict,
    to_dict,
)
from routing.simulator.server import FakeUpstream
from routing.simulator.state import RecordedRequest

__all__ = [
    "Behaviour",
    "ContentFilter",
    "ContextLength",
    "Delay",
    "DropAfter",
    "EndBeforeFinish",
    "Empty",
    "Fail",
    "FakeUpstream",
    "Flaky",
    "KeyEcho",
    "Malformed",
    "NoDone",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Silent",
    "StallAfter",
    "StreamError",
    "UsageThenError",
    "When",
    "behaviour_from_dict",
    "to_dict",
]
