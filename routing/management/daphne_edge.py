"""daphne with Switchyard's server edge (SPEC §9): ``python -m routing.management.daphne_edge``
takes daphne's command line and serves as daphne does, plus:

- **A bounded read.** Twisted's ``Request`` reads a request's whole body (into memory, then
  a temporary file) before daphne hands the request to the application, so the rules of
  ``routing.api.edge`` are applied here, while reading: a body the answer cannot depend on
  (declared over the limit, or for ``/v1`` without a known key) is not read at all: the
  request goes to the application at once with an empty body, the response closes the
  connection; a body without a declared length is counted and refused (413) past the limit.
- **A whole-request deadline.** A request's line, headers and body must arrive within
  ``SWITCHYARD_REQUEST_READ_TIMEOUT_S`` of the connection's start or of the previous
  response's end: then a 408 (nothing received: the connection is just closed). Twisted's own timeout restarts at every byte, so a client trickling one byte
  every few seconds held a connection for ever.
- **431** for a request line and headers over 16 KB (Twisted answered a bare 400, or for
  one line over 16 KB closed the connection with no status at all).
- **Backpressure.** A response body's ``send`` returns once Twisted's write buffer is below
  its high-water mark (the transport pauses its producer, the channel, above it): a client
  that stops reading a stream stops the relay reading the upstream, instead of the stream
  piling up in the server's memory.
- **A scrubbed access log**: credentials in a query string are written as ``[scrubbed]``.

Every refusal of the edge's own is written, then the connection is half-closed and what the
client still sends is read and dropped for up to ``LINGER_S`` (closing with unread input
would reset the connection, and the client could lose the answer).

This module alone reaches into daphne's and Twisted's private parts (as
``routing.api.django_seam`` does into Django's), for the versions in :data:`WRITTEN_FOR`
(pinned in pyproject.toml); ``tests/management/test_daphne_edge_contract.py`` checks each:

- ``HTTPChannel``: ``_path`` (the request target, set before ``gotLength``), ``length``
  (setting it to 0 in ``gotLength`` ends the request at its headers), ``persistent``,
  ``_receivedHeaderSize`` and ``totalHeadersSize``, ``_handlingRequest``,
  ``_waitingForTransport`` (set by ``pauseProducing``), ``_networkProducer``, ``requestDone``
  closing a non-persistent connection through ``loseConnection``; ``_GenericHTTPChannelProtocol``
  (what ``HTTPFactory.protocol`` builds around a channel).
- daphne's ``Server.run`` assigning ``self.http_factory`` before listening with it (the
  property below swaps in ours), ``Server.handle_reply`` being the application's ``send``,
  and ``Server.log_action`` receiving the path with its query.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.parse import unquote

# daphne.server first: importing it installs the asyncio reactor (as daphne's CLI does).
import daphne.server  # type: ignore[import-untyped]  # noqa: F401
from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]
from daphne.http_protocol import HTTPFactory, WebRequest  # type: ignore[import-untyped]
from daphne.server import Server
from twisted.web import http

from routing.api.edge import (
    body_limit,
    body_wanted,
    compile_table,
    edge_error,
    scrub_query,
    too_large,
)

WRITTEN_FOR = {"daphne": "4.2.3", "twisted": "26.10.0"}
LINGER_S = 5.0  # how long a refused client's remaining input is read and dropped

REASONS = {
    408: b"Request Timeout",
    413: b"Content Too Large",
    431: b"Request Header Fields Too Large",
}
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


# Twisted's annotations are partial (zope interfaces, untyped methods): its channel is
# handled as Any here, as daphne's untyped classes are.
_HTTPChannel: Any = http.HTTPChannel


class EdgeChannel(_HTTPChannel):  # type: ignore[misc]
    """One connection: the deadline, the 431, lingering closes and the drain signal."""

    read_timeout = 0.0  # seconds; set by the factory from SWITCHYARD_REQUEST_READ_TIMEOUT_S
    unread = False  # a request's body was left unread: close by lingering
    _lingering = False
    _received = 0  # bytes of the request being read
    _deadline: Any = None
    _linger_call: Any = None
    _drained: asyncio.Future[None] | None = None

    def connectionMade(self) -> None:
        super().connectionMade()
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        if self._lingering:
            return
        if not self._handlingRequest:
            self._received += len(data)
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self._lingering:  # refused: the lines already buffered are not parsed
            return
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self.refuse(_header_fields_too_large(self.totalHeadersSize))
            return
        super().lineReceived(line)

    def rawDataReceived(self, data: bytes) -> None:
        if not self._lingering:
            super().rawDataReceived(data)

    def lineLengthExceeded(self, line: bytes) -> None:
        self.refuse(_header_fields_too_large(self.totalHeadersSize))

    def allContentReceived(self) -> None:
        self._disarm()
        super().allContentReceived()

    def requestDone(self, request: Any) -> None:
        if self.persistent:
            self._arm()  # before: it may go straight on to a pipelined request
        super().requestDone(request)

    def loseConnection(self) -> None:
        if self.unread:  # the response is written; the body it did not need may still come
            self.linger()
            return
        super().loseConnection()

    def connectionLost(self, reason: Any) -> None:
        self._disarm()
        if self._linger_call is not None and self._linger_call.active():
            self._linger_call.cancel()
        super().connectionLost(reason)
        self._wake()

    # --- the deadline ----------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        self._received = 0
        if self.read_timeout > 0:
            self._deadline = self.callLater(self.read_timeout, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self._handlingRequest or self._lingering:
            return
        if not self._received:  # an idle keep-alive connection: nothing to answer
            super().loseConnection()
            return
        self.refuse(
            edge_error(
                408,
                f"The request did not arrive within {self.read_timeout:g} s.",
                "request_timeout",
            )
        )

    # --- refusing and closing --------------------------------------------------------

    def refuse(self, answer: Answer) -> None:
        """Write the edge's own answer and close the connection by lingering."""
        status, headers, body = answer
        reason = REASONS.get(status) or http.RESPONSES.get(status, b"")
        head = b"HTTP/1.1 %d %s\r\n" % (status, reason)
        head += b"".join(b"%s: %s\r\n" % header for header in headers) + b"\r\n"
        self._disarm()
        if self.transport is not None:
            self.transport.write(head + body)
        self.linger()

    def linger(self) -> None:
        """Half-close once what is written is sent, and read and drop the client's input
        until it closes, for at most ``LINGER_S``."""
        if self._lingering or self.transport is None:
            return
        self._lingering = True
        self._disarm()
        self._networkProducer.unregisterProducer()
        transport = self.transport
        try:
            transport.loseWriteConnection()
        except AttributeError:  # a transport that cannot half-close
            transport.loseConnection()
            return
        transport.resumeProducing()  # reading may be paused (a body waiting its turn)
        self._linger_call = self.callLater(LINGER_S, transport.abortConnection)

    # --- backpressure ----------------------------------------------------------------

    def resumeProducing(self) -> None:
        super().resumeProducing()
        self._wake()

    def drained(self) -> asyncio.Future[None] | None:
        """A future done when the transport's write buffer is back under its high-water
        mark (or the connection is gone); None when it is under it now."""
        if not self._waitingForTransport or self.transport is None:
            return None
        if self._drained is None or self._drained.done():  # done: cancelled with its waiter
            self._drained = asyncio.get_running_loop().create_future()
        return self._drained

    def _wake(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)


class EdgeRequest(WebRequest):  # type: ignore[misc]
    """daphne's request, applying the bounded-read rules while its body arrives."""

    _limit: int | None = None
    _received = 0
    _over = False

    def gotLength(self, length: int | None) -> None:
        channel = self.channel
        if length != 0 and not body_wanted(*_target(channel._path), _headers(self)):
            # Not read at all: the request ends at its headers and goes to the application
            # now (it answers from the headers); the connection closes after the answer.
            channel.persistent = False
            channel.length = 0
            channel.unread = True
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" for it
            super().gotLength(0)
            return
        self._limit = body_limit()
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self._over:
            return
        if self._limit is not None:  # only a body without Content-Length can pass it
            self._received += len(data)
            if self._received > self._limit:
                self._over = True
                self.channel.refuse(too_large(self._limit))
                return
        super().handleContentChunk(data)


def _target(raw: bytes) -> tuple[str, bytes]:
    """The request target as daphne puts it in the scope: (unquoted path, query)."""
    path, _, query = raw.partition(b"?")
    return unquote(path.decode("latin-1")), query


def _headers(request: Any) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower(), value)
        for name, values in request.requestHeaders.getAllRawHeaders()
        for value in values
    ]


def _header_fields_too_large(limit: int) -> Answer:
    return edge_error(
        431,
        f"The request line and headers are over {limit} bytes.",
        "request_header_fields_too_large",
    )


class EdgeHTTPFactory(HTTPFactory):  # type: ignore[misc]
    def __init__(self, server: Server, read_timeout: float) -> None:
        super().__init__(server)
        self.read_timeout = read_timeout

    def protocol(self) -> Any:  # what Twisted's Factory.buildProtocol calls
        channel = EdgeChannel()
        channel.read_timeout = self.read_timeout
        return http._GenericHTTPChannelProtocol(channel)

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = EdgeRequest
        return protocol


class EdgeServer(Server):  # type: ignore[misc]
    """daphne's server with ``EdgeHTTPFactory``, a draining ``send`` and a scrubbed log."""

    @property
    def http_factory(self) -> EdgeHTTPFactory:
        return self._edge_factory

    @http_factory.setter
    def http_factory(self, _daphnes: Any) -> None:  # Server.run makes its own: ours serves
        from routing.conf import switchyard_settings

        self._edge_factory = EdgeHTTPFactory(self, switchyard_settings().REQUEST_READ_TIMEOUT_S)

    def run(self) -> None:
        compile_table()  # so the first requests are told apart by their keys
        super().run()

    async def handle_reply(self, protocol: Any, message: dict[str, Any]) -> None:
        await super().handle_reply(protocol, message)
        if message.get("more_body") and isinstance(protocol, EdgeRequest):
            channel = protocol.channel
            drained = channel.drained() if isinstance(channel, EdgeChannel) else None
            if drained is not None:
                await drained

    def log_action(self, protocol: Any, action: str, details: dict[str, Any]) -> None:
        path = details.get("path")
        if isinstance(path, str):
            details = {**details, "path": scrub_query(path)}
        super().log_action(protocol, action, details)


class EdgeCommandLineInterface(CommandLineInterface):  # type: ignore[misc]
    server_class = EdgeServer


def main(argv: list[str] | None = None) -> None:
    EdgeCommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
