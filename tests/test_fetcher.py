"""Safe source fetching, the fetcher itself: every spelling of loopback, private
ranges, redirects, deadlines, sizes and the policy file's fetch settings, against
real HTTP servers on loopback that must never receive a refused request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memwarden.engine import AddressPolicy, Fetchers, PolicyFile, Scheduler, Warden

from . import _fetch_servers
from ._fetch_servers import SECRET, Internal, allowed, failure, spellings

# the loopback servers (fixtures)
allowed_port = _fetch_servers.allowed_port
secret_port = _fetch_servers.secret_port


# -- the fetcher -----------------------------------------------------------------------


def test_every_spelling_of_loopback_is_refused_before_connecting(secret_port: int) -> None:
    for url in spellings(secret_port):
        exc = failure(Fetchers(), url)
        assert exc.category == "refused_address", url
        assert exc.public == "fetch failed: refused_address"
    assert Internal.hits.get("127.0.0.1", 0) == 0


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "100.100.100.200",
        "100.64.0.1",
        "224.0.0.1",
        "[fe80::1]",
        "[fd00:ec2::254]",
        "[fc00::1]",
        "[ff02::1]",
        "[::]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
    ],
)
def test_private_link_local_metadata_and_multicast_are_refused(address: str) -> None:
    assert failure(Fetchers(), f"http://{address}/latest/meta-data").category == "refused_address"


def test_the_allow_list_admits_a_network_or_a_host(allowed_port: int, secret_port: int) -> None:
    assert allowed().fetch({"source_url": f"http://127.0.0.2:{allowed_port}/page"}) == f"{SECRET} from 127.0.0.2"
    by_name = Fetchers(addresses=AddressPolicy.of(["internal.test"]), resolver=lambda host, port: _addr("127.0.0.2"))
    assert by_name.fetch({"source_url": f"http://internal.test:{allowed_port}/"}).endswith("127.0.0.2")
    # allowing one name does not allow the same address under another name
    other = Fetchers(addresses=AddressPolicy.of(["internal.test"]), resolver=lambda host, port: _addr("127.0.0.2"))
    assert failure(other, f"http://elsewhere.test:{allowed_port}/").category == "refused_address"
    assert failure(allowed(), f"http://127.0.0.1:{secret_port}/").category == "refused_address"


def test_a_redirect_chain_ending_on_loopback_is_refused(allowed_port: int, secret_port: int) -> None:
    chain = f"http://127.0.0.2:{allowed_port}/chain/3?to=http://127.0.0.1:{secret_port}/secret.txt"
    assert failure(allowed(), chain).category == "refused_address"
    via_name = f"http://127.0.0.2:{allowed_port}/chain/1?to=http://localhost:{secret_port}/secret.txt"
    assert failure(allowed(), via_name).category == "refused_address"
    to_file = f"http://127.0.0.2:{allowed_port}/chain/1?to=file:///etc/passwd"
    assert failure(allowed(), to_file).category == "refused_address"
    ok = f"http://127.0.0.2:{allowed_port}/chain/2?to=http://127.0.0.2:{allowed_port}/page"
    assert allowed().fetch({"source_url": ok}).endswith("127.0.0.2")
    too_many = f"http://127.0.0.2:{allowed_port}/chain/9?to=http://127.0.0.2:{allowed_port}/page"
    assert failure(allowed(max_redirects=3), too_many).category == "http_status"


def test_a_slow_drip_body_is_cut_at_the_total_deadline(allowed_port: int) -> None:
    exc = failure(allowed(timeout=1.0), f"http://127.0.0.2:{allowed_port}/drip")
    # the body comes a byte every 0.1 s for 20 s: a per-read timeout would never fire and the
    # fetch would succeed; a timeout at all is the total deadline's
    assert exc.category == "timeout"


def test_an_oversized_body_is_refused_declared_or_not(allowed_port: int, tmp_path: Path) -> None:
    for path in ("/big", "/big-declared"):
        assert failure(allowed(max_bytes=100_000), f"http://127.0.0.2:{allowed_port}{path}").category == "too_large"
    big = tmp_path / "big.txt"
    big.write_bytes(b"z" * 200_001)
    assert failure(Fetchers(max_bytes=200_000), big.as_uri()).category == "too_large"
    fetchers = Fetchers(max_bytes=10)
    fetchers.register("chatty", lambda row: "x" * 11)
    assert failure(fetchers, "callable:chatty").category == "too_large"


def test_http_errors_and_unreachable_hosts_are_categories(allowed_port: int) -> None:
    assert failure(allowed(), f"http://127.0.0.2:{allowed_port}/missing").category == "http_status"
    assert failure(Fetchers(), "http://name.invalid/").category == "unreachable"
    closed = Fetchers(addresses=AddressPolicy.of(["127.0.0.3"]))
    assert failure(closed, "http://127.0.0.3:9/").category == "unreachable"


def _addr(*texts: str) -> list[Any]:
    import ipaddress

    return [ipaddress.ip_address(t) for t in texts]


def test_the_connection_goes_to_the_checked_address_no_second_lookup(allowed_port: int, secret_port: int) -> None:
    answers = iter([_addr("127.0.0.2"), _addr("127.0.0.1"), _addr("127.0.0.1")])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[Any]:
        asked.append(host)
        return next(answers)

    fetchers = Fetchers(addresses=AddressPolicy.of(["127.0.0.2"]), resolver=rebinding)
    # the port is the allowed server's: had the connection gone to a second
    # answer (127.0.0.1) it would have failed or reached the secret service
    assert fetchers.fetch({"source_url": f"http://rebind.test:{allowed_port}/"}).endswith("127.0.0.2")
    assert asked == ["rebind.test"]
    # a name with one bad answer among good ones is refused outright
    mixed = Fetchers(
        addresses=AddressPolicy.of(["127.0.0.2"]), resolver=lambda host, port: _addr("127.0.0.2", "127.0.0.1")
    )
    assert failure(mixed, f"http://mixed.test:{secret_port}/").category == "refused_address"


def test_the_policy_file_sets_the_allow_list_and_the_deadline(tmp_path: Path, allowed_port: int) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[fetch]\nallow = ["127.0.0.2/32"]\ntimeout = 2\nmax_bytes = 1000\n', encoding="utf-8")
    fetchers = PolicyFile.read(policy).fetchers()
    assert fetchers.timeout == 2 and fetchers.max_bytes == 1000
    assert fetchers.fetch({"source_url": f"http://127.0.0.2:{allowed_port}/x"}).endswith("127.0.0.2")
    policy.write_text('[fetch]\nallow = ["127.0.0.2/99"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.allow"):
        PolicyFile.read(policy).fetchers()
    policy.write_text("[fetch]\ntimeout = -1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.timeout"):
        PolicyFile.read(policy)
    policy.write_text('[fetch]\nbackoff = "soon"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="fetch.backoff"):
        PolicyFile.read(policy)


def test_the_policy_file_sets_the_hosts_backoff(tmp_path: Path) -> None:
    """A failed host waits [fetch] backoff seconds, doubling, before the scheduler fetches from it again."""
    policy = tmp_path / "policy.toml"
    policy.write_text("[fetch]\nbackoff = 2.5\n", encoding="utf-8")
    w = Warden(tmp_path / "b.db", fetchers=PolicyFile.read(policy).fetchers())
    try:
        backoff = Scheduler(w).backoff
        assert (backoff.delay(1), backoff.delay(3)) == (2.5, 10.0)
    finally:
        w.close()
    plain = Warden(":memory:")
    try:
        assert Scheduler(plain).backoff.delay(1) == 30.0  # the default
    finally:
        plain.close()
