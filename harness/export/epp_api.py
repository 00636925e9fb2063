"""The llm-d router's config API as harness reads and writes it: the ``EndpointPickerConfig``
(``apix/config/v1alpha1/endpointpickerconfig_types.go``) and ``InferenceObjective``
(``apix/v1alpha2/inferenceobjective_types.go``) kinds, the flow-control plugins' type names and
parameters, and the two value types the API borrows from Kubernetes: resource quantities
(``"1Gi"``, ``"500M"``, ``"1k"``) and Go durations (``"60s"``, ``"1m30s"``, ``"0s"``).

Followed: llm-d-router at commit ebab68792 (the names below are its registered type
constants and its parameters' JSON names). Shared by ``export epp`` (:mod:`harness.export.epp`)
and ``import epp`` (:mod:`harness.export.epp_import`), so both spell the API alike.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

FOLLOWED: Final = "llm-d-router's config API at commit ebab68792"
CONFIG_API: Final = "llm-d.ai/v1alpha1"
# The router still reads its config under the older group, logging a deprecation.
CONFIG_API_DEPRECATED: Final = "inference.networking.x-k8s.io/v1alpha1"
OBJECTIVE_APIS: Final = ("llm-d.ai/v1alpha2", "inference.networking.x-k8s.io/v1alpha2")
OBJECTIVE_API: Final = OBJECTIVE_APIS[0]
POOL_GROUP: Final = "inference.networking.k8s.io"  # the InferencePool's group (poolRef)
FEATURE_GATE: Final = "flowControl"

# The profile's spelling -> the router's registered plugin type.
FAIRNESS_TYPES: Final = {
    "global-strict": "global-strict-fairness-policy",
    "round-robin": "round-robin-fairness-policy",
    "program-aware": "program-aware-fairness",
}
ORDERING_TYPES: Final = {
    "fcfs": "fcfs-ordering-policy",
    "edf": "edf-ordering-policy",
    "slo-deadline": "slo-deadline-ordering-policy",
}
USAGE_LIMIT_TYPES: Final = {
    "static": "static-usage-limit-policy",
    "priority-holdback": "priority-holdback-policy",
    "soft-reflective-ceiling": "soft-reflective-ceiling-policy",
}
DETECTOR_TYPES: Final = {
    "utilization": "utilization-detector",
    "concurrency": "concurrency-detector",
}

# Each flow-control plugin type's parameters (JSON name -> the kind of value), as its factory
# decodes them (strictly: an unknown parameter is an error in the router).
PARAMETERS: Final[dict[str, dict[str, str]]] = {
    "global-strict-fairness-policy": {},
    "round-robin-fairness-policy": {},
    "program-aware-fairness": {
        "strategy": "str",
        "evictionTtlSeconds": "float",
        "evictionSweepSeconds": "float",
        "lasWeightService": "float",
        "lasWeightHeadWait": "float",
        "lasHalfLifeSeconds": "float",
    },
    "fcfs-ordering-policy": {},
    "edf-ordering-policy": {},
    "slo-deadline-ordering-policy": {},
    "static-usage-limit-policy": {"threshold": "float"},
    "priority-holdback-policy": {
        "shape": "str",
        "domain": "str",
        "minCeiling": "float",
        "maxCeiling": "float",
    },
    "soft-reflective-ceiling-policy": {},
    "utilization-detector": {
        "queueDepthThreshold": "int",
        "kvCacheUtilThreshold": "float",
        "metricsStalenessThreshold": "duration",
        "headroom": "float",
    },
    "concurrency-detector": {
        "maxConcurrency": "int",
        "headroom": "float",
        "concurrencyMode": "str",
        "maxTokenConcurrency": "int",
        "inFlightLoadProducerName": "str",
    },
}


class ApiValueError(ValueError):
    """A quantity or a duration the API would not accept."""


_QUANTITY = re.compile(
    r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def parse_quantity(value: object) -> int:
    """A Kubernetes quantity (a string such as ``"1Gi"``, ``"500M"``, ``"1k"``, ``"2e3"``, or a
    plain number) as the router reads it: ``Quantity.Value()``, rounded up to a whole number.
    Negative values are refused (the router refuses them when it builds its limits)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ApiValueError(
            f'expected a Kubernetes quantity (e.g. "1k", "500M", "1Gi"), got {value!r}'
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ApiValueError(f"expected a Kubernetes quantity, got {value!r}")
        text = repr(value)
    else:
        text = str(value).strip() if isinstance(value, str) else str(value)
    m = _QUANTITY.match(text)
    if m is None:
        raise ApiValueError(
            f"{text!r} is not a Kubernetes quantity (digits with an optional suffix: k, M, G, T,"
            " P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as 2e3)"
        )
    sign, digits, exponent, suffix = m.groups()
    amount = Fraction(digits)
    if exponent is not None:
        power = int(exponent[1:])
        if abs(power) > 30:
            raise ApiValueError(f"{text!r}: exponent out of range")
        amount *= Fraction(10) ** power
    elif suffix in _BINARY:
        amount *= _BINARY[suffix]
    else:
        amount *= _DECIMAL[suffix or ""]
    if sign == "-" and amount:
        raise ApiValueError(f"{text!r}: must be non-negative")
    whole = math.ceil(amount)
    if whole >= 1 << 63:
        raise ApiValueError(f"{text!r}: too large")
    return whole


def format_quantity(n: int) -> str:
    """A whole number as a quantity string: with a binary or decimal suffix when one divides
    it exactly (``1Gi``, ``1G``, ``500M``), else plain digits."""
    if n == 0:
        return "0"
    for suffix, size in reversed(_BINARY.items()):
        if n % size == 0 and n // size < 1024:
            return f"{n // size}{suffix}"
    for suffix in ("E", "P", "T", "G", "M", "k"):
        size = int(_DECIMAL[suffix])
        if n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "μs": Fraction(1, 10**6),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}


def parse_duration(value: object) -> float:
    """A Go duration string (``"60s"``, ``"1m30s"``, ``"200ms"``, ``"0s"``, ``"0"``) in seconds,
    as ``metav1.Duration`` reads it (a string: a bare number is refused); negative refused."""
    if not isinstance(value, str):
        raise ApiValueError(f'expected a duration string such as "60s" or "1m30s", got {value!r}')
    text = value.strip()
    if text in ("0", "+0", "-0"):
        return 0.0
    body = text[1:] if text[:1] in "+-" else text
    pos, total = 0, Fraction(0)
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            break
        total += Fraction(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise ApiValueError(
            f'{value!r} is not a duration (numbers with units h, m, s, ms, us, ns: "60s",'
            ' "1m30s", "0s")'
        )
    if text.startswith("-") and total:
        raise ApiValueError(f"{value!r}: must be non-negative")
    return float(total)


def format_duration(seconds: float) -> str:
    """Seconds as a duration string the router reads: ``60s``, ``90s``, ``1.5s``, ``200ms``,
    ``0s`` (seconds from one second up, as the guide writes them; milliseconds below)."""
    if seconds <= 0:
        return "0s"
    ns = round(Fraction(seconds) * 10**9)
    if ns < 10**9:
        return f"{_trim(Fraction(ns, 10**6))}ms"
    return f"{_trim(Fraction(ns, 10**9))}s"


def _trim(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    return f"{float(x):.9f}".rstrip("0").rstrip(".")


__all__ = [
    "CONFIG_API",
    "CONFIG_API_DEPRECATED",
    "DETECTOR_TYPES",
    "FAIRNESS_TYPES",
    "FEATURE_GATE",
    "FOLLOWED",
    "OBJECTIVE_API",
    "OBJECTIVE_APIS",
    "ORDERING_TYPES",
    "PARAMETERS",
    "POOL_GROUP",
    "USAGE_LIMIT_TYPES",
    "ApiValueError",
    "format_duration",
    "format_quantity",
    "parse_duration",
    "parse_quantity",
]
