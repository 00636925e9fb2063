"""What the proxy forwards as the upstream said it: requests outside admission (``GET
/v1/models``, say) and an upstream's own answer passed on with the proxy's headers added."""

from __future__ import annotations

from harness.live.transport import http
from harness.live.transport.upstream import Upstream, UpstreamError
from harness.serve.asgi import Headers, Receive, Scope, Send
from harness.wire import error_body


async def passthrough(
    upstream: Upstream,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    max_body: int,
    timeout_s: float,
) -> None:
    """A non-POST request, forwarded outside admission: it is no arrival."""
    split = http.split_request_headers(scope["headers"])
    try:
        body = await http.read_body(receive, max_body)
    except http.BodyTooLarge as e:
        return await http.too_large(send, receive, e.more, max_body)
    except http.ClientGone:
        return
    qs = scope.get("query_string", b"")
    target = scope["path"] + ("?" + qs.decode("latin-1") if qs else "")
    try:
        resp = await upstream.send(
            scope["method"], target, split.forward, body, timeout_s=timeout_s, stream=False
        )
        try:
            data = await resp.read()
        finally:
            resp.close()
    except UpstreamError as e:
        msg = f"The upstream call failed: {e.reason}."
        return await http.send_json(
            send,
            504 if e.reason == "upstream_timeout" else 502,
            error_body(msg, "upstream_error", code=e.reason),
        )
    await pass_on(send, (resp.status, resp.headers, data), [])


async def pass_on(send: Send, last: tuple[int, Headers, bytes], extra: Headers) -> None:
    """The upstream's answer as it came, plus the proxy's own headers."""
    status, headers, data = last
    out = http.response_headers(headers) + extra
    out.append((b"content-length", b"%d" % len(data)))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": data})
