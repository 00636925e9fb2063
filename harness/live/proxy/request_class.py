"""Which class, priority, tenant and key a proxied POST belongs to: its control headers.

``x-class`` picks one of the profile's classes (default: the first); ``x-priority``,
``x-tenant`` and ``x-key`` override that class's values. A bad header is a message for a 400,
returned as a string; a good one is the request's fields, in ``ProxiedRequest``'s order.

A call of an agent session met call by call (``job.admission: per_call``) names its session:
``x-harness-session`` (the session's id, 1 to 256 characters), ``x-harness-call`` (its place,
from 0) and ``x-harness-session-calls`` (the session's calls, more than its place); all three
or none (:meth:`ClassTable.session`).
"""

from __future__ import annotations

from harness.engine.events import PRIORITY_OF
from harness.profile.schema import Profile

# (class name, priority rank, tenant, partition key, deadline_s)
ClassFields = tuple[str, int, str, str | None, float | None]
# (session id, call index, session calls)
SessionFields = tuple[str, int, int]
_SESSION = (b"x-harness-session", b"x-harness-call", b"x-harness-session-calls")


class ClassTable:
    def __init__(self, profile: Profile) -> None:
        self._classes: dict[bytes, ClassFields] = {}
        for name, c in profile.classes.items():
            tenant = c.tenant if isinstance(c.tenant, str) else "default"
            key = c.key if isinstance(c.key, str) else None
            self._classes[name.encode()] = (
                name,
                PRIORITY_OF[c.priority],
                tenant,
                key,
                c.deadline_s,
            )
        self._default = next(iter(self._classes.values()))

    def classify(self, control: dict[bytes, bytes]) -> ClassFields | str:
        cls = control.get(b"x-class")
        spec = self._default if cls is None else self._classes.get(cls.strip())
        if spec is None:
            known = ", ".join(c.decode() for c in self._classes)
            assert cls is not None  # without x-class the first class applies
            shown = repr(cls.decode("latin-1"))[:80]  # a str repr: no b'...' in the message
            return f"Unknown x-class {shown}; this proxy's classes are: {known}."
        name, prio, tenant, key, deadline = spec
        p = control.get(b"x-priority")
        if p is not None:
            v = PRIORITY_OF.get(p.strip().lower().decode("latin-1"))
            if v is None:
                return "x-priority must be critical, standard or batch."
            prio = v
        t = control.get(b"x-tenant")
        if t is not None:
            if not 0 < len(t) <= 128:
                return "x-tenant must be 1 to 128 characters."
            tenant = t.decode("latin-1")
        k = control.get(b"x-key")
        if k is not None:
            if not 0 < len(k) <= 256:
                return "x-key must be 1 to 256 characters."
            key = k.decode("latin-1")
        return (name, prio, tenant, key, deadline)

    @staticmethod
    def session(control: dict[bytes, bytes]) -> SessionFields | str | None:
        """A per-call session's call: its session headers (None: it sent none; a message for
        a 400 when they are bad or incomplete)."""
        got = [control.get(h) for h in _SESSION]
        if all(v is None for v in got):
            return None
        sid, k, n = got
        if sid is None or k is None or n is None:
            return "x-harness-session, x-harness-call and x-harness-session-calls go together."
        if not 0 < len(sid) <= 256:
            return "x-harness-session must be 1 to 256 characters."
        k, n = k.strip(), n.strip()
        if not (k.isdigit() and n.isdigit() and len(k) <= 6 and len(n) <= 6):
            return "x-harness-call and x-harness-session-calls must be whole numbers."
        call, calls = int(k), int(n)
        if call >= calls:
            return "x-harness-call must be less than x-harness-session-calls."
        return sid.decode("latin-1"), call, calls
