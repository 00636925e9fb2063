"""The OpenAI-compatible slow stub with fault injection (``harness stub``).

Installed as ``harness.stub`` (the sources live in ``stubs/``). ``create_app`` builds the ASGI
app (testable in-process); ``harness.stub.server.serve`` runs it under uvicorn. Modules:
``latency`` (latency and length models, request classes), ``faults`` (the fault timeline,
clock injected), ``wire`` (OpenAI bodies, SSE frames, headers), ``chat`` (the completions
endpoint), ``app`` (routing, admin API), ``server`` (uvicorn, a real TCP reset).
"""

from harness.stub.app import StubApp, create_app

__all__ = ["StubApp", "create_app"]
