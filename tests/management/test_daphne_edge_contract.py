"""``routing.management.daphne_edge``'s contract with the daphne and Twisted internals it
reaches into (as ``tests/api/test_django_seam_contract.py`` is for Django's).

If an upgrade changes what the edge relies on, these fail loudly: otherwise a body could be
read whole again before its key is checked, a slow client hold a connection for ever, or a
stream pile up in memory behind a client that stopped reading, in silence.
(``tests/management/test_server_edge.py`` checks the behaviour on a real process.)
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from twisted.web import http

from routing.management import daphne_edge


def source(function: object) -> str:
    return " ".join(inspect.getsource(function).split())  # whitespace-insensitive


def test_the_installed_daphne_and_twisted_are_the_ones_the_edge_was_written_for() -> None:
    installed = {name: version(name) for name in daphne_edge.WRITTEN_FOR}
    assert installed == daphne_edge.WRITTEN_FOR, (
        "routing/management/daphne_edge.py reaches into daphne's and Twisted's private "
        "parts; check each of them against the new versions (its docstring lists them), "
        "then update WRITTEN_FOR and the pins in pyproject.toml"
    )


def test_daphne_makes_its_factory_on_the_attribute_the_edge_swaps() -> None:
    run = source(Server.run)
    assert "self.http_factory = HTTPFactory(self)" in run
    assert "ep.listen(self.http_factory)" in run
    assert isinstance(daphne_edge.EdgeServer.__dict__["http_factory"], property)


def test_daphnes_send_and_access_log_go_through_the_methods_the_edge_overrides() -> None:
    assert "send=partial(self.handle_reply, protocol)" in source(Server.create_application)
    assert "self.server.log_action(" in source(WebRequest.handle_reply)
    assert '"path": uri' in source(WebRequest.handle_reply)  # the target, query and all
    assert "protocol.requestFactory = WebRequest" in source(HTTPFactory.buildProtocol)


def test_twisted_builds_a_channel_as_the_edge_does() -> None:
    factory = source(http._genericHTTPChannelProtocolFactory)
    assert "_GenericHTTPChannelProtocol(HTTPChannel())" in factory


def test_a_request_ends_at_its_headers_when_gotlength_sets_the_length_to_zero() -> None:
    line = source(http.HTTPChannel.lineReceived)
    # the request target is kept before the headers; gotLength runs before the length test
    assert "self._path = request" in line
    assert "self.allHeadersReceived() if self.length == 0: self.allContentReceived()" in line
    headers = source(http.HTTPChannel.allHeadersReceived)
    assert headers.index("self.persistent = self.checkPersistence(") < headers.index(
        "req.gotLength(self.length)"
    )
    assert headers.index("req.gotLength(self.length)") < headers.index("_send100Continue")
    done = source(http.HTTPChannel.requestDone)
    assert "if self.persistent:" in done and "else: self.loseConnection()" in done


def test_the_header_limit_and_the_states_the_edge_reads_are_twisteds() -> None:
    assert http.HTTPChannel.totalHeadersSize == 16384
    line = source(http.HTTPChannel.lineReceived)
    assert "self._receivedHeaderSize += len(line)" in line
    assert "self._handlingRequest = True" in source(http.HTTPChannel.allContentReceived)
    assert "self._waitingForTransport = True" in source(http.HTTPChannel.pauseProducing)
    assert "self._waitingForTransport = False" in source(http.HTTPChannel.resumeProducing)
    made = source(http.HTTPChannel.connectionMade)
    assert "self._networkProducer.registerProducer(self, True)" in made
