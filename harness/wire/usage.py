"""The ``usage`` object of a completion (or of a stream's last chunk, with
``stream_options.include_usage``): written with the API's full shape, read as token counts."""

from __future__ import annotations

from typing import Any, Final

import orjson


def usage_object(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """``usage`` as the API writes it, details included (``cached``: the prompt's tokens served
    from a prefix cache; the other details zero here)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def usage_tokens(usage: Any) -> dict[str, int] | None:
    """``{"prompt", "completion"}`` from a ``usage`` object; None when there is none."""
    if not isinstance(usage, dict):
        return None
    return {
        "prompt": int(usage.get("prompt_tokens") or 0),
        "completion": int(usage.get("completion_tokens") or 0),
    }


def usage_counts(usage: Any) -> tuple[int, int, int] | None:
    """(prompt, cached prompt, completion) tokens of a ``usage`` object
    (``prompt_tokens_details.cached_tokens``, 0 when absent); None when there is none."""
    if not isinstance(usage, dict):
        return None
    try:
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        details = usage.get("prompt_tokens_details")
        cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    except (TypeError, ValueError):
        return None
    return prompt, min(max(cached, 0), prompt), completion


_USAGE_KEY: Final = b'"usage":{'


def body_usage(data: bytes) -> tuple[int, int, int] | None:
    """The usage of a whole answer: a JSON completion's ``usage``, or a stream's (the last
    event whose ``usage`` is an object, as ``stream_options.include_usage`` sends it)."""
    at = data.rfind(_USAGE_KEY)
    if at < 0:
        return None
    start = -1 if data.lstrip()[:1] == b"{" else data.rfind(b"data:", 0, at)
    if start < 0:  # a JSON body (its text may say "data:" anywhere)
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        return usage_counts(obj.get("usage")) if isinstance(obj, dict) else None
    end = data.find(b"\n", at)
    try:
        obj = orjson.loads(data[start + 5 : end if end >= 0 else len(data)])
    except orjson.JSONDecodeError:
        return None
    return usage_counts(obj.get("usage")) if isinstance(obj, dict) else None
