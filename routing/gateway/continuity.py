"""Conversation continuity on the call path: provenance in, rewritten attempts out.

One :class:`Continuity` per call. It reads what the state store knows about the call's
:class:`Scope` (its session key; without one, its group and client key) at most once, and
derives each attempt's outbound body from the *original* request for the target that
attempt goes to (SPEC §13: a call that fails over inside itself decides per attempt).

Cost on the common path: one small read (``provenance_targets``), none on a first turn.
When every remembered turn of the scope was produced by the target now chosen — a session
that never switched — the history is not looked at at all, unless the target sets
``break_tool_loop`` (that rule is about the request alone, so such a target always reads
it). Only a scope with turns from other targets has its assistant turns fingerprinted and
looked up (one more read), then rewritten.

A history that cannot be read safely (an unknown shape, or anything a view trips on)
passes through untouched, is counted in :data:`STATS`, and says so in the rewrites; it
never fails the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from routing.continuity.chat import (
    REASONING_CHANNELS,
    ChatHistory,
    message_fingerprint,
)
from routing.continuity.effort import (
    EffortPolicy,
    apply_effort,
    apply_gemini_effort,
    apply_messages_effort,
    apply_responses_effort,
)
from routing.continuity.gemini import GeminiHistory, has_model_turns
from routing.continuity.history import HistoryView
from routing.continuity.messages import MessagesHistory
from routing.continuity.provenance import (
    PROVENANCE_TTL_S,
    SESSION_TURNS_LIMIT,
    SHARED_TURNS_LIMIT,
    Producer,
    RunningFingerprint,
)
from routing.continuity.responses import ResponsesHistory, has_output_items
from routing.continuity.rewrite import rewrite_history
from routing.gateway.table import TargetSpec
from routing.state.base import HealthStore

log = logging.getLogger("switchyard.gateway")
UNREWRITABLE = "history-unrewritable"
View = type[ChatHistory] | type[MessagesHistory] | type[ResponsesHistory] | type[GeminiHistory]
EffortRule = Callable[
    [dict[str, Any], EffortPolicy, Sequence[str]], tuple[dict[str, Any], list[str]]
]
# The reasoning-effort policy in each protocol's own fields (SPEC §13).
EFFORT_RULES: dict[View, EffortRule] = {
    ChatHistory: apply_effort,
    MessagesHistory: apply_messages_effort,
    ResponsesHistory: apply_responses_effort,
    GeminiHistory: apply_gemini_effort,
}


@dataclass(slots=True)
class Stats:
    """Process-wide counters for ``/metrics`` (and for tests to see what a call paid)."""

    rewritten: int = 0  # attempts whose history was rewritten
    unrewritable: int = 0  # histories passed through because they could not be read
    looked_up: int = 0  # calls whose history was fingerprinted and looked up


STATS = Stats()


class Scope(NamedTuple):
    """Whose provenance a call reads and writes: its session; without one, its group and
    client key. Calls without a session share a scope, and one switch in it makes every
    later multi-turn call of the scope look its history up; keeping those scopes apart by
    group and key leaves the calls of a group that never switched paying nothing."""

    session: str | None
    group: str = ""
    key_id: int | None = None

    @property
    def name(self) -> str:
        """The store's scope key. The leading NUL keeps a sessionless scope apart from any
        session key a client could send."""
        if self.session:
            return self.session
        return f"\x00{self.group}\x00{'' if self.key_id is None else self.key_id}"


class Continuity:
    def __init__(
        self,
        store: HealthStore,
        body: dict[str, Any],
        scope: Scope,
        *,
        view: View = ChatHistory,
    ) -> None:
        """``view``: the HistoryView of ``body``'s protocol (chat; Messages, Responses or
        Gemini for those doors' pass-through to targets of their own kind)."""
        self.store = store
        self.body = body
        self._view = view
        # (a view's subclass speaks its protocol: the first rule up its MRO)
        self._effort = next(EFFORT_RULES[c] for c in view.__mro__ if c in EFFORT_RULES)
        self.scope = scope.name
        self._shared = not scope.session  # calls without a session share the scope
        self._targets: frozenset[str] | None = None  # read once, on the first attempt
        self._has_turns = False  # the history holds an assistant turn
        self._producers: dict[int, Producer] | None = None
        self._read = False  # the shape was checked by building a view of the body
        self._unreadable = False

    async def outbound(self, target: TargetSpec) -> tuple[dict[str, Any], list[str]]:
        """The body to send ``target`` (``model`` rewritten) and the rewrites made: the
        history rules, then the target's effort policy in the body's own protocol."""
        body, rewrites = await self._history_for(target)
        body, effort = self._effort(body, target.reasoning_effort, target.efforts)
        return {**body, "model": target.model}, rewrites + effort

    async def _history_for(self, target: TargetSpec) -> tuple[dict[str, Any], list[str]]:
        if self._targets is None:
            # A first turn (no assistant message yet) has nothing to rewrite: no store read.
            self._has_turns = _has_assistant_turn(self.body, self._view)
            self._targets = (
                await self.store.provenance_targets(self.scope) if self._has_turns else frozenset()
            )
        rules = target.continuity
        if self._targets and not self._targets <= {target.key}:
            producers = await self._load_producers()
        elif rules.break_tool_loop and self._has_turns:
            # The tool-loop rule needs no provenance (SPEC §13: its three conditions are
            # about the request alone), so a target with the switch reads the history even
            # when the session never switched; any other target does not look at it.
            producers = {}
        else:
            return self.body, []  # nothing remembered from another target: untouched
        if self._unreadable:
            return self.body, [UNREWRITABLE]
        if not producers and not rules.break_tool_loop:
            return self.body, []
        try:
            view = self._view(self.body, checked=self._read)
            self._read = True
            rewrites = rewrite_history(view, producers, rules)
            body = view.body()
        except Exception as exc:  # bad input never fails a call
            return self._pass_unread(exc)
        if rewrites:
            STATS.rewritten += 1
        return body, rewrites

    def _pass_unread(self, exc: Exception) -> tuple[dict[str, Any], list[str]]:
        """A history that cannot be read safely — an unknown shape, or anything a view
        trips on — goes out untouched, counted once per call, and never fails the call."""
        if not self._unreadable:
            self._unreadable = True
            STATS.unrewritable += 1
            log.warning("history passed through unrewritten: %s: %s", type(exc).__name__, exc)
        return self.body, [UNREWRITABLE]

    async def _load_producers(self) -> dict[int, Producer]:
        if self._producers is not None:
            return self._producers
        self._producers = {}
        try:
            view = self._view(self.body)
            self._read = True
            prints = _wanted_fingerprints(view)
        except Exception as exc:  # bad input never fails a call
            self._pass_unread(exc)
            return self._producers
        if prints:
            STATS.looked_up += 1
            known = await self.store.provenance_lookup(self.scope, list(set(prints.values())))
            producers = {key: Producer.from_key(key) for key in set(known.values())}
            self._producers = {
                turn: producers[known[fp]] for turn, fp in prints.items() if fp in known
            }
        return self._producers

    def release(self) -> None:
        """The call is past its commit point: only :meth:`remember` is left, and it needs
        nothing of the request (``CallState.release_request``)."""
        self.body = {}
        self._producers = None

    async def remember(self, target: TargetSpec, turn: ServedTurn | None) -> None:
        """Record that ``target`` produced the answer just served."""
        if turn is None:
            return
        fingerprint = turn.fingerprint()
        if fingerprint is None and not turn.response_id:
            return
        await self.store.provenance_record(
            self.scope,
            fingerprint,
            target.key,
            response_id=turn.response_id,
            ttl_s=PROVENANCE_TTL_S,
            limit=SHARED_TURNS_LIMIT if self._shared else SESSION_TURNS_LIMIT,
        )


def _wanted_fingerprints(view: HistoryView) -> dict[int, str]:
    """Fingerprints of the turns that need a producer: those with reasoning to strip, and
    the last one (the notice). The others are not fingerprinted at all."""
    turns = view.assistant_turns()
    wanted = [t for t in turns if view.has_reasoning(t)]
    if turns and (not wanted or wanted[-1] != turns[-1]):
        wanted.append(turns[-1])
    return {turn: fp for turn in wanted if (fp := view.fingerprint(turn))}


def _has_assistant_turn(body: dict[str, Any], view: View) -> bool:
    """Whether the history may hold an assistant turn, at a glance (no shape checks: an
    odd value says yes, and the view decides — and counts — what it is)."""
    if view is ResponsesHistory:
        return has_output_items(body)
    if view is GeminiHistory:
        return has_model_turns(body)
    messages = body.get("messages")
    if type(messages) is not list:
        return True
    return any(type(m) is not dict or m.get("role") == "assistant" for m in messages)


class ServedTurn:
    """The assistant turn an answer carries (choice 0), for provenance. A stream's turn is
    fingerprinted as its deltas arrive (:class:`RunningFingerprint`), so a long stream
    holds a few numbers for it, not every delta it relayed."""

    __slots__ = ("_complete", "_fingerprint", "_running", "response_id")

    def __init__(self, response_id: str | None = None) -> None:
        self.response_id = response_id
        self._running = RunningFingerprint()
        self._fingerprint: str | None = None
        self._complete = False

    @classmethod
    def from_completion(cls, completion: dict[str, Any]) -> ServedTurn | None:
        choices = completion.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return None
        rid = completion.get("id")
        turn = cls(rid if isinstance(rid, str) else None)
        turn._fingerprint, turn._complete = message_fingerprint(message), True
        return turn

    def feed(self, chunk: dict[str, Any]) -> None:
        """One streamed chunk."""
        if self.response_id is None and isinstance(rid := chunk.get("id"), str):
            self.response_id = rid
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return
        choice = choices[0]
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        running = self._running
        if isinstance(content := delta.get("content"), str):
            running.add_text(content)
        for name in REASONING_CHANNELS:
            if isinstance(value := delta.get(name), str):
                running.add_reasoning(value)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict) and isinstance(call_id := call.get("id"), str):
                    running.add_tool_call_id(call_id)

    def feed_content(self, raw: bytes) -> None:
        """``feed`` of a chunk that is one content delta of choice 0 and nothing else
        (``routing.upstream.sse.PlainDeltas``), given the content's raw JSON string
        body, valid UTF-8: the bytes go into the checksum as they are unless they hold an
        escape (a parse of the whole chunk is what this saves)."""
        if b"\\" in raw:
            self._running.add_text(orjson.loads(b'"' + raw + b'"'))
        else:
            self._running.add_text_utf8(raw)

    def fingerprint(self) -> str | None:
        return self._fingerprint if self._complete else self._running.value()
