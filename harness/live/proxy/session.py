"""An agent job's session in the live proxy: the request body of each turn.

An agent job (a class with ``job:``) is one client request that the proxy's executor serves
as a session of model calls, as an agent would: turn 0 sends the client's messages (behind the
class's shared prefix, a system message of ``shared_prefix_tokens`` tokens, when it has one);
each later turn sends the previous turn's messages plus that turn's answer (an ``assistant``
message with the answer's text) plus the new input (a ``user`` message of
``new_input_tokens`` tokens: a tool's result, say). So the upstream -- the stub or a real
endpoint -- sees the call pattern and the prompt growth of a real session, and the
simulation's token model (``SimUpstream.job_turn``) grows a prompt by the same rule.

A retried turn resends its own body; a session restarted at turn 0 (its executor killed at a
drain timeout) starts again from the client's messages. The rule itself lives in
``harness.workload.agent_messages``: the load generator writes a per-call session's calls by it
too.
"""

from __future__ import annotations

from typing import Any, Final

from harness.serve.asgi import Headers
from harness.workload.agent_messages import Conversation, answer_text, filler, filler_chars

__all__ = ["TURN_HEADER", "Session", "answer_text", "filler", "filler_chars"]

TURN_HEADER: Final = b"x-harness-turn"
"""Sent upstream with a session's turn after the first (its number, from 0): the bundled stub
keys that call's draws by (request id, attempt, turn), as the simulation does. A real endpoint
ignores an unknown header."""


class Session(Conversation):
    """One agent job's messages, turn by turn (:meth:`body`: the rule of
    ``harness.workload.agent_messages``, which the load generator's per-call sessions share),
    and the headers every turn forwards."""

    __slots__ = ("fwd",)

    def __init__(
        self,
        doc: dict[str, Any],
        body: bytes,
        shared_prefix_tokens: int,
        new_input_tokens: int,
        fwd: Headers,
        traced: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """``traced``: a session trace's records, (prompt, output) tokens per turn
        (``arrivals.trace.sessions``, replay: job), as :class:`Conversation` takes them."""
        super().__init__(doc, body, shared_prefix_tokens, new_input_tokens, traced)
        self.fwd = fwd  # the headers every turn forwards (the turn's own is added to them)
