"""Download one image URL: a total deadline, a byte limit, and for a server no internal address.

:func:`fetch` is the one downloader behind ``data.images.allow_urls``, ``rmspec score
--allow-image-urls`` and ``rmspec serve --allow-image-urls`` (through rmspec.vision.images).

- **Total deadline**: ``timeout`` seconds from the start to the last byte, redirects included. A
  watchdog shuts the connection down when it passes, so a server that sends one byte a second (or
  its headers that slowly) cannot hold the caller longer. Name resolution is not under it
  (``getaddrinfo`` cannot be interrupted); the system resolver's own timeout bounds it.
- **Byte limit**: a declared ``Content-Length`` over it is refused before the body is read, any
  other body once one byte past the limit has come.
- **Addresses** (``guard``, given by ``rmspec serve``): the host name is resolved once, every address
  it resolves to is checked, and the connection goes to a checked address (no second look-up a
  DNS rebinding could answer differently). Loopback, link-local, private, multicast, unspecified
  and reserved addresses (IPv4-mapped IPv6 included) are refused before any connection, with the
  same answer whether a port there is open or closed, unless ``guard.allowed`` names the host (as
  written in the URL) or a network holding the address. Each redirect (at most
  :data:`MAX_REDIRECTS`) is checked the same way before it is followed.

No proxy is used: the connection goes straight to the host (a proxy would hide the address that is
checked). Only the standard library: no torch, no Pillow.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 64 * 1024


class FetchRefused(Exception):
    """The URL is refused before any connection (scheme, or an internal address)."""


class FetchFailed(Exception):
    """The download failed: an error status, the deadline, a refused or dropped connection."""


class TooLarge(Exception):
    """The body is over the byte limit."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Guard:
    """Which addresses a server may fetch from: public ones, and the ``allowed`` hosts (names as
    written in URLs, IP addresses, or networks such as ``10.0.0.0/8``)."""

    allowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, hosts: Iterable[str]) -> Guard:
        """From the --allow-image-hosts values (each may hold several, comma-separated)."""
        return cls(tuple(h.strip().lower().strip("[]") for value in hosts for h in value.split(",") if h.strip()))

    def networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        out = []
        for entry in self.allowed:
            with contextlib.suppress(ValueError):
                out.append(ipaddress.ip_network(entry, strict=False))
        return out

    def permits(self, host: str, address: IPAddress) -> bool:
        if not internal(address):
            return True
        if host.lower().strip("[]") in self.allowed:
            return True
        return any(address in network for network in self.networks())


def internal(address: IPAddress) -> bool:
    """An address a server must not reach for a client: anything but a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
        or not address.is_global
    )


def fetch(url: str, *, max_bytes: int, timeout: float, guard: Guard | None = None) -> bytes:
    """The body of a successful GET of ``url`` (http or https), following redirects; raises
    :class:`FetchRefused`, :class:`FetchFailed` or :class:`TooLarge`."""
    deadline = time.monotonic() + timeout
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        status, reason, location, body = _get(current, max_bytes, deadline, timeout, guard)
        if status in REDIRECTS and location:
            current = urllib.parse.urljoin(current, location)
            continue
        if status >= 400:
            raise FetchFailed(f"the server answered HTTP {status} {reason}")
        if status in REDIRECTS:
            raise FetchFailed(f"the server answered HTTP {status} without a Location")
        return body
    raise FetchFailed(f"more than {MAX_REDIRECTS} redirects")


def _target(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL, or FetchRefused."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchRefused(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise FetchRefused(f"only http(s) URLs are fetched, not {parts.scheme or 'a relative URL'}")
    if not parts.hostname:
        raise FetchRefused("the URL has no host")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path


def _addresses(host: str, port: int, guard: Guard | None) -> list[tuple[int, str]]:
    """(family, address) pairs to connect to: every address of the host, checked by `guard`."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchFailed(f"the host name does not resolve ({exc})") from None
    found: list[tuple[int, str]] = []
    for family, _, _, _, sockaddr in infos:
        address = str(sockaddr[0]).split("%")[0]
        if (family, address) not in found:
            found.append((family, address))
    if guard is None:
        return found
    allowed = [(f, a) for f, a in found if guard.permits(host, ipaddress.ip_address(a))]
    if not allowed:
        # The same words whatever the port: nothing is connected, so nothing tells open from closed.
        raise FetchRefused(
            f"{host} is an internal address (loopback, link-local, private or multicast): "
            "the server does not fetch from it"
        )
    return allowed


class _Watchdog:
    """Shuts a connection down at the deadline, which wakes a blocked read at once."""

    def __init__(self, deadline: float):
        self.deadline, self.fired = deadline, False
        self._sock: socket.socket | None = None
        self._timer: threading.Timer | None = None

    def watch(self, sock: socket.socket) -> None:
        self._sock = sock.dup()  # shutdown acts on the connection, shared by every descriptor of it
        self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._sock is not None:
            self._sock.close()


def _connection(scheme: str, host: str, port: int, family: int, address: str, remaining: float, watchdog: _Watchdog):
    """An http.client connection to `address` (checked), speaking to `host` (Host header, TLS name)."""
    base = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection

    class Pinned(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.settimeout(remaining)
            try:
                sock.connect((address, port))
            except BaseException:
                sock.close()
                raise
            watchdog.watch(sock)
            if scheme == "https":
                context = ssl.create_default_context()
                self.sock = context.wrap_socket(sock, server_hostname=host)
            else:
                self.sock = sock  # type: ignore[assignment]  # the base's attribute is typed for either class

    return Pinned(host, port, timeout=remaining)


def _get(
    url: str, max_bytes: int, deadline: float, timeout: float, guard: Guard | None
) -> tuple[int, str, str | None, bytes]:
    scheme, host, port, path = _target(url)
    addresses = _addresses(host, port, guard)
    failure: Exception | None = None
    for family, address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        watchdog = _Watchdog(deadline)
        conn = _connection(scheme, host, port, family, address, remaining, watchdog)
        try:
            conn.request("GET", path, headers={"User-Agent": "rmspec", "Accept": "image/*"})
            response = conn.getresponse()
            location = response.getheader("Location")
            if response.status in REDIRECTS or response.status >= 400:
                return response.status, response.reason, location, b""
            body = _body(response, max_bytes)
            if watchdog.fired:  # the shutdown ended the body early: not a complete answer
                raise FetchFailed(f"no complete answer within {timeout:g} s")
            return response.status, response.reason, location, body
        except (TooLarge, FetchFailed):
            raise
        except (OSError, http.client.HTTPException, ssl.SSLError, ValueError) as exc:
            if watchdog.fired or isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
                raise FetchFailed(f"no complete answer within {timeout:g} s") from None
            failure = exc
        finally:
            watchdog.close()
            conn.close()
    if failure is None:
        raise FetchFailed(f"no complete answer within {timeout:g} s")
    if isinstance(failure, ConnectionRefusedError):
        raise FetchFailed("the connection was refused") from None
    raise FetchFailed(f"{type(failure).__name__}: {failure}") from None


def _body(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    length = response.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > max_bytes:
        raise TooLarge(f"{length.strip()} bytes, over the limit of {max_bytes}")
    chunks, size = [], 0
    while True:
        chunk = response.read1(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > max_bytes:
            raise TooLarge(f"over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    if length is not None and length.strip().isdigit() and size < int(length):
        raise http.client.IncompleteRead(b"".join(chunks), int(length) - size)
    return b"".join(chunks)
