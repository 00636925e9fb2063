"""The HTTP transport: the upstream client (HTTP/1.1 on asyncio + httptools), TLS settings, the
target URL, and the OpenAI wire pieces it sends and reads."""
