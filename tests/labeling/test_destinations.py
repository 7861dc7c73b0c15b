"""Destinations: every kind of address classified, and the allow-list read. Pure functions:
nothing here resolves a name or opens a connection."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from camserve.config import Settings
from camserve.labeling.destinations import (
    AllowRule,
    DestinationPolicy,
    non_public_class,
    parse_allow_rule,
)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("8.8.8.8", None),
        ("93.184.215.14", None),
        ("127.0.0.1", "loopback"),
        ("127.255.3.4", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("10.0.0.1", "private"),
        ("10.255.255.255", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("169.254.0.1", "link-local"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.10", "reserved"),
        ("198.18.0.1", "reserved"),
    ],
)
def test_ipv4_addresses_are_classified(address: str, kind: str | None) -> None:
    assert non_public_class(ipaddress.IPv4Address(address)) == kind


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("2606:4700:4700::1111", None),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "private"),
        ("fdff:ffff::1", "private"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("ff02::1", "multicast"),
        ("ff0e::1", "multicast"),
        ("fec0::1", "reserved"),
        ("2001:db8::1", "reserved"),
        ("3fff::1", "reserved"),
        ("100::1", "reserved"),
        ("::127.0.0.1", "reserved"),
    ],
)
def test_ipv6_addresses_are_classified(address: str, kind: str | None) -> None:
    assert non_public_class(ipaddress.IPv6Address(address)) == kind


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:8.8.8.8", None),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("64:ff9b::10.0.0.1", "private"),
        ("64:ff9b::8.8.8.8", None),
        ("2002:7f00:1::1", "tunnelled non-public"),
        ("2002:a00:1::1", "tunnelled non-public"),
        ("2002:808:808::1", None),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),
    ],
)
def test_ipv6_addresses_carrying_ipv4_are_judged_by_it(address: str, kind: str | None) -> None:
    """IPv4-mapped and NAT64 addresses reach the IPv4 address they carry; 6to4 tunnels to it."""
    assert non_public_class(ipaddress.IPv6Address(address)) == kind


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ("minio", AllowRule(host="minio")),
        ("MinIO.Example.:9000", AllowRule(host="minio.example", port=9000)),
        ("label_studio:8080", AllowRule(host="label_studio", port=8080)),
        ("10.0.0.0/8", AllowRule(network=ipaddress.ip_network("10.0.0.0/8"))),
        ("fd00::/8", AllowRule(network=ipaddress.ip_network("fd00::/8"))),
        ("127.0.0.1", AllowRule(network=ipaddress.ip_network("127.0.0.1/32"))),
        ("127.0.0.1:9000", AllowRule(network=ipaddress.ip_network("127.0.0.1/32"), port=9000)),
        ("::1", AllowRule(network=ipaddress.ip_network("::1/128"))),
        ("[::1]:9000", AllowRule(network=ipaddress.ip_network("::1/128"), port=9000)),
        (" minio:9000 ", AllowRule(host="minio", port=9000)),
    ],
)
def test_allow_entries_are_read(entry: str, rule: AllowRule) -> None:
    assert parse_allow_rule(entry) == rule
    assert Settings(_env_file=None, task_image_allow=entry).task_image_allow == [entry.strip()]  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "entry",
    [
        "http://minio:9000",
        "minio:9000/images",
        "user@minio",
        "minio:0",
        "minio:65536",
        "minio:port",
        "10.0.0.1/8",
        "10.0.0.0/33",
        "[fd00::zz]:80",
        "[minio]:80",
        "*.example.com",
        "..",
    ],
)
def test_malformed_allow_entries_refuse_to_start(entry: str) -> None:
    """The settings refuse at start-up exactly what the policy could not read."""
    with pytest.raises(ValueError, match="CAMSERVE_TASK_IMAGE_ALLOW"):
        parse_allow_rule(entry)
    with pytest.raises(ValidationError, match="task_image_allow"):
        Settings(_env_file=None, task_image_allow=f"minio,{entry}")  # type: ignore[call-arg]


def test_the_setting_is_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMSERVE_TASK_IMAGE_ALLOW", "minio:9000, 10.0.0.0/8,,[::1]:80")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.task_image_allow == ["minio:9000", "10.0.0.0/8", "[::1]:80"]


def test_a_host_name_rule_trusts_that_name_and_port_only() -> None:
    policy = DestinationPolicy.from_settings(["minio:9000", "images.local"], None)
    assert policy.trusts_name("MINIO", 9000)
    assert policy.trusts_name("minio.", 9000)
    assert not policy.trusts_name("minio", 9001)
    assert not policy.trusts_name("minio.example", 9000)
    assert policy.trusts_name("images.local", 1234)


def test_label_studio_is_trusted_on_its_own_host_and_port_only() -> None:
    policy = DestinationPolicy.from_settings([], ("localhost", 8080))
    assert policy.trusts_name("localhost", 8080)
    assert not policy.trusts_name("localhost", 8000)
    assert not policy.trusts_name("127.0.0.1", 8080)
    assert policy.refusal(ipaddress.ip_address("127.0.0.1"), 8080) == "loopback"


def test_network_rules_admit_their_addresses_on_their_ports() -> None:
    policy = DestinationPolicy.from_settings(["10.0.0.0/8", "127.0.0.1:9000"], None)
    admitted = [
        ("10.1.2.3", 80),
        ("::ffff:10.1.2.3", 443),
        ("127.0.0.1", 9000),
        ("::ffff:127.0.0.1", 9000),
        ("8.8.8.8", 80),
    ]
    for address, port in admitted:
        assert policy.refusal(ipaddress.ip_address(address), port) is None, address
    refused = [
        ("127.0.0.1", 9001, "loopback"),
        ("::1", 9000, "loopback"),
        ("172.16.0.1", 80, "private"),
        ("169.254.169.254", 80, "link-local"),
    ]
    for address, port, kind in refused:
        assert policy.refusal(ipaddress.ip_address(address), port) == kind, address
