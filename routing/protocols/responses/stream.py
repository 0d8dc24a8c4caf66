"""OpenAI Responses streams <-> canonical chunks.

``StreamDecoder``: an ``openai-responses`` upstream's events → canonical chunks (and, when
``keep``, what the client has, for a rescue to go on from). ``StreamEncoder``: canonical
chunks → the ``/v1/responses`` door's standard event sequence with ``sequence_number``;
``continuing`` primes one from a pass-through's decoder. ``failed_event`` ends a stream that
failed after its commit point.
"""

from __future__ import annotations

from typing import Any

from routing.protocols.canonical import EventDecoder, EventEncoder, sse_event, usage_chunk
from routing.protocols.responses.reply import (
    canonical_usage,
    finish_reason,
    message_item,
    new_id,
    reasoning_item,
    response_id,
    response_object,
    response_status,
)
from routing.protocols.responses.tools import (
    ToolNames,
    call_item,
    canonical_call,
    custom_arguments,
    custom_input,
)


class StreamDecoder(EventDecoder):
    """An ``openai-responses`` upstream's events → canonical chunks (``response.completed``
    or ``response.incomplete`` end it; a body that ends before either was cut)."""

    def __init__(self) -> None:
        super().__init__()
        self.next_sequence = 0  # after the latest event's ``sequence_number``
        # What the client has, for a rescue to continue it (kept only when ``keep``: the
        # finished items, the open one, its output index, text part and text so far).
        self.keep = False
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.open_index = -1
        self.open_part: int | None = None
        self.open_text: list[str] = []

    def _track(self, kind: object, event: dict[str, Any]) -> None:
        if kind == "response.output_item.added":
            item = event.get("item")
            self.open = item if isinstance(item, dict) else None
            index = event.get("output_index")
            self.open_index = index if isinstance(index, int) else -1
            self.open_part, self.open_text = None, []
        elif kind == "response.content_part.added":
            index = event.get("content_index")
            self.open_part = index if isinstance(index, int) else None
        elif kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                self.open_text.append(delta)
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, dict):
                self.output.append(item)
            self.open, self.open_index, self.open_part, self.open_text = None, -1, None, []

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        sequence = event.get("sequence_number")
        if isinstance(sequence, int):
            self.next_sequence = sequence + 1
        if self.keep:
            self._track(kind, event)
        if kind == "response.output_text.delta":
            return [self._chunk({"content": event.get("delta", "")})]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [self._chunk({"reasoning_content": event.get("delta", "")})]
        if kind == "response.function_call_arguments.delta":
            return [self._arguments(str(event.get("item_id")), event.get("delta", ""))]
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            itype = item.get("type")
            if itype in ("function_call", "custom_tool_call"):
                # A custom call's text arrives whole with its ``.done`` (below).
                arguments = "" if itype == "custom_tool_call" else None
                return [self._call_start(str(item.get("id")), canonical_call(item, arguments))]
            if isinstance(itype, str) and itype not in ("message", "reasoning"):
                return [self._opaque(itype)]
            return []
        if kind == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") == "custom_tool_call":
                arguments = custom_arguments(item.get("input"))
                return [self._arguments(str(item.get("id")), arguments)]
            return []
        if kind == "response.created":
            response = event.get("response") or {}
            return [self._begin(response.get("id"), response.get("model"))]
        if kind in ("response.completed", "response.incomplete"):
            response = event.get("response") or {}
            self.finished = True
            self.usage = canonical_usage(response.get("usage"))
            finish = finish_reason(response, bool(self._calls))
            out = [self._chunk({}, finish)]
            if self.usage:
                out.append(usage_chunk(self.id, self.model, self.usage))
            return out
        return []


def error_from_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """The error object of a ``response.failed`` / ``error`` event, else None."""
    kind = event.get("type")
    if kind == "response.failed":
        error = (event.get("response") or {}).get("error") or {}
        return {"message": error.get("message") or "response failed", "code": error.get("code")}
    if kind == "error":
        return {"message": event.get("message") or "upstream error", "code": event.get("code")}
    return None


class StreamEncoder(EventEncoder):
    """Canonical chunks → the ``/v1/responses`` door's events, numbered.

    ``response.created`` + ``response.in_progress`` (the preamble) go out with the first
    committed chunk; each output item opens with ``output_item.added`` and closes with its
    ``.done`` events; ``response.completed`` carries the whole output and usage at ``end``.
    """

    def __init__(self, names: ToolNames | None = None) -> None:
        super().__init__()
        self._names = names or {}  # canonical tool name -> as the client declared it
        self._seq = 0
        self._id = ""
        self._model = ""
        self._output: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}

    def _event(self, kind: str, data: dict[str, Any]) -> bytes:
        data = {"type": kind, **data, "sequence_number": self._seq}
        self._seq += 1
        return sse_event(kind, data)

    def _preamble(self, first: dict[str, Any], out: list[bytes]) -> None:
        self._id = response_id(str(first.get("id") or ""))
        self._model = str(first.get("model") or "")
        shell = response_object(self._id, self._model, "in_progress", [], None)
        out.append(self._event("response.created", {"response": shell}))
        out.append(self._event("response.in_progress", {"response": shell}))

    def _begin(self, item: dict[str, Any], out: list[bytes]) -> None:
        self._close(out)
        self._open = item
        self._text = []
        out.append(
            self._event(
                "response.output_item.added", {"output_index": len(self._output), "item": item}
            )
        )

    def _reasoning(self, text: str, out: list[bytes]) -> None:
        if self._open is None or self._open["type"] != "reasoning":
            self._begin(reasoning_item(""), out)
            out.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
            )
        self._text.append(text)
        out.append(
            self._event(
                "response.reasoning_summary_text.delta",
                {
                    "item_id": self._open_id,
                    "output_index": len(self._output),
                    "summary_index": 0,
                    "delta": text,
                },
            )
        )

    @property
    def _open_id(self) -> str:
        return str(self._open["id"]) if self._open is not None else ""

    def _content(self, text: str, out: list[bytes]) -> None:
        if self._open is None or self._open["type"] != "message":
            self._begin(message_item("", status="in_progress"), out)
            out.append(
                self._event(
                    "response.content_part.added",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []},
                    },
                )
            )
        self._text.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                {
                    "item_id": self._open_id,
                    "output_index": len(self._output),
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                },
            )
        )

    def _tool(self, call: dict[str, Any], out: list[bytes]) -> None:
        function = call.get("function") or {}
        index = int(call.get("index") or 0)
        if call.get("id") or index not in self._tools:
            item = call_item(
                str(call.get("id") or f"call_{new_id()}"),
                str(function.get("name") or ""),
                "",
                self._names,
                id_=f"fc_{new_id()}",
                status="in_progress",
            )
            self._begin(item, out)
            self._tools[index] = item
        arguments = function.get("arguments")
        if arguments:
            self._text.append(arguments)
            if self._open is not None and self._open["type"] == "custom_tool_call":
                return  # its text is known whole only at the end (``_close``)
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "delta": arguments,
                    },
                )
            )

    def _close(self, out: list[bytes]) -> None:
        item = self._open
        if item is None:
            return
        text = "".join(self._text)
        index = len(self._output)
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            out.append(
                self._event(
                    "response.output_text.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    },
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "part": part,
                    },
                )
            )
            item = {**item, "status": "completed", "content": [part]}
        elif item["type"] == "reasoning":
            part = {"type": "summary_text", "text": text}
            out.append(
                self._event(
                    "response.reasoning_summary_text.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": 0,
                        "text": text,
                    },
                )
            )
            out.append(
                self._event(
                    "response.reasoning_summary_part.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": 0,
                        "part": part,
                    },
                )
            )
            item = {**item, "summary": [part]}
        elif item["type"] == "custom_tool_call":
            text = custom_input(text)
            out.append(
                self._event(
                    "response.custom_tool_call_input.done",
                    {"item_id": item["id"], "output_index": index, "input": text},
                )
            )
            item = {**item, "input": text, "status": "completed"}
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    {"item_id": item["id"], "output_index": index, "arguments": text},
                )
            )
            item = {**item, "arguments": text, "status": "completed"}
        out.append(self._event("response.output_item.done", {"output_index": index, "item": item}))
        self._output.append(item)
        self._open = None
        self._text = []

    def end(self) -> bytes:
        out: list[bytes] = []
        self._close(out)
        status = response_status(self._finish)
        response = response_object(self._id, self._model, status, self._output, self._usage or {})
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        out.append(self._event(kind, {"response": response}))
        return b"".join(out)

    def error(self, message: str, code: str) -> bytes:
        """``response.failed``: a stream that failed after its commit point."""
        return failed_event(
            self._id or response_id(""), self._model, self._seq, message, code, self._output
        )


def continuing(decoder: StreamDecoder, names: ToolNames | None = None) -> StreamEncoder | None:
    """An encoder that goes on with the pass-through stream ``decoder`` read (kept with
    ``keep``), from where the client is: the same response, its numbering, its finished
    items, and the open message's text part. None where text cannot go on: before the
    response began, or inside a reasoning item, a tool call or another part."""
    item = decoder.open
    if not decoder.id:
        return None
    if item is not None and (
        item.get("type") != "message"
        or not isinstance(item.get("id"), str)
        or decoder.open_part != 0
        or decoder.open_index != len(decoder.output)
    ):
        return None
    encoder = StreamEncoder(names)
    encoder._started = True  # the client has the preamble
    encoder._id, encoder._model = decoder.id, decoder.model
    encoder._seq = decoder.next_sequence
    encoder._output = list(decoder.output)
    encoder._open, encoder._text = item, list(decoder.open_text)
    return encoder


def failed_event(
    id_: str,
    model: str,
    sequence_number: int,
    message: str,
    code: str,
    output: list[dict[str, Any]] | None = None,
) -> bytes:
    """``response.failed`` for the response ``id_`` (clients check it is the same one)."""
    response = response_object(id_, model, "failed", output or [], None)
    response["error"] = {"code": code, "message": message}
    data = {"type": "response.failed", "response": response, "sequence_number": sequence_number}
    return sse_event("response.failed", data)
