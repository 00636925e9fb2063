"""An agent session's messages, call by call: the request body of each model call.

One rule for both sides of a live run: the proxy writes a held agent job's turns by it
(``harness.live.proxy.session``), and the load generator writes a per-call session's calls by
it (``job.admission: per_call``), so the upstream sees the same prompt growth either way, and
the simulation's token model (``SimUpstream.job_turn``) grows a prompt by the same rule.

Call 0 sends the client's messages (behind the class's shared prefix, a system message of
``shared_prefix_tokens`` tokens, when it has one); each later call sends the previous call's
messages plus that call's answer (an ``assistant`` message with the answer's text) plus the new
input (a ``user`` message of ``new_input_tokens`` tokens: a tool's result, say). Sizes in
tokens are made from text at ``harness.ground.text_tokens``' four characters a token, the rule
the stub counts prompts by. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from harness.ground.text_tokens import CHARS_PER_TOKEN, content_chars, prompt_tokens
from harness.wire import BadEvent, EventSplitter, chunk_object, delta_content, is_done

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


def message_chars(messages: list[Any]) -> int:
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


def text_prompt(doc: dict[str, Any]) -> str | None:
    """A legacy completion's prompt as text (a string, or a list of one), else None: chat's
    messages, or a prompt of token ids, which a session sends unchanged."""
    if "messages" in doc:
        return None
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    return prompt if isinstance(prompt, str) else None


class Conversation:
    """One agent session's messages, call by call (:meth:`body`, or :meth:`body_said` given
    the last answer's text). A legacy completion's (``/v1/completions``) text prompt grows by
    the same rule: the answer's text and the new input are appended to it (the shared prefix
    goes before it)."""

    __slots__ = (
        "_body",
        "_doc",
        "_first",
        "_messages",
        "_new_input",
        "_original",
        "_text",
        "_traced",
        "turn",
    )

    def __init__(
        self,
        doc: dict[str, Any],
        body: bytes,
        shared_prefix_tokens: int,
        new_input_tokens: int,
        traced: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """``doc``: the first call's request (``body``: its bytes). ``traced``: a session
        trace's records, (prompt, output) tokens per turn (``arrivals.trace.sessions``,
        replay: job): turn k's new input then fills its prompt up to record k's (what the
        record's prompt holds beyond the last turn's prompt and answer; "." when the answer
        already reached it), and it asks for record k's output tokens."""
        self._doc = doc
        self._traced = traced
        # Turn 0 without a shared prefix sends the client's own bytes.
        self._original = body if shared_prefix_tokens <= 0 else None
        messages = doc.get("messages")
        first: list[Any] = list(messages) if isinstance(messages, list) else []
        text = text_prompt(doc)
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
        """The prompt tokens of the turn last built, as the stub counts them (its messages'
        text at four characters a token)."""
        return prompt_tokens(message_chars(self._messages))

    def body(self, turn: int, last_answer: bytes | None, sse: bool) -> bytes:
        """The request body of ``turn``. Moving on from the turn before, its answer
        (``last_answer``, ``sse``: a stream's bytes) joins the messages; the same turn again (a
        retry) resends its body; turn 0 after a later one (a restart) starts afresh."""
        said = ""
        if turn and turn != self.turn and last_answer is not None:
            said = answer_text(last_answer, sse)
        return self.body_said(turn, said)

    def body_said(self, turn: int, said: str) -> bytes:
        """:meth:`body`, given the text of the turn before's answer (``said``)."""
        if turn == 0:
            self._messages = self._first
            self.turn = 0
            if self._original is not None:
                self._body = self._original
                return self._original
        elif turn != self.turn:
            grown = [*self._messages, {"role": "assistant", "content": said}]
            rec = self._traced
            if rec is not None and turn < len(rec):
                # record k's prompt is the whole prompt: the new input fills it up
                new = filler_chars(rec[turn][0] * CHARS_PER_TOKEN - message_chars(grown))
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
