"""An agent job's shape, drawn per job: how many turns it makes and the tool time after each
turn but the last (``classes.<name>.job``, ``harness.profile.JobShape``).

The draws belong to the request, as the upstream model's do (``harness.upstream_model.draws``):
two keyed streams, ``job_turns`` and ``job_tool``, reseeded from (seed, request id), so the
same request id draws the same shape in the simulation and, later, in the live proxy --
whatever admission did to the other requests, and without touching the engine's random
stream or the arrivals'. A fixed turn count draws nothing.

The turns are drawn at arrival; the tool times lazily, by the latency samplers the upstream
model uses: turn k's when turn k ends (:class:`ToolDraws`), from the same place in the job's
``job_tool`` stream it would hold had all been drawn at arrival in turn order. The stream is
counter-based and a sampler takes a fixed number of uniforms per draw (a lognormal two, an
exponential or uniform one, a fixed value none), so the k-th draw starts at the job's first
state plus k steps: the same numbers, in any order, and a job holds two integers, not
``turns - 1`` floats.
"""

from __future__ import annotations

import zlib

from harness.engine.events import ToolTimes
from harness.profile import JobShape, Profile
from harness.upstream_model.draws import KeyedRandom, fmix32
from harness.upstream_model.latency import Sampler, sampler

Shape = tuple[int, ToolTimes]
"""(turns, the tool seconds after each turn but the last: ``()`` when there are none, else a
:class:`ToolDraws` drawing turn k's when asked)."""

M32 = 0xFFFFFFFF


class _ClassShape:
    """A class's turn range and tool sampler, and how far one tool draw moves the stream
    (``step``: its uniforms x the counter's stride, modulo 2^32)."""

    __slots__ = ("base", "high", "low", "rng", "step", "tool")

    def __init__(self, shape: JobShape, rng: KeyedRandom) -> None:
        self.low, self.high = shape.turn_range()
        self.rng = rng
        self.tool: Sampler | None = sampler(shape.tool_s, rng) if shape.tool_s is not None else None
        rng.reseed(0)
        self.base = rng.getstate()  # reseed(key) sets the state to base ^ key
        self.step = 0
        if self.tool is not None:
            self.tool()
            self.step = (rng.getstate() - self.base) & M32

    def at(self, start: int, k: int) -> float:
        """Turn k's tool time for the job whose stream starts at ``start``."""
        assert self.tool is not None
        self.rng.reseed(((start + k * self.step) & M32) ^ self.base)
        return self.tool()


class ToolDraws:
    """One job's tool times, drawn when asked: ``draws(k)`` is the time after turn k, the same
    number whenever and however often it is asked (an executor killed mid-job restarts it at
    turn 0)."""

    __slots__ = ("_cls", "_start")

    def __init__(self, cls: _ClassShape, start: int) -> None:
        self._cls = cls
        self._start = start

    def __call__(self, k: int) -> float:
        return self._cls.at(self._start, k)


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
        """Request ``rid`` of class ``cls``: its turns, and its tool times as a
        :class:`ToolDraws` (``()`` for one turn or no tool time: all 0; (1, ()) for a class
        without a job shape). Nothing of the tool times is drawn here."""
        c = self._classes.get(cls)
        if c is None:
            return 1, ()
        k = fmix32(zlib.crc32(rid.encode()) ^ self._seed)
        self._turns.reseed(k)
        turns = c.low if c.high == c.low else self._turns.randint(c.low, c.high)
        if c.tool is None or turns == 1:
            return turns, ()
        self._tool.reseed(k)
        return turns, ToolDraws(c, self._tool.getstate())


def draw_shape(shape: JobShape, seed: int, rid: str) -> tuple[int, tuple[float, ...]]:
    """One request's shape, its tool times all drawn: (turns, tool seconds between turns). The
    same (shape, seed, rid) always draws the same."""
    turns, tool = ShapeDraws({"": shape}, seed).draw("", rid)
    if isinstance(tool, tuple):
        return turns, (0.0,) * (turns - 1)
    return turns, tuple(tool(k) for k in range(turns - 1))
