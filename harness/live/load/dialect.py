"""How a request is spelled for one target: the profile's ``wire:`` section.

The credential header (name, scheme, key from the environment), extra headers and query
parameters (literal, or ``{env: NAME}`` read from the environment), and the name of the
completion-length field (``max_tokens``, or ``max_completion_tokens`` which newer reasoning
models require). Values from the environment are read here, in the process that sends the
requests, when its requests are built: the run's config file and every result carry only the
variables' names.
"""

from __future__ import annotations

import os
from typing import Any, Final
from urllib.parse import urlencode

import orjson

from harness.profile import FromEnv, RequestClass, Wire


def _value(v: str | FromEnv) -> str | None:
    return os.environ.get(v.env) if isinstance(v, FromEnv) else v


def wire_headers(wire: Wire, key_env: str | None) -> dict[str, str]:
    """The credential and extra headers, values read from the environment now (in the
    process that sends: never in a config file). ``key_env`` None: no credential (the stub)."""
    h: dict[str, str] = {}
    key = os.environ.get(key_env) if key_env else None
    if key:
        a = wire.auth
        h[a.header.lower()] = f"{a.scheme} {key}" if a.scheme else key
    for name, v in wire.headers.items():
        value = _value(v)
        if value is not None:
            h[name.lower()] = value
    return h


def wire_path(path: str, wire: Wire) -> str:
    """The request path with the profile's query parameters (unset variables left out)."""
    q = [(k, value) for k, v in wire.query.items() if (value := _value(v)) is not None]
    return f"{path}?{urlencode(q)}" if q else path


def request_body(c: RequestClass, model: str, wire: Wire) -> bytes:
    return orjson.dumps(_body(c, model, wire, c.max_tokens, c.prompt_text()))


def _body(c: RequestClass, model: str, wire: Wire, max_tokens: int, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, wire.max_tokens_field: max_tokens}
    body["messages"] = [{"role": "user", "content": prompt}]
    if c.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# Placeholders no class, model or header can hold in the way a template is cut at them.
_CAP_MARK: Final = 987_654_321_987_654_321
_PROMPT_MARK: Final = "@@harness-traced-prompt@@"


def body_template(c: RequestClass, model: str, wire: Wire) -> tuple[bytes, bytes, bytes]:
    """A traced request's body in three pieces: ``head + b"%d" % max_tokens + mid +
    prompt + tail`` is the body :func:`request_body` would write for that ``max_tokens`` and
    a prompt of plain ASCII that JSON needs no escape for (the caller's: a few byte joins per
    request instead of a JSON encoding)."""
    raw = orjson.dumps(_body(c, model, wire, _CAP_MARK, _PROMPT_MARK))
    cap, prompt = str(_CAP_MARK).encode(), _PROMPT_MARK.encode()
    if raw.count(cap) != 1 or raw.count(prompt) != 1:  # a model name holding a placeholder
        raise ValueError(f"cannot build a traced body template for model {model!r}")
    head, rest = raw.split(cap, 1)
    mid, tail = rest.split(prompt, 1)
    return head, mid, tail
