"""The guard in conftest must really refuse non-loopback addresses (else 'no test reaches the internet' is a hope)."""

import socket

import pytest
from conftest import NetworkRefused


def test_guard_refuses_public_address() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkRefused):
            s.connect(("93.184.216.34", 443))
    finally:
        s.close()


def test_guard_refuses_resolving_provider_hosts() -> None:
    with pytest.raises(NetworkRefused):
        socket.getaddrinfo("api.openai.com", 443)


def test_guard_allows_loopback() -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        c.connect(srv.getsockname())
    finally:
        c.close()
        srv.close()
