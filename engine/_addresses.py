"""Which network addresses a fetch may connect to (``_checked_backend``
holds the connector that connects only to an address it has checked).

A source URL is named by an agent, so fetching it is a request the agent
makes from inside the operator's network. Every name is resolved once, every
address it resolves to is checked, and the connection goes to a checked
address (a second lookup could answer differently: DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[IPAddress]]

# Cloud instance-metadata endpoints that are not already link-local or
# private (169.254.169.254 is link-local, fd00:ec2::254 unique-local).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (legacy)
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*$")


class AddressRefused(ConnectionRefusedError):
    """A fetch would connect to an address the operator has not allowed."""

    def __init__(self, host: str, address: str, why: str) -> None:
        super().__init__(f"{host} resolves to {address}, {why}; allow it with [fetch] allow in the policy file")
        self.host = host
        self.address = address
        self.why = why


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (numeric forms such as ``127.1``,
    ``2130706433`` or ``0x7f000001`` are read by the system, as a socket would)."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    seen: dict[IPAddress, None] = {}
    for *_, sockaddr in infos:
        seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(seen)


def _embedded(address: IPAddress) -> list[IPAddress]:
    """The address and any IPv4 address it carries (mapped, 6to4, Teredo, NAT64)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return [address]
    inner = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    if address in _NAT64:
        inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    # the carried address first: it is where the packets would end up
    return [*(a for a in inner if a is not None), address]


def why_internal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or None if it is."""
    for a in _embedded(address):
        if a.is_loopback:
            return "a loopback address"
        if a.is_unspecified:
            return "the unspecified address"
        if a.is_link_local:
            return "a link-local address"
        if a.is_multicast:
            return "a multicast address"
        if a in METADATA:
            return "a cloud metadata address"
        if a.is_private or not a.is_global:
            return "a private or reserved address"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """The operator's allow-list. Host names match exactly (case-insensitive);
    networks match every address in them. ``allow_local`` (development)
    allows every address."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = field(default_factory=frozenset)
    allow_local: bool = False

    @classmethod
    def of(cls, entries: Iterable[str], *, allow_local: bool = False) -> AddressPolicy:
        """Parse allow-list entries: ``10.0.0.0/8``, ``192.168.1.5``, ``wiki.internal``."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"{entry!r} is neither a host name nor a network")
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                name = entry.strip().lower().rstrip(".")
                if not _HOST_NAME.match(name) or name.replace(".", "").isdigit():
                    raise ValueError(f"{entry!r} is neither a host name nor a network") from None
                hosts.add(name)
        return cls(tuple(networks), frozenset(hosts), allow_local)

    def refusal(self, host: str, address: IPAddress) -> str | None:
        """Why connecting to ``address`` (resolved from ``host``) is refused."""
        why = why_internal(address)
        if why is None or self.allow_local:
            return None
        if host.strip("[]").lower().rstrip(".") in self.hosts:
            return None
        if any(a in n for a in _embedded(address) for n in self.networks if a.version == n.version):
            return None
        return why
