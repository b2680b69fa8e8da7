"""A connector that connects only to an address it has checked
(``_addresses`` says which), for the fetches' HTTP client. A module of its
own: httpcore is imported when something is fetched, not with the policy."""

from __future__ import annotations

import typing

import httpcore

from ._addresses import AddressPolicy, AddressRefused, Resolver, resolve


class CheckedBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, connecting only to checked addresses.

    TLS still verifies (and sends SNI for) the host name: only the TCP
    connection is made to the address, so a certificate is checked as usual.
    """

    def __init__(self, policy: AddressPolicy, resolver: Resolver = resolve) -> None:
        self.policy = policy
        self.resolver = resolver
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.resolver(host, port)
        except (OSError, UnicodeError, ValueError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        for address in addresses:  # every answer: one bad address refuses the name
            why = self.policy.refusal(host, address)
            if why is not None:
                raise AddressRefused(host, str(address), why)
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._sockets.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise AddressRefused(path, path, "a unix socket")

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)
