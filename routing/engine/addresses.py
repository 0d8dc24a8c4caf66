"""Cloud metadata services: the addresses a provider's ``base_url`` must never reach.

A metadata service hands out the machine's cloud credentials to whoever asks from the
machine, so a gateway that an admin can point anywhere would fetch them and show the
answer (SPEC §9, amended 2026-12-07). Private ranges and loopback stay allowed: local
model servers live there. Refused:

- IPv4 link-local ``169.254.0.0/16`` (AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack
  serve metadata on ``169.254.169.254``; nothing else useful lives there);
- IPv6 link-local ``fe80::/10``, and AWS's IPv6 endpoint ``fd00:ec2::254``;
- Alibaba Cloud's ``100.100.100.200``;
- the host names that resolve to them (GCP's ``metadata.google.internal``, …), so a
  refusal says why at write time; any other name that resolves to one of these
  addresses is refused when connecting (``routing.upstream.transport``).

Used by the config schema (a clear field error on every write path) and the upstream
transport; pure, standard library only.
"""

from __future__ import annotations

import ipaddress

METADATA_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "169.254.0.0/16",
        "fe80::/10",
        "fd00:ec2::254/128",
        "100.100.100.200/32",
    )
)
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
    }
)


def metadata_address(address: str) -> bool:
    """Whether an IP address (text, without brackets) is a metadata service's; an
    IPv4-mapped IPv6 address counts as its IPv4 address. Not an address: False."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # a zone id: fe80::1%eth0
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in METADATA_NETWORKS)


def metadata_host(host: str) -> bool:
    """Whether a URL's host (a name or an address) names a metadata service."""
    name = host.strip("[]").rstrip(".").lower()
    return name in METADATA_HOSTS or metadata_address(name)
