"""What ``harness run --target URL`` means: the base URL, the chat completions path a bare
run sends to, the API base the proxy is given (so both reach the same URL), and the URL's
public form (no user info, query or fragment), which is all that is ever written."""

from __future__ import annotations

from urllib.parse import urlsplit


class BadTarget(ValueError):
    """A ``--target`` that cannot be used (bad input: exit 2)."""


def endpoint(url: str) -> tuple[str, str]:
    """(base URL, chat completions path) for a ``--target`` such as ``https://host/v1``: a
    server root means ``/v1``; any other path is the API base (``/openai/v1``, ``/api/v1``,
    ``/v1beta/openai``), to which ``/chat/completions`` is added."""
    p = urlsplit(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise BadTarget(f"--target must be 'stub' or an http(s) URL, got {url!r}")
    if p.query:  # its values may be secrets, and would travel in files and logs
        raise BadTarget(
            "--target must not carry a query: give query parameters under "
            "wire.query in the profile (secret values as {env: NAME})"
        )
    path = p.path.rstrip("/") or "/v1"
    if not path.endswith("/chat/completions"):
        path += "/chat/completions"
    return public(f"{p.scheme}://{p.netloc}"), path


def api_base(url: str) -> str:
    """The proxy's upstream for ``--target``: its API base, without ``/chat/completions``,
    so the proxy forwards to exactly the URL a bare run uses (``upstream.join_target``)."""
    base, path = endpoint(url)
    return base + path.removesuffix("/chat/completions")


def public(url: str) -> str:
    """A URL without user info, query or fragment: credentials travel only as --api-key-env."""
    p = urlsplit(url)
    host = p.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{p.port}" if p.port else "")
    return f"{p.scheme}://{netloc}{p.path}"
