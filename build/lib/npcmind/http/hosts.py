"""The Host names the service answers to: a web page can reach the local service under its own name.

DNS rebinding points a site's name at 127.0.0.1 after the page has loaded; the browser then takes the local
service for that site and lets the page read its answers (`GET /v1/prompt`). Its requests still carry
`Host: <that site>`, so the local profile answers only a Host that names this machine.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from npcmind.protocol.errors import ApiError
from npcmind.service import WILDCARDS, loopback

_REMEMBERED = 256  # Host values judged; a client that sends a new one each request must not grow a dict forever


def host_name(host: str) -> str:
    """The name or address of a Host header without its port: `[::1]:8080` is `::1`, `Box.lan.:80` is `box.lan`."""
    h = host.strip().lower()
    if h.startswith("["):
        return h[1 : h.index("]")] if "]" in h else h
    if h.count(":") == 1:
        h = h.partition(":")[0]
    return h.rstrip(".")


class HostCheck:
    """Answers a request only when its Host is localhost, a loopback address, the address the service is bound
    to (not a wildcard: 0.0.0.0 would let any name in) or one in NPCMIND_ALLOWED_HOSTS; 421 otherwise."""

    def __init__(self, bound: str, allowed: list[str]) -> None:
        self.allowed = allowed
        self.bound = "" if bound in WILDCARDS else host_name(bound)
        self._names = {host_name(a) for a in allowed} | ({self.bound} if self.bound else set())
        self._judged: dict[str, bool] = {}

    def allows(self, host: str) -> bool:
        """Whether a request with this Host header is answered."""
        ok = self._judged.get(host)
        if ok is None:
            name = host_name(host)
            ok = name in self._names or loopback(name)
            if len(self._judged) < _REMEMBERED:
                self._judged[host] = ok
        return ok

    async def __call__(self, request: Request[Any, Any, Any]) -> None:
        """Litestar's hook before every handler: a Host of another name is refused before anything is read.
        A request without Host (HTTP/1.0) is answered: browsers always send one."""
        host = request.headers.get("host")
        if host is not None and not self.allows(host):
            raise ApiError(421, "host_not_allowed", self.refusal(host))

    def refusal(self, host: str) -> str:
        """What a refused Host is told: the names answered, and the setting that adds one."""
        names = ", ".join(["localhost", "loopback addresses", *([self.bound] if self.bound else []), *self.allowed])
        add = ",".join([*self.allowed, host_name(host)])
        return (
            f"this service does not answer to Host {host!r} (a page on another site can reach it under its own "
            f"name); it answers to {names}: if this machine is reached by that name, set NPCMIND_ALLOWED_HOSTS={add}"
        )


def host_check(profile: str, bound: str, allowed: list[str]) -> HostCheck | None:
    """The local profile's check (it asks no token), the hosted one's only when NPCMIND_ALLOWED_HOSTS is set;
    none when that is `*`."""
    if "*" in allowed or (profile != "local" and not allowed):
        return None
    return HostCheck(bound, allowed)
