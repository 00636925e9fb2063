"""An agent job's shape, drawn per job: how many turns it makes and the tool time after each
turn but the last (``classes.<name>.job``, ``harness.profile.JobShape``).

The draws belong to the request, as the upstream model's do (``harness.upstream_model.draws``):
two keyed streams, ``job_turns`` and ``job_tool``, reseeded from (seed, request id), so the
same request id draws the same shape in the simulation and, later, in the live proxy --
whatever admission did to the other requests, and without touching the engine's random
stream or the arrivals'. A fixed turn count draws nothing; the tool times are drawn in turn
order, one per gap, by the latency samplers the upstream model uses.
"""

from __future__ import annotations

import zlib

from harness.profile import JobShape, Profile
from harness.upstream_model.draws import KeyedRandom, fmix32
from harness.upstream_model.latency import Sampler, sampler

Shape = tuple[int, tuple[float, ...]]
"""(turns, tool seconds after each turn but the last: turns - 1 of them)."""

M32 = 0xFFFFFFFF


class _ClassShape:
    __slots__ = ("high", "low", "tool")

    def __init__(self, shape: JobShape, rng: KeyedRandom) -> None:
        self.low, self.high = shape.turn_range()
        self.tool: Sampler | None = sampler(shape.tool_s, rng) if shape.tool_s is not None else None


class ShapeDraws:
    """The shapes of one run's agent jobs (seed ``seed``), by class: :meth:`draw`."""

    __slots__ = ("_classes", "_seed", "_tool", "_turns")

    def __init__(self, shapes: dict[str, JobShape], seed: int) -> None:
        self._seed = fmix32(fmix32(seed & M32) ^ (seed >> 32 & M32))
        self._turns = KeyedRandom(seed, "job_turns")
        self._tool = KeyedRandom(seed, "job_tool")
        self._classes = {name: _ClassShape(s, self._tool) for name, s in shapes.items()}

    @classmethod
    def of(cls, profile: Profile, seed: int) -> ShapeDraws:
        return cls(profile.job_classes(), seed)

    def __contains__(self, cls: str) -> bool:
        return cls in self._classes

    def draw(self, cls: str, rid: str) -> Shape:
        """Request ``rid`` of class ``cls``: its turns and tool times ((1, ()) for a class
        without a job shape)."""
        c = self._classes.get(cls)
        if c is None:
            return 1, ()
        k = fmix32(zlib.crc32(rid.encode()) ^ self._seed)
        self._turns.reseed(k)
        self._tool.reseed(k)
        turns = c.low if c.high == c.low else self._turns.randint(c.low, c.high)
        tool = c.tool
        if tool is None or turns == 1:
            return turns, (0.0,) * (turns - 1)
        return turns, tuple(tool() for _ in range(turns - 1))


def draw_shape(shape: JobShape, seed: int, rid: str) -> Shape:
    """One request's shape: (turns, tool seconds between turns). The same (shape, seed, rid)
    always draws the same."""
    return ShapeDraws({"": shape}, seed).draw("", rid)
