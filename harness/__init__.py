"""harness: rehearse bursts and faults against LLM job queues.

The simulation's hot path (setup.py's HOT_MODULES) is compiled with mypyc when the install
could build it. ``HARNESS_PURE=1`` in the environment makes this process import the plain
Python source of those modules instead: for debugging, and for the test that checks both
builds take the same decisions byte for byte.
"""

from __future__ import annotations

from harness import bootstrap  # noqa: F401  (the import finders: HARNESS_PURE, a checkout's aliases)

__version__ = "0.1.0"


def compiled() -> bool:
    """Whether the engine in use is the mypyc-compiled one."""
    from harness.engine import core

    return not (core.__file__ or "").endswith(".py")
