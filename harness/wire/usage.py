"""The ``usage`` object of a completion (or of a stream's last chunk, with
``stream_options.include_usage``): written with the API's full shape, read as token counts."""

from __future__ import annotations

from typing import Any


def usage_object(prompt: int, completion: int) -> dict[str, Any]:
    """``usage`` as the API writes it, details included (all zero here)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
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
