"""The ground floor: small helpers any room may import, standard library only (orjson at most),
importing nothing else of harness.

``atomic`` the one atomic file write; ``digits`` decimal digits into a byte buffer (compiled:
the decision log's numbers, request ids); ``text_tokens`` the one rule for a prompt's size in
tokens (~4 characters a token); ``exit_codes`` what each exit code means; ``interrupts`` stop
signals counted instead of raised; ``metric_params`` the fixed parameters of the proxy's
Prometheus metrics (weights, buckets) that ``harness export``'s PromQL depends on.
"""
