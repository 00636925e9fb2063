"""The upstream model, sans-I/O: how a model endpoint behaves, shared by the simulated upstream
(``harness.sim.upstream``) and the stub (``harness.stub``).

``bucket`` is the one token bucket (stdlib only: the engine imports it for ``tenant_rate``);
``latency`` draws latencies. This package imports nothing at import time, so importing
``harness.upstream_model.bucket`` from the engine pulls in nothing else of harness.
"""
