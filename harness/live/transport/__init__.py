"""The HTTP transport: the upstream client (HTTP/1.1 on asyncio + httptools), TLS settings, the
target URL, and the proxy's HTTP edge (``http``: headers, bodies, JSON answers). The OpenAI
wire format itself is ``harness.wire``'s."""
