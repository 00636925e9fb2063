"""An agent job's session in the live proxy: the request body of each turn.

An agent job (a class with ``job:``) is one client request that the proxy's executor serves
as a session of model calls, as an agent would: turn 0 sends the client's messages (behind the
class's shared prefix, a system message of ``shared_prefix_tokens`` tokens, when it has one);
each later turn sends the previous turn's messages plus that turn's answer (an ``assistant``
message with the answer's text) plus the new input (a ``user`` message of
``new_input_tokens`` tokens: a tool's result, say). So the upstream -- the stub or a real
endpoint -- sees the call pattern and the prompt growth of a real session, and the
simulation's token model (``SimUpstream.job_turn``) grows a prompt by the same rule.

A retried turn resends its own body; a session restarted at turn 0 (its executor killed at a
drain timeout) starts again from the client's messages. Sizes in tokens are made from text at
``harness.ground.text_tokens``' four characters a token, the rule the stub counts prompts by.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from harness.ground.text_tokens import CHARS_PER_TOKEN, content_chars, prompt_tokens
from harness.serve.asgi import Headers
from harness.wire import BadEvent, EventSplitter, chunk_object, delta_content, is_done

TURN_HEADER: Final = b"x-harness-turn"
"""Sent upstream with a session's turn after the first (its number, from 0): the bundled stub
keys that call's draws by (request id, attempt, turn), as the simulation does. A real endpoint
ignores an unknown header."""

_FILLER: Final = "tool output line. "


def filler(tokens: int) -> str:
    """Text of ``tokens`` tokens at four characters a token ("." for none: a turn still says
    something)."""
    return filler_chars(tokens * CHARS_PER_TOKEN)


def filler_chars(chars: int) -> str:
    """Text of ``chars`` characters ("." for none)."""
    if chars <= 0:
        return "."
    reps = -(-chars // len(_FILLER))
    return (_FILLER * reps)[:chars]


def _chars(messages: list[Any]) -> int:
    """The characters of the messages' text, as the stub counts a prompt."""
    return sum(content_chars(m.get("content")) for m in messages if isinstance(m, dict))


def answer_text(data: bytes, sse: bool) -> str:
    """The assistant's text in an upstream answer: a JSON body's first choice's message, or a
    stream's content deltas joined ("" when the answer says nothing readable)."""
    if not sse:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return ""
        choices = obj.get("choices") if isinstance(obj, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        msg = first.get("message") if isinstance(first, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        if content is None and isinstance(first, dict):
            content = first.get("text")  # a legacy completion's answer
        return content if isinstance(content, str) else ""
    parts: list[str] = []
    for ev in EventSplitter().feed(data + b"\n\n"):
        if is_done(ev):
            break
        try:
            piece = delta_content(chunk_object(ev))
        except BadEvent:
            continue
        if piece:
            parts.append(piece)
    return "".join(parts)


def _text_prompt(doc: dict[str, Any]) -> str | None:
    """A legacy completion's prompt as text (a string, or a list of one), else None: chat's
    messages, or a prompt of token ids, which a session sends unchanged."""
    if "messages" in doc:
        return None
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    return prompt if isinstance(prompt, str) else None


class Session:
    """One agent job's messages, turn by turn (:meth:`body`). A legacy completion's
    (``/v1/completions``) text prompt grows by the same rule: the answer's text and the new
    input are appended to it (the shared prefix goes before it)."""

    __slots__ = (
        "_body",
        "_doc",
        "_first",
        "_messages",
        "_new_input",
        "_original",
        "_text",
        "_traced",
        "fwd",
        "turn",
    )

    def __init__(
        self,
        doc: dict[str, Any],
        body: bytes,
        shared_prefix_tokens: int,
        new_input_tokens: int,
        fwd: Headers,
        traced: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """``traced``: a session trace's records, (prompt, output) tokens per turn
        (``arrivals.trace.sessions``, replay: job): turn k's new input then fills its prompt
        up to record k's (what the record's prompt holds beyond the last turn's prompt and
        answer; "." when the answer already reached it), and it asks for record k's output
        tokens."""
        self._doc = doc
        self._traced = traced
        self.fwd = fwd  # the headers every turn forwards (the turn's own is added to them)
        # Turn 0 without a shared prefix sends the client's own bytes.
        self._original = body if shared_prefix_tokens <= 0 else None
        messages = doc.get("messages")
        first: list[Any] = list(messages) if isinstance(messages, list) else []
        text = _text_prompt(doc)
        if text is not None:  # the prompt as one user message; written back as the prompt
            first = [{"role": "user", "content": text}]
        self._text = text is not None
        if shared_prefix_tokens > 0:
            first.insert(0, {"role": "system", "content": filler(shared_prefix_tokens)})
        self._first = first
        self._messages = first
        self._new_input = new_input_tokens
        self.turn = 0
        self._body: bytes | None = None

    def prompt_tokens(self) -> int:
        """The prompt tokens of the turn last built by :meth:`body`, as the stub counts them
        (its messages' text at four characters a token)."""
        return prompt_tokens(_chars(self._messages))

    def body(self, turn: int, last_answer: bytes | None, sse: bool) -> bytes:
        """The request body of ``turn``. Moving on from the turn before, its answer
        (``last_answer``, ``sse``: a stream's bytes) joins the messages; the same turn again (a
        retry) resends its body; turn 0 after a later one (a restart) starts afresh."""
        if turn == 0:
            self._messages = self._first
            self.turn = 0
            if self._original is not None:
                self._body = self._original
                return self._original
        elif turn != self.turn:
            said = answer_text(last_answer, sse) if last_answer is not None else ""
            grown = [*self._messages, {"role": "assistant", "content": said}]
            rec = self._traced
            if rec is not None and turn < len(rec):
                # record k's prompt is the whole prompt: the new input fills it up
                new = filler_chars(rec[turn][0] * CHARS_PER_TOKEN - _chars(grown))
            else:
                new = filler(self._new_input)
            self._messages = [*grown, {"role": "user", "content": new}]
        elif self._body is not None:
            return self._body
        self.turn = turn
        doc = dict(self._doc)
        if self._text:
            doc["prompt"] = "".join(str(m["content"]) for m in self._messages)
        elif "messages" in doc or "prompt" not in doc:  # a prompt of token ids stays as it is
            doc["messages"] = self._messages
        rec = self._traced
        if rec is not None and turn < len(rec):
            cap = "max_completion_tokens" if "max_completion_tokens" in doc else "max_tokens"
            doc[cap] = max(1, rec[turn][1])
        self._body = orjson.dumps(doc)
        return self._body
