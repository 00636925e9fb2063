"""What a request costs in tokens: ``tokens.cost``, one expression over the gateways' names.

The expression uses the variables the gateways use (Envoy AI Gateway's ``llmRequestCosts``
CEL, LiteLLM's ``token_rate_limit_type``, APISIX's ``limit_strategy``):

- ``input_tokens``: the prompt, cached part included (OpenAI's ``usage.prompt_tokens``);
- ``cached_input_tokens``: the part of the prompt served from a prefix cache
  (``usage.prompt_tokens_details.cached_tokens``);
- ``output_tokens``: the completion (``usage.completion_tokens``);
- ``total_tokens``: ``input_tokens + output_tokens``.

Numbers (``0.1``, ``2``, CEL's ``2u``), ``+ - * /`` and parentheses. No ``eval``: a small
recursive-descent parser reduces the expression to a weighted sum, ``a * input_tokens + b *
cached_input_tokens + c * output_tokens + d``, which every consumer reads as four numbers (the
budgets, the queue's fairness, the price, the exports). A cost is a weighted sum or it is
refused: a product or a quotient of two token counts (``input_tokens * output_tokens``) has no
gateway that charges it, and would not be a cost that adds up over requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

VARIABLES: Final[tuple[str, ...]] = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "total_tokens",
)
DEFAULT_COST: Final = "total_tokens"

# A linear form: (input, cached, output, constant) coefficients.
_Form = tuple[float, float, float, float]
_BASIS: Final[dict[str, _Form]] = {
    "input_tokens": (1.0, 0.0, 0.0, 0.0),
    "cached_input_tokens": (0.0, 1.0, 0.0, 0.0),
    "output_tokens": (0.0, 0.0, 1.0, 0.0),
    "total_tokens": (1.0, 0.0, 1.0, 0.0),
}
_NUMBER: Final = r"(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)u?"
_TOKEN: Final = re.compile(r"\s*(?:" + _NUMBER + r"|([A-Za-z_]\w*)|(\S))")


class CostError(ValueError):
    """An expression that is not a token cost; the message says where and why."""


@dataclass(frozen=True, slots=True)
class TokenCost:
    """A request's cost: ``input * input_tokens + cached * cached_input_tokens + output *
    output_tokens + constant``; ``text`` is the expression as written."""

    text: str
    input: float
    cached: float
    output: float
    constant: float

    def of(self, input_tokens: float, cached_input_tokens: float, output_tokens: float) -> float:
        """The cost of one request with these token counts (never below 0)."""
        c = (
            self.input * input_tokens
            + self.cached * cached_input_tokens
            + self.output * output_tokens
            + self.constant
        )
        return c if c > 0.0 else 0.0

    def uses_output(self) -> bool:
        return self.output != 0.0

    def uses_cached(self) -> bool:
        return self.cached != 0.0


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing white space is left
            break
        if m.group(3) is not None and m.group(3) not in "+-*/()":
            raise CostError(f"unexpected {m.group(3)!r} at character {m.start(3) + 1}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        t = self.peek()
        if t is None:
            raise CostError("the expression ends too early")
        self.i += 1
        return t

    def expr(self) -> _Form:
        f = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            g = self.term()
            f = _add(f, g, -1.0 if op == "-" else 1.0)
        return f

    def term(self) -> _Form:
        f = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            g = self.unary()
            f = _mul(f, g) if op == "*" else _div(f, g)
        return f

    def unary(self) -> _Form:
        if self.peek() == "-":
            self.take()
            return _scale(self.unary(), -1.0)
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.atom()

    def atom(self) -> _Form:
        t = self.take()
        if t == "(":
            f = self.expr()
            if self.take() != ")":
                raise CostError("a '(' is not closed")
            return f
        if t[0].isdigit() or t[0] == ".":
            return (0.0, 0.0, 0.0, float(t.rstrip("u")))
        if t in _BASIS:
            return _BASIS[t]
        if t[0].isalpha() or t[0] == "_":
            raise CostError(f"unknown variable {t!r} (known: {', '.join(VARIABLES)})")
        raise CostError(f"unexpected {t!r}")


def _is_constant(f: _Form) -> bool:
    return f[0] == 0.0 and f[1] == 0.0 and f[2] == 0.0


def _add(f: _Form, g: _Form, sign: float) -> _Form:
    return (f[0] + sign * g[0], f[1] + sign * g[1], f[2] + sign * g[2], f[3] + sign * g[3])


def _scale(f: _Form, k: float) -> _Form:
    return (f[0] * k, f[1] * k, f[2] * k, f[3] * k)


def _mul(f: _Form, g: _Form) -> _Form:
    if _is_constant(f):
        return _scale(g, f[3])
    if _is_constant(g):
        return _scale(f, g[3])
    raise CostError(
        "a product of two token counts is not a cost that adds up over requests "
        "(write a weighted sum, e.g. input_tokens + output_tokens * 1.5)"
    )


def _div(f: _Form, g: _Form) -> _Form:
    if not _is_constant(g):
        raise CostError("dividing by a token count is not a cost (divide by a number only)")
    if g[3] == 0.0:
        raise CostError("division by zero")
    return _scale(f, 1.0 / g[3])


def parse_cost(text: str) -> TokenCost:
    """The expression as a :class:`TokenCost`; :class:`CostError` names what is wrong."""
    if not text.strip():
        raise CostError("empty; e.g. total_tokens, or input_tokens + output_tokens * 1.5")
    p = _Parser(text)
    form = p.expr()
    if p.peek() is not None:
        raise CostError(f"unexpected {p.peek()!r} after a complete expression")
    if _is_constant(form):
        raise CostError("names no token count: a constant is not a token cost")
    if any(c < 0 for c in (form[0], form[0] + form[1], form[2])):
        raise CostError(
            "a request's cost would fall as it uses more tokens (a negative weight): "
            f"input {form[0] + 0.0:g}, cached input {form[0] + form[1] + 0.0:g}, "
            f"output {form[2] + 0.0:g}"
        )
    return TokenCost(text.strip(), form[0], form[1], form[2], form[3])


__all__ = ["DEFAULT_COST", "VARIABLES", "CostError", "TokenCost", "parse_cost"]
