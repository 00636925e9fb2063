"""``harness import epp``: an llm-d router ``EndpointPickerConfig`` (and ``InferenceObjective``
files) read back into a profile whose ``flow_control`` section says what the config's
``flowControl`` block says, with one class per objective (its priority) and a placeholder rest
(arrivals, upstream) to edit.

Theory of operation: each file is composed with line numbers (the profile's bounded loader,
:mod:`harness.profile.yaml_guard`; several documents a file, so ``export epp``'s output reads
back whole), every document is checked against the config API's types as the router decodes
them (strictly: an unknown field, a wrong type, a bad quantity or duration is refused, naming
file, line and field; :data:`_CONFIG`), the flow-control plugins are resolved by name (a
default the router registers by itself may be named without being declared), and the section
is written in the profile's spelling. The profile text is then loaded like any other: a value
the profile refuses is reported at the config's line and field it came from.

What a config holds that harness does not model (scheduling profiles, scorers and pickers, the
data layer, parsers, the program-aware plugin's metrics housekeeping) goes to
:attr:`Imported.notes`, one line each. Followed: :data:`harness.export.epp_api.FOLLOWED`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from harness.export.epp_api import (
    CONFIG_API,
    CONFIG_API_DEPRECATED,
    DETECTOR_TYPES,
    FAIRNESS_TYPES,
    FEATURE_GATE,
    FOLLOWED,
    OBJECTIVE_APIS,
    ORDERING_TYPES,
    PARAMETERS,
    USAGE_LIMIT_TYPES,
    ApiValueError,
    parse_duration,
    parse_quantity,
)
from harness.export.render import dump
from harness.profile import loads
from harness.profile.schema import Profile
from harness.profile.walk import ProfileError, did_you_mean
from harness.profile.yaml_guard import MAX_BYTES, GuardedLoader, YamlLimitError

# A type of the API: a name ("str", "int", "float", "bool", "quantity", "duration", "any",
# "map": any mapping), a list ("list", item type) or an object ({field: type}).
Spec = Any

_BAND: Final[dict[str, Spec]] = {
    "priority": "int",
    "maxBytes": "quantity",
    "maxRequests": "quantity",
    "fairnessPolicyRef": "str",
    "orderingPolicyRef": "str",
}
_TEMPLATE: Final = {k: v for k, v in _BAND.items() if k != "priority"}
_PLUGIN_REF: Final[dict[str, Spec]] = {"pluginRef": "str"}
_CONFIG: Final[dict[str, Spec]] = {  # endpointpickerconfig_types.go at ebab68792
    "apiVersion": "str",
    "kind": "str",
    "featureGates": ("list", "str"),
    "plugins": ("list", {"name": "str", "type": "str", "parameters": "any"}),
    "schedulingProfiles": (
        "list",
        {"name": "str", "plugins": ("list", {"pluginRef": "str", "weight": "float"})},
    ),
    "dataLayer": "map",
    "flowControl": {
        "maxBytes": "quantity",
        "maxRequests": "quantity",
        "defaultRequestTTL": "duration",
        "noEndpointRequestTTL": "duration",
        "defaultPriorityBand": _TEMPLATE,
        "defaultNegativePriorityBand": _TEMPLATE,
        "priorityBands": ("list", _BAND),
        "usageLimitPolicyPluginRef": "str",
        "saturationDetector": _PLUGIN_REF,
        "enableEviction": "bool",
    },
    "requestHandler": "map",
    "saturationDetector": _PLUGIN_REF,
    "parser": _PLUGIN_REF,
}
_OBJECTIVE: Final[dict[str, Spec]] = {  # inferenceobjective_types.go
    "apiVersion": "str",
    "kind": "str",
    "metadata": "map",
    "spec": {
        "priority": "int",
        "poolRef": {"group": "str", "kind": "str", "name": "str"},
    },
    "status": "map",
}
# The plugins the router registers by itself when a config names them without declaring them.
_IMPLICIT: Final = {
    "global-strict-fairness-policy",
    "fcfs-ordering-policy",
    "static-usage-limit-policy",
    "utilization-detector",
}
_INT32: Final = 1 << 31


@dataclass(frozen=True, slots=True)
class Imported:
    """The profile's YAML text, the profile it loads as, and what the config holds that the
    profile does not model (one line each)."""

    text: str
    profile: Profile
    notes: tuple[str, ...]


@dataclass
class _Doc:
    file: str
    raw: dict[str, Any]
    lines: dict[str, int]
    start: int  # the document's first line

    def line(self, path: str) -> int:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path.rpartition(".")[0]
        return self.start

    def err(self, path: str, message: str) -> ProfileError:
        return ProfileError(self.file, self.line(path), path, message)


@dataclass
class _State:
    notes: list[str] = field(default_factory=list)
    # profile path -> (file, line, the config's field it came from)
    origin: dict[str, tuple[str, int, str]] = field(default_factory=dict)

    def note(self, where: str, text: str) -> None:
        self.notes.append(f"{where}: {text}")


def _tree(node: yaml.Node, path: str, lines: dict[str, int], file: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise ProfileError(file, k.start_mark.line + 1, path, "keys must be plain names")
            key = str(k.value)
            kpath = f"{path}.{key}" if path else key
            if key in out:
                raise ProfileError(file, k.start_mark.line + 1, kpath, "duplicate field")
            lines[kpath] = k.start_mark.line + 1
            out[key] = _tree(v, kpath, lines, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [
            _tree(v, f"{path}.{i}" if path else str(i), lines, file)
            for i, v in enumerate(node.value)
        ]
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, yaml.YAMLError) as e:
        line = node.start_mark.line + 1
        raise ProfileError(file, line, path, f"cannot read value: {e}") from None
    finally:
        loader.dispose()


def read_documents(file: str) -> list[_Doc]:
    """Every document of a YAML file, each with a line per dotted path; ProfileError."""
    try:
        with Path(file).open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise ProfileError(file, None, "", f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise ProfileError(file, None, "", f"larger than {MAX_BYTES:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileError(file, None, "", "not UTF-8 text") from None
    loader = GuardedLoader(text)
    docs: list[_Doc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[str, int] = {}
            raw = _tree(node, "", lines, file)
            start = node.start_mark.line + 1
            if raw is None:
                continue
            if not isinstance(raw, dict):
                raise ProfileError(file, start, "", "a document is a mapping (apiVersion, kind)")
            docs.append(_Doc(file, raw, lines, start))
    except YamlLimitError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, "", f"YAML refused: {e.problem}") from None
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ProfileError(file, line, "", f"YAML syntax: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ProfileError(file, None, "", f"YAML: {e}") from None
    finally:
        loader.dispose()
    if not docs:
        raise ProfileError(file, None, "", "no YAML document in the file")
    return docs


def _type_name(spec: Spec) -> str:
    if isinstance(spec, dict):
        return "a mapping"
    if isinstance(spec, tuple):
        return "a list"
    names: dict[str, str] = {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "true or false",
        "map": "a mapping",
        "quantity": "a quantity",
        "duration": "a duration",
    }
    return names.get(str(spec), str(spec))


def _check(doc: _Doc, spec: Spec, value: Any, path: str) -> Any:
    """``value`` checked against ``spec`` as the router's strict decoder reads it; quantities
    and durations converted (whole number, seconds). Null is an absent field."""
    if value is None or spec == "any":
        return value
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise doc.err(path, f"expected {_type_name(spec)}, got {_show(value)}")
        out: dict[str, Any] = {}
        for key, v in value.items():
            kpath = f"{path}.{key}" if path else key
            if key not in spec:
                hint = did_you_mean(key, spec) or f" (the API has: {', '.join(spec)})"
                raise doc.err(kpath, f"unknown field{hint}")
            out[key] = _check(doc, spec[key], v, kpath)
        return out
    if isinstance(spec, tuple):
        if not isinstance(value, list):
            raise doc.err(path, f"expected a list, got {_show(value)}")
        return [_check(doc, spec[1], v, f"{path}.{i}") for i, v in enumerate(value)]
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "map": isinstance(value, dict),
    }
    if spec in ok:
        if not ok[spec]:
            raise doc.err(path, f"expected {_type_name(spec)}, got {_show(value)}")
        return value
    try:
        return parse_quantity(value) if spec == "quantity" else parse_duration(value)
    except ApiValueError as e:
        raise doc.err(path, str(e)) from None


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


@dataclass(frozen=True, slots=True)
class _Plugin:
    kind: str
    params: dict[str, Any]
    path: str  # plugins.N, or "" for one the router registers by itself


def _plugins(doc: _Doc, cfg: dict[str, Any], st: _State) -> dict[str, _Plugin]:
    out: dict[str, _Plugin] = {}
    for i, spec in enumerate(cfg.get("plugins") or []):
        path = f"plugins.{i}"
        kind = spec.get("type")
        if not kind:
            raise doc.err(f"{path}.type", "missing: every plugin has a type")
        name = spec.get("name") or kind
        if name in out:
            raise doc.err(f"{path}.name", f"duplicate plugin name {name!r}")
        params = spec.get("parameters")
        known = PARAMETERS.get(kind)
        if known is None:
            st.note(
                path,
                f"{name} ({kind}) is not a flow-control plugin: endpoint picking (scorers,"
                " filters, pickers, the data layer) is not admission",
            )
            continue
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise doc.err(f"{path}.parameters", f"expected a mapping, got {_show(params)}")
        checked: dict[str, Any] = {}
        for key, v in params.items():
            ppath = f"{path}.parameters.{key}"
            if key not in known:
                has = ", ".join(known) or "none"
                raise doc.err(ppath, f"unknown parameter of {kind} (its parameters: {has})")
            checked[key] = _check(doc, known[key], v, ppath)
        out[name] = _Plugin(kind, checked, path)
    return out


def _resolve(
    doc: _Doc, plugins: dict[str, _Plugin], ref: str, path: str, table: dict[str, str]
) -> tuple[str, _Plugin]:
    """A reference to a plugin of one of ``table``'s types: (the profile's name, the plugin)."""
    plugin = plugins.get(ref)
    if plugin is None:
        if ref in _IMPLICIT and ref in table.values():
            plugin = _Plugin(ref, {}, "")
        else:
            declared = ", ".join(sorted(plugins)) or "none"
            raise doc.err(path, f"references undefined plugin {ref!r} (declared: {declared})")
    for mine, kind in table.items():
        if kind == plugin.kind:
            return mine, plugin
    wanted = ", ".join(table.values())
    raise doc.err(path, f"{ref!r} is a {plugin.kind}, not one of {wanted}")


class _Builder:
    """The flow_control section from a checked config, with where each value came from."""

    def __init__(self, doc: _Doc, plugins: dict[str, _Plugin], st: _State) -> None:
        self.doc, self.plugins, self.st = doc, plugins, st
        self.used: dict[str, tuple[str, _Plugin]] = {}  # a policy type -> its first instance

    def put(self, out: dict[str, Any], key: str, value: Any, ppath: str, cpath: str) -> None:
        out[key] = value
        self.st.origin[ppath] = (self.doc.file, self.doc.line(cpath), cpath)

    def use(self, ref: str, cpath: str, table: dict[str, str]) -> tuple[str, _Plugin]:
        mine, plugin = _resolve(self.doc, self.plugins, ref, cpath, table)
        first = self.used.get(plugin.kind)
        if first is not None and first[1].params != plugin.params:
            self.st.note(
                cpath,
                f"a second {plugin.kind} instance with other parameters: the profile has one"
                f" parameter set a policy, {first[0]}'s is used",
            )
        elif first is None:
            self.used[plugin.kind] = (ref, plugin)
        return mine, plugin

    def band(self, b: dict[str, Any], cpath: str, ppath: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "priority" in b:
            if not -_INT32 <= b["priority"] < _INT32:
                raise self.doc.err(f"{cpath}.priority", "out of the int32 range")
            self.put(out, "priority", b["priority"], f"{ppath}.priority", f"{cpath}.priority")
        for ckey, pkey in (("maxRequests", "max_requests"), ("maxBytes", "max_bytes")):
            if b.get(ckey) is not None:
                self.put(out, pkey, b[ckey], f"{ppath}.{pkey}", f"{cpath}.{ckey}")
        for ckey, pkey, table in (
            ("fairnessPolicyRef", "fairness", FAIRNESS_TYPES),
            ("orderingPolicyRef", "ordering", ORDERING_TYPES),
        ):
            if b.get(ckey):
                mine, _ = self.use(b[ckey], f"{cpath}.{ckey}", table)
                self.put(out, pkey, mine, f"{ppath}.{pkey}", f"{cpath}.{ckey}")
        return out

    def section(self, fc: dict[str, Any], top_detector: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        p, c = "flow_control", "flowControl"
        for ckey, pkey in (
            ("maxRequests", "max_requests"),
            ("maxBytes", "max_bytes"),
            ("defaultRequestTTL", "default_request_ttl_s"),
            ("noEndpointRequestTTL", "no_endpoint_request_ttl_s"),
            ("enableEviction", "enable_eviction"),
        ):
            if fc.get(ckey) is not None:
                self.put(out, pkey, fc[ckey], f"{p}.{pkey}", f"{c}.{ckey}")
        bands = [
            self.band(b, f"{c}.priorityBands.{i}", f"{p}.priority_bands.{i}")
            for i, b in enumerate(fc.get("priorityBands") or [])
        ]
        for i, b in enumerate(bands):
            if "priority" not in b:
                # Go's decoder leaves an absent priority at 0
                b["priority"] = 0
                self.st.origin[f"{p}.priority_bands.{i}.priority"] = (
                    self.doc.file,
                    self.doc.line(f"{c}.priorityBands.{i}"),
                    f"{c}.priorityBands.{i}",
                )
        if bands:
            out["priority_bands"] = bands
        for ckey, pkey in (
            ("defaultPriorityBand", "default_priority_band"),
            ("defaultNegativePriorityBand", "default_negative_priority_band"),
        ):
            if fc.get(ckey) is not None:
                out[pkey] = self.band(fc[ckey], f"{c}.{ckey}", f"{p}.{pkey}")
        self._usage_limit(fc, out)
        self._detector(fc, top_detector, out)
        self._program_aware(out)
        return out

    def _usage_limit(self, fc: dict[str, Any], out: dict[str, Any]) -> None:
        cpath = "flowControl.usageLimitPolicyPluginRef"
        ref = fc.get("usageLimitPolicyPluginRef")
        if not ref:
            return
        mine, plugin = self.use(ref, cpath, USAGE_LIMIT_TYPES)
        ul: dict[str, Any] = {}
        self.put(ul, "policy", mine, "flow_control.usage_limit.policy", cpath)
        pp = f"{plugin.path}.parameters"
        prm = plugin.params
        if mine == "static" and prm.get("threshold") is not None:
            self.put(
                ul,
                "threshold",
                prm["threshold"],
                "flow_control.usage_limit.threshold",
                f"{pp}.threshold",
            )
        if mine == "priority-holdback":
            shape = prm.get("shape")
            if shape is not None and shape != "linear":
                raise self.doc.err(f"{pp}.shape", f'{shape!r}: only "linear" is supported')
            domain = prm.get("domain")
            if domain is not None and domain not in ("rank", "value"):
                raise self.doc.err(f"{pp}.domain", f"{domain!r}: expected rank or value")
            for ckey, pkey in (
                ("minCeiling", "min_ceiling"),
                ("maxCeiling", "max_ceiling"),
                ("domain", "domain"),
            ):
                if prm.get(ckey) is not None:
                    self.put(
                        ul, pkey, prm[ckey], f"flow_control.usage_limit.{pkey}", f"{pp}.{ckey}"
                    )
            if prm.get("minCeiling") is None:
                raise self.doc.err(pp, "priority-holdback-policy needs minCeiling")
        out["usage_limit"] = ul

    def _detector(
        self, fc: dict[str, Any], top: dict[str, Any] | None, out: dict[str, Any]
    ) -> None:
        cpath = "flowControl.saturationDetector.pluginRef"
        sd = fc.get("saturationDetector")
        if sd is None and top is not None:
            sd, cpath = top, "saturationDetector.pluginRef"
            self.st.note(
                "saturationDetector",
                "deprecated at the top level (the router reads it as"
                " flowControl.saturationDetector): imported from there",
            )
        if sd is None:
            return
        ref = sd.get("pluginRef")
        if not ref:
            raise self.doc.err(cpath, "empty: name a saturation detector plugin")
        if ref not in self.plugins and ref != "utilization-detector":
            raise self.doc.err(cpath, f"references undefined plugin {ref!r}")
        mine, plugin = self.use(ref, cpath, DETECTOR_TYPES)
        sat: dict[str, Any] = {}
        p = "flow_control.saturation"
        self.put(sat, "detector", mine, f"{p}.detector", cpath)
        pp = f"{plugin.path}.parameters"
        keys = {
            "queueDepthThreshold": "queue_depth_threshold",
            "kvCacheUtilThreshold": "kv_cache_util_threshold",
            "metricsStalenessThreshold": "metrics_staleness_s",
            "headroom": "headroom",
            "concurrencyMode": "concurrency_mode",
            "maxConcurrency": "max_concurrency",
            "maxTokenConcurrency": "max_token_concurrency",
        }
        for ckey, v in plugin.params.items():
            if v is None:
                continue
            if ckey == "inFlightLoadProducerName":
                self.st.note(f"{pp}.{ckey}", "which in-flight load producer (harness has one)")
                continue
            if ckey == "concurrencyMode" and v not in ("requests", "tokens", "hybrid"):
                raise self.doc.err(f"{pp}.{ckey}", f"{v!r}: expected requests, tokens or hybrid")
            self.put(sat, keys[ckey], v, f"{p}.{keys[ckey]}", f"{pp}.{ckey}")
        out["saturation"] = sat

    def _program_aware(self, out: dict[str, Any]) -> None:
        found = self.used.get(FAIRNESS_TYPES["program-aware"])
        if found is None:
            return
        plugin = found[1]
        pp = f"{plugin.path}.parameters"
        pa: dict[str, Any] = {}
        for ckey, v in plugin.params.items():
            if ckey == "strategy":
                if v != "las":
                    raise self.doc.err(f"{pp}.strategy", f'{v!r}: only "las" is supported')
                continue
            if ckey in ("evictionTtlSeconds", "evictionSweepSeconds"):
                self.st.note(f"{pp}.{ckey}", "the plugin's metrics housekeeping, not admission")
                continue
            pkey = {
                "lasWeightService": "las_weight_service",
                "lasWeightHeadWait": "las_weight_head_wait",
                "lasHalfLifeSeconds": "las_half_life_s",
            }[ckey]
            self.put(pa, pkey, v, f"flow_control.program_aware.{pkey}", f"{pp}.{ckey}")
        if pa:
            out["program_aware"] = pa


def _gates(doc: _Doc, cfg: dict[str, Any], st: _State) -> None:
    on = False
    for i, gate in enumerate(cfg.get("featureGates") or []):
        name, _, value = gate.partition("=")
        if value not in ("", "true", "false"):
            raise doc.err(f"featureGates.{i}", f"{gate!r}: expected NAME, NAME=true or NAME=false")
        if name == FEATURE_GATE:
            on = value != "false"
    if not on:
        st.note(
            "featureGates",
            f"{FEATURE_GATE} is not enabled (it is off by default): the router ignores the"
            " flowControl block but its saturationDetector; imported as if it were on",
        )


def _unmodelled(cfg: dict[str, Any], st: _State) -> None:
    for key, what in (
        ("schedulingProfiles", "which endpoint serves a request, not admission"),
        ("dataLayer", "how the router scrapes the model servers, not admission"),
        ("requestHandler", "how requests are parsed, not admission"),
        ("parser", "how requests are parsed (deprecated), not admission"),
    ):
        if cfg.get(key) is not None:
            st.note(key, what)


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _objectives(docs: list[_Doc], st: _State) -> dict[str, tuple[int, _Doc]]:
    """Class name (the objective's metadata.name) -> (its priority, its document)."""
    out: dict[str, tuple[int, _Doc]] = {}
    pools: set[str] = set()
    for doc in docs:
        raw = _check(doc, _OBJECTIVE, doc.raw, "")
        if raw.get("apiVersion") not in OBJECTIVE_APIS:
            raise doc.err(
                "apiVersion",
                f"{raw.get('apiVersion')!r}: an InferenceObjective is"
                f" {' or '.join(OBJECTIVE_APIS)}",
            )
        meta = raw.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise doc.err("metadata.name", "missing or not a Kubernetes name: the class's name")
        if name in out:
            raise doc.err("metadata.name", f"a second InferenceObjective named {name!r}")
        spec = raw.get("spec") or {}
        pool = (spec.get("poolRef") or {}).get("name")
        if not pool:
            raise doc.err("spec.poolRef.name", "missing: the InferencePool the objective is for")
        pools.add(pool)
        priority = spec.get("priority")
        if priority is None:
            priority = 0  # the router reads an unset priority as 0
        elif not -_INT32 <= priority < _INT32:
            raise doc.err("spec.priority", "out of the int32 range")
        out[name] = (priority, doc)
    if len(pools) > 1:
        st.note(
            "spec.poolRef",
            f"objectives for {len(pools)} pools ({', '.join(sorted(pools))}): harness rehearses"
            " one pool, all classes in it",
        )
    return out


HEADER = """\
# Imported by `harness import epp` from {sources}
# ({followed}).
# flow_control and the classes (one per InferenceObjective, its priority) come from the config.
# PLACEHOLDERS to edit: duration_s, arrivals, the classes' weights and upstream are not in an
# EndpointPickerConfig; they are set so that the profile loads and `harness sim` runs it.
"""


def import_epp(config: str, objective_files: Sequence[str] = ()) -> Imported:
    """The profile for ``config`` (and the InferenceObjectives in it and in
    ``objective_files``); ProfileError (file, line, field) for a malformed input."""
    st = _State()
    cfg_docs: list[_Doc] = []
    obj_docs: list[_Doc] = []
    for i, file in enumerate([config, *objective_files]):
        for doc in read_documents(file):
            kind = doc.raw.get("kind")
            if kind == "EndpointPickerConfig" and i == 0:
                cfg_docs.append(doc)
            elif kind == "InferenceObjective":
                obj_docs.append(doc)
            else:
                wanted = (
                    "EndpointPickerConfig or InferenceObjective"
                    if i == 0
                    else ("InferenceObjective")
                )
                raise doc.err("kind", f"{kind!r}: expected {wanted}")
    if len(cfg_docs) != 1:
        where = cfg_docs[1] if cfg_docs else None
        if where is not None:
            raise where.err("kind", "a second EndpointPickerConfig: one config a pool")
        raise ProfileError(config, None, "kind", "no EndpointPickerConfig in the file")
    doc = cfg_docs[0]
    cfg = _check(doc, _CONFIG, doc.raw, "")
    api = cfg.get("apiVersion")
    if api == CONFIG_API_DEPRECATED:
        st.note("apiVersion", f"{api} is deprecated: the router reads it, and names {CONFIG_API}")
    elif api != CONFIG_API:
        raise doc.err("apiVersion", f"{api!r}: the router reads {CONFIG_API}")
    _gates(doc, cfg, st)
    _unmodelled(cfg, st)
    plugins = _plugins(doc, cfg, st)
    section = _Builder(doc, plugins, st).section(
        cfg.get("flowControl") or {}, cfg.get("saturationDetector")
    )
    objectives = _objectives(obj_docs, st)
    if objectives:
        section["objectives"] = {n: {"priority": pr} for n, (pr, _) in objectives.items()}
        for n, (_, odoc) in objectives.items():
            st.origin[f"flow_control.objectives.{n}"] = (
                odoc.file,
                odoc.line("spec.priority"),
                "spec.priority",
            )
    classes = {n: {"weight": 1} for n in objectives} or {"default": {"weight": 1}}
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(config).stem).strip("-") or "imported"
    body: dict[str, Any] = {
        "name": name,
        "duration_s": 120,
        "arrivals": {"process": "poisson", "phases": [{"until_s": 120, "rate_per_s": 10}]},
        "classes": classes,
        "upstream": {
            "latency": {"dist": "lognormal", "median_s": 2.0, "sigma": 0.5},
            "timeout_s": 120,
        },
        "flow_control": section,
    }
    sources = " ".join([config, *objective_files])
    text = HEADER.format(sources=sources, followed=FOLLOWED) + dump(body)
    try:
        prof = loads(text, file=f"<import of {config}>")
    except ProfileError as e:
        raise _back(e, st) from None
    return Imported(text, prof, tuple(st.notes))


def _back(e: ProfileError, st: _State) -> ProfileError:
    """A profile error on an imported value, said at the config's file, line and field."""
    path = e.field_path
    while path:
        found = st.origin.get(path)
        if found is not None:
            file, line, cpath = found
            return ProfileError(file, line, cpath, f"{e.message} (profile field {e.field_path})")
        path = path.rpartition(".")[0]
    return e


__all__ = ["Imported", "import_epp", "read_documents"]
