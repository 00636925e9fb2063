"""TLS settings shared by the load generator, the proxy and the start-up checks.

Verified by default, everywhere: an LLM endpoint is handed an API key with every request, so
a certificate that does not verify must stop the run before any load, with the reason, rather
than show up later as a thousand anonymous connection errors. ``--ca-bundle FILE`` adds a
private CA (a self-signed gateway, a corporate proxy); ``--insecure`` turns verification off,
loudly, and the run records it (``summary.meta.tls``).

The start-up check does what the first request would: TCP, then the TLS handshake with the
same context (hostname included), so a certificate failure is named as such (exit 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

INSECURE_WARNING = (
    "--insecure: TLS certificates are NOT verified; the API key goes to whoever answers at "
    "this address. Use --ca-bundle FILE for a private CA instead."
)


class TlsError(ValueError):
    """A CA bundle that cannot be used (bad input: exit 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tls:
    ca_bundle: str | None = None
    insecure: bool = False

    def __post_init__(self) -> None:
        if self.ca_bundle is not None and self.insecure:
            raise TlsError("--ca-bundle and --insecure contradict each other: choose one")

    def validated(self) -> Tls:
        """Self, once the CA bundle is known to load (raises :class:`TlsError`)."""
        if self.ca_bundle is not None:
            if not Path(self.ca_bundle).is_file():
                raise TlsError(f"--ca-bundle {self.ca_bundle}: no such file")
            try:
                ssl.create_default_context(cafile=self.ca_bundle)
            except (ssl.SSLError, OSError, ValueError) as e:
                raise TlsError(f"--ca-bundle {self.ca_bundle}: not a PEM CA bundle ({e})") from None
        return self

    def context(self) -> ssl.SSLContext:
        """A client context: the system's CAs (or the bundle's), hostname checked."""
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        return ssl.create_default_context(cafile=self.ca_bundle)

    def meta(self) -> dict[str, Any]:
        """What summary.meta says (the bundle's path, never its content)."""
        return {"verify": not self.insecure, "ca_bundle": self.ca_bundle}

    def to_config(self) -> dict[str, Any]:
        return {"ca_bundle": self.ca_bundle, "insecure": self.insecure}

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> Tls:
        data = data or {}
        return cls(ca_bundle=data.get("ca_bundle"), insecure=bool(data.get("insecure")))


def why_not(exc: BaseException) -> str:
    """A failed connection or handshake in words; certificate failures say so."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message or exc.reason}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or type(exc).__name__}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return type(exc).__name__


def _where(url: str) -> tuple[str, int, bool]:
    p = urlsplit(url)
    https = p.scheme == "https"
    return p.hostname or "", p.port or (443 if https else 80), https


def check(url: str, tls: Tls, timeout_s: float = 5.0) -> str | None:
    """None if ``url``'s server accepts a connection (and, for https, a verified handshake);
    else why not. Blocking: for the CLI's start-up."""
    host, port, https = _where(url)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            if https:
                with tls.context().wrap_socket(sock, server_hostname=host):
                    pass
    except (OSError, ssl.SSLError) as e:
        return why_not(e)
    return None


async def acheck(url: str, tls: Tls, timeout_s: float = 5.0) -> str | None:
    """:func:`check` on the running event loop (the proxy's start-up)."""
    host, port, https = _where(url)
    try:
        async with asyncio.timeout(timeout_s):
            _r, w = await asyncio.open_connection(
                host,
                port,
                ssl=tls.context() if https else None,
                server_hostname=host if https else None,
            )
    except (OSError, ssl.SSLError, TimeoutError) as e:
        return why_not(e)
    w.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await w.wait_closed()
    return None
