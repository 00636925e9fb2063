"""Serving an ASGI app, shared by the stub and the proxy: ``server`` (the listening socket and
the signal-aware uvicorn server) and ``asgi`` (the ASGI vocabulary: Scope, Receive, Send,
Headers). Never the engine: the stub imports it too.
"""
