"""The proxy process: the ASGI app in front of the upstream, its run clock and driver of the
engine, its metrics, its answers and its results folder."""
