"""A connection the event loop accepted just as `refind serve` began to shut down.

uvicorn's shutdown stops accepting, then closes the idle connections it knows of. A connection accepted a moment
before — its protocol made a turn of the event loop later — was never told: it served every request its client sent
(200s, stored) for as long as the client kept sending, and the shutdown waited on it. A probe of round 31 (16 clients
posting Adds to `refind serve --workers 2`, Ctrl-C) found a worker still answering 90 s on, and new connections
queued unanswered on the supervisor's socket meanwhile. No ordering of signals sent from outside puts the accept in
that moment every time, so the test runs real uvicorn in this process, with refind's protocol and app, on a real
loopback socket, and stops the listener exactly there: after the accept, before the protocol is told of its connection."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest
import uvicorn

from refind_cli.server.app import ServerSettings, create_app
from refind_cli.server.connections import GuardedH11Protocol
from refind_cli.store import Store

pytestmark = pytest.mark.slow  # a real server


def test_a_connection_accepted_as_the_listener_closes_is_closed_unanswered(db_path):
    app = create_app(ServerSettings(db=db_path, mode="bm25", expire_interval_s=0, retention_given="off"))
    server: uvicorn.Server

    class AcceptedAsShutdownBegins(GuardedH11Protocol):
        """refind's protocol, told of its connection after the listener stopped: as uvicorn's shutdown does first."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            for listener in server.servers:
                listener.close()
            super().connection_made(transport)

    config = uvicorn.Config(app, host="127.0.0.1", port=0, http=AcceptedAsShutdownBegins, log_config=None)
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    serving = threading.Thread(target=lambda: loop.run_until_complete(server.serve()), daemon=True)
    serving.start()
    try:
        while not server.started:
            assert serving.is_alive()
            threading.Event().wait(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        body = json.dumps(
            {
                "request_id": "late",
                "user_id": "alice",
                "session_id": "s1",
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        request = (
            f"POST /v1/memories/add HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(request)
            answer = b""
            try:
                while chunk := client.recv(65536):
                    answer += chunk
                    if b"\r\n\r\n" in answer:
                        break
            except ConnectionResetError:
                pass
        assert answer == b"", answer[:200]  # closed before reading a request, as uvicorn closes an idle one
        assert not server.server_state.connections
    finally:
        server.should_exit = True
        serving.join(30)
    assert not serving.is_alive()
    loop.close()
    with Store(db_path, retention_days=None) as store:
        assert store.counts()["requests"] == 0
