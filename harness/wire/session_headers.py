"""The headers a call of an agent session met call by call carries (``job.admission:
per_call``): the load generator sends them with each call, the proxy reads them into the
engine's arrival (``Arrived.session_id``, ``call_index``, ``session_calls``) and keys the
call upstream as its session's turn.

``x-harness-session``: the session's id (its first call's request id); ``x-harness-call``: the
call's place in the session, from 0; ``x-harness-session-calls``: how many calls the session
makes. ``x-harness-attempt`` goes from the proxy to the bundled stub with such a call: the
proxy's attempt of that call (from 1), which keys the call's draws with the session's id and
the call's turn, as the simulation keys them.
"""

from __future__ import annotations

from typing import Final

SESSION_HEADER: Final = "x-harness-session"
CALL_HEADER: Final = "x-harness-call"
SESSION_CALLS_HEADER: Final = "x-harness-session-calls"
ATTEMPT_HEADER: Final = "x-harness-attempt"
