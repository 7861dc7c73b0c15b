"""Where task images may be fetched from: public addresses, Label Studio's own origin, and what
``CAMSERVE_TASK_IMAGE_ALLOW`` opens.

A task names its image, and whoever can call ``/labelstudio/predict`` writes the task: without
this policy camserve would fetch any URL for them, loopback, the private network and the cloud
metadata address included (server-side request forgery). So every address a connection would
go to is classified here with the standard ``ipaddress`` module, and anything that is not a
public unicast address is refused unless allowed:

* IPv4-mapped (``::ffff:a.b.c.d``) and NAT64 (``64:ff9b::/96``) addresses are judged by the IPv4
  address they carry; 6to4 and Teredo addresses must carry public IPv4 addresses too;
* loopback, unspecified, private (RFC 1918, ``fc00::/7``), shared (``100.64.0.0/10``),
  link-local (``169.254.0.0/16``, the metadata address among them, ``fe80::/10``), multicast,
  site-local, documentation and every other reserved range is refused.

Allowed without asking: Label Studio's own host and port (``LABEL_STUDIO_URL``). An allow-list
entry is a host name (``minio``), a host and port (``minio:9000``), an address
(``10.0.0.5``, ``10.0.0.5:9000``, ``[fd00::5]:9000``) or a network (``10.0.0.0/8``). A host
name entry trusts that name, whatever it resolves to; an address or network entry admits those
addresses, whatever name led there.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Self

__all__ = [
    "ALLOW_SETTING",
    "AllowRule",
    "DestinationPolicy",
    "IPAddress",
    "non_public_class",
    "parse_allow_rule",
]

ALLOW_SETTING = "CAMSERVE_TASK_IMAGE_ALLOW"
"""The setting that opens destinations; error messages point at it."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
"""The well-known NAT64 prefix: its last 32 bits are the IPv4 address a NAT64 gateway reaches."""
PRIVATE = tuple(
    ipaddress.ip_network(network)
    for network in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
SHARED = ipaddress.IPv4Network("100.64.0.0/10")
"""Carrier-grade NAT's shared address space (RFC 6598)."""
NOT_GLOBAL_ELSEWHERE = tuple(
    ipaddress.ip_network(network) for network in ("fec0::/10", "3fff::/20", "5f00::/16")
)
"""Ranges that older ``ipaddress`` tables count as global: IPv6 site-local (deprecated, still
routed inside some sites), the documentation prefix of RFC 9637, and the SRv6 SID block."""
DESTINATION_FORM = re.compile(
    r"(?P<host>\[(?P<v6>[0-9a-f:.]+)\]|[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?)(:(?P<port>[0-9]{1,5}))?",
    re.IGNORECASE,
)
"""A host name, an IPv4 address or a bracketed IPv6 address, with an optional port."""


def non_public_class(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is (``"loopback"``, ``"private"``,
    ``"link-local"``, ...), or None when it is a public unicast address."""
    carried = _translated_ipv4(address)
    if carried is not None:
        return non_public_class(carried)
    own = _own_class(address)
    if own is not None:
        return own
    for tunnelled in _tunnelled_ipv4(address):
        if non_public_class(tunnelled) is not None:
            return "tunnelled non-public"
    return None


def _own_class(address: IPAddress) -> str | None:
    """The first class in ``CLASSES`` that ``address`` belongs to."""
    return next((kind for kind, member in CLASSES if member(address)), None)


def _is_reserved(address: IPAddress) -> bool:
    """Not globally reachable by ``ipaddress``'s tables, or in a range they miss."""
    return (
        not address.is_global
        or address.is_reserved
        or any(address in network for network in NOT_GLOBAL_ELSEWHERE)
    )


CLASSES: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("unspecified", lambda address: address.is_unspecified),
    ("loopback", lambda address: address.is_loopback),
    ("link-local", lambda address: address.is_link_local),
    ("multicast", lambda address: address.is_multicast),
    ("private", lambda address: any(address in network for network in PRIVATE)),
    ("shared (carrier-grade NAT)", lambda address: address in SHARED),
    ("reserved", _is_reserved),
)
"""Kinds of non-public addresses, the most telling first (``::1`` is loopback before it is
reserved; ``fe80::1`` link-local before it is private)."""


def _translated_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped or NAT64 address stands for, or None."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


def _tunnelled_ipv4(address: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses a 6to4 or Teredo address leads through."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


@dataclass(frozen=True)
class AllowRule:
    """One allow-list entry: a host name or a network, on one port or on all of them."""

    host: str | None = None
    network: IPNetwork | None = None
    port: int | None = None

    def names(self, host: str, port: int) -> bool:
        """Whether a URL's host and port are this rule's host name."""
        return self.host is not None and self.host == normal_host(host) and self._on(port)

    def admits(self, address: IPAddress, port: int) -> bool:
        """Whether this rule's network holds ``address`` (or the IPv4 address it carries)."""
        if self.network is None or not self._on(port):
            return False
        carried = _translated_ipv4(address)
        return address in self.network or (carried is not None and carried in self.network)

    def _on(self, port: int) -> bool:
        return self.port is None or self.port == port


def normal_host(host: str) -> str:
    """A host name as rules compare it: lower case, without brackets or a trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def parse_allow_rule(entry: str) -> AllowRule:
    """An allow-list entry as a rule: an address or CIDR network, or a host name or
    ``[IPv6 address]`` with an optional port. Raises ``ValueError`` naming the entry otherwise
    (``app/camserve/config.py`` checks the same form at start-up)."""
    text = entry.strip()
    try:
        return AllowRule(network=ipaddress.ip_network(text))
    except ValueError:
        pass
    form = DESTINATION_FORM.fullmatch(text)
    port = int(form["port"]) if form is not None and form["port"] else None
    if form is None or (port is not None and not 0 < port < 65536):
        raise ValueError(
            f"{ALLOW_SETTING}: {text!r} is not a host, host:port, address or CIDR network"
        )
    host = form["host"]
    try:
        return AllowRule(network=ipaddress.ip_network(host.strip("[]")), port=port)
    except ValueError:
        if form["v6"] is not None:
            raise ValueError(f"{ALLOW_SETTING}: {text!r} is not a valid IPv6 address") from None
    return AllowRule(host=normal_host(host), port=port)


@dataclass(frozen=True)
class DestinationPolicy:
    """Which destinations a task image may be fetched from."""

    rules: tuple[AllowRule, ...] = ()

    @classmethod
    def from_settings(cls, allow: Iterable[str], label_studio: tuple[str, int] | None) -> Self:
        """The allow-list entries, plus Label Studio's own (host, port) when it has one."""
        rules = tuple(parse_allow_rule(entry) for entry in allow if entry.strip())
        if label_studio is not None:
            host, port = label_studio
            rules += (AllowRule(host=normal_host(host), port=port),)
        return cls(rules)

    def trusts_name(self, host: str, port: int) -> bool:
        """Whether ``host:port`` is allowed by name (its addresses are then not checked)."""
        return any(rule.names(host, port) for rule in self.rules)

    def refusal(self, address: IPAddress, port: int) -> str | None:
        """Why ``address:port`` is refused (the kind of address it is), or None."""
        kind = non_public_class(address)
        if kind is None or any(rule.admits(address, port) for rule in self.rules):
            return None
        return kind
