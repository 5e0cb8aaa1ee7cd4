"""The client's address, behind as many proxies as settings.TRUSTED_PROXY_COUNT says."""

from __future__ import annotations

from typing import Any

from django.test import RequestFactory

from core.throttling import client_ip


def _request(forwarded: str = "") -> Any:
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1")
    if forwarded:
        request.META["HTTP_X_FORWARDED_FOR"] = forwarded
    return request


def test_without_proxies_the_connection_is_the_client(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 0
    assert client_ip(_request("203.0.113.9")) == "10.0.0.1"


def test_behind_one_proxy_the_address_it_saw_is_the_clients(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    # the client wrote the first entry itself; the proxy appended the second
    assert client_ip(_request("198.51.100.1, 203.0.113.9")) == "203.0.113.9"


def test_behind_two_proxies_the_outer_ones_entry_is_the_clients(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 2
    assert client_ip(_request("198.51.100.1, 203.0.113.9, 10.0.0.2")) == "203.0.113.9"


def test_a_proxy_that_sent_no_header_leaves_the_connection(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_ip(_request()) == "10.0.0.1"
