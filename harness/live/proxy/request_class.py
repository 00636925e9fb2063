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
from harness.export.epp import objective_name
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


# -- the llm-d router's request headers (a profile with flow_control) ------------------------

FAIRNESS_ID = b"x-llm-d-inference-fairness-id"
OBJECTIVE = b"x-llm-d-inference-objective"
SLO_TTFT_MS = b"x-llm-d-slo-ttft-ms"

# (the control headers, with x-class and x-tenant as the llm-d headers say; the flow's
# priority and TTFT SLO in ms where they are the request's own, None: its class's)
FlowSaid = tuple[dict[bytes, bytes], int | None, float | None]


class FlowHeaders:
    """The llm-d router's request headers under ``flow_control``, read as the router reads them:

    - ``x-llm-d-inference-fairness-id``: the flow's fairness id, which is harness's tenant (it
      overrides ``x-tenant``; absent, the tenant is as without it).
    - ``x-llm-d-inference-objective``: an InferenceObjective by name, one per class as
      ``harness export epp`` writes them (the class's name, or the Kubernetes name made of
      it). Without ``x-class`` the request is that class. Its priority is the flow's; an
      objective no class has, as the router's default for an unknown one, priority 0.
    - ``x-llm-d-slo-ttft-ms``: the request's TTFT SLO for slo-deadline ordering; a value that
      is not a positive number is no header, as in the router (absent: the class's objective's).
    """

    def __init__(self, profile: Profile) -> None:
        fc = profile.flow_control
        assert fc is not None
        self.fc = fc
        self.by_objective: dict[bytes, str] = {}
        for name in profile.classes:
            self.by_objective[objective_name(name).encode()] = name

    def read(self, control: dict[bytes, bytes], forward: list[tuple[bytes, bytes]]) -> FlowSaid:
        fairness = objective = slo = None
        for k, v in forward:
            if k == FAIRNESS_ID:
                fairness = v.strip()
            elif k == OBJECTIVE:
                objective = v.strip()
            elif k == SLO_TTFT_MS:
                slo = v.strip()
        if fairness is None and objective is None and slo is None:
            return control, None, None
        out = dict(control)
        if fairness:
            out[b"x-tenant"] = fairness
        prio: int | None = None
        if objective:
            cls = self.by_objective.get(objective)
            if cls is None:
                prio = 0  # the router's default priority for an unknown objective
            elif b"x-class" not in out:
                out[b"x-class"] = cls.encode()
            elif out[b"x-class"].strip() != cls.encode():
                prio = self.fc.priority_of(cls)
        ms: float | None = None
        if slo:
            try:
                ms = float(slo)
            except ValueError:
                ms = None
            if ms is not None and not (0.0 < ms < float("inf")):
                ms = None
        return out, prio, ms
