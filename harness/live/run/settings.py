"""The settings of one live run (``harness run``): frozen, keyword-only, validated once.

Built at the command line's edge (``from_options``), like httpx's ``Timeout``/``Limits`` and
the profile itself, then passed down unchanged: nothing later patches them. A bad setting is a
``ValueError`` -- ``SettingsError``, ``BadTarget`` or ``TlsError`` -- which the caller turns into
exit code 2. What the run learns while it runs (the children's ports) is returned as values,
not written back here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.live.transport.target import endpoint, public
from harness.live.transport.tls import Tls
from harness.profile import Profile

STUB_MODEL = "harness-stub"
CHAT = "/v1/chat/completions"


class SettingsError(ValueError):
    """A live run's setting that cannot be used (bad input: exit 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveSettings:
    """One live run's settings. ``profile`` already carries ``--api-key-env`` (as its
    ``wire.auth.env``); ``seed`` is the run's (the profile's unless ``--seed`` is given)."""

    profile: Profile
    spec: str  # the profile as named on the command line, for the summary
    overrides: tuple[str, ...] = ()
    seed: int
    time_scale: float = 1.0
    out: Path
    target: str = "stub"  # or the base URL of an OpenAI-compatible endpoint
    proxied: bool = True
    model: str | None = None  # required with a URL target
    workers: int = 0
    remote_workers: int = 0
    master_port: int = 5557
    public_host: str | None = None
    max_requests: int | None = None
    extra_thresholds: tuple[str, ...] = ()
    tls: Tls = field(default_factory=Tls)
    # engine.scaling.source: prometheus: "auto" (start one) or the URL of one that scrapes
    # the proxy on ``proxy_port`` (0: any free port, for "auto")
    prometheus: str | None = None
    proxy_port: int = 0

    def __post_init__(self) -> None:
        t = self.profile.arrivals.trace
        closed = t is not None and t.sessions is not None and t.sessions.replay == "closed_loop"
        if closed and self.max_requests is not None:
            # which records a closed-loop replay offers depends on when the others ended:
            # the first N of them are not known before the run
            raise SettingsError(
                "--max-requests cannot cut a session trace replayed closed-loop "
                "(arrivals.trace.sessions.replay: closed_loop): shorten duration_s instead "
                "(--set duration_s=S)"
            )
        if not self.time_scale > 0:
            raise SettingsError("--time-scale must be > 0")
        if (
            self.workers < 0
            or self.remote_workers < 0
            or (self.max_requests is not None and self.max_requests < 1)
        ):
            raise SettingsError("--workers must be >= 0 and --max-requests >= 1")
        if not self.stub and self.time_scale != 1.0:
            # The stub and the sim scale their own latencies; a real endpoint answers in its
            # own time, so dividing what we measure by F would invent latencies.
            raise SettingsError(
                f"--time-scale {self.time_scale:g} cannot be used with --target "
                "URL: a real endpoint's latency cannot be scaled (measured times "
                "would be divided by the scale); it applies to the stub and to "
                "`harness sim`"
            )
        if not self.stub:
            endpoint(self.target)  # raises BadTarget
        if self.model is None and not self.stub:
            raise SettingsError("--model is required with --target URL")
        if self.prometheus is not None:
            sc = self.profile.engine.scaling
            if not (sc.enabled and sc.source == "prometheus" and self.proxied):
                raise SettingsError(
                    "--prometheus is for a run through the proxy whose profile "
                    "sets engine.scaling.source: prometheus (--set "
                    "engine.scaling.source=prometheus), with scaling enabled"
                )
            if self.prometheus != "auto":
                endpoint(self.prometheus)  # raises BadTarget
                if not self.proxy_port:
                    raise SettingsError(
                        "--prometheus URL needs --proxy-port N: the port that "
                        "Prometheus scrapes the proxy's /metrics on"
                    )
        if self.remote_workers and self.stub and not self.proxied:
            raise SettingsError("workers on other machines need the proxy or a --target URL")

    @classmethod
    def from_options(
        cls,
        *,
        profile_spec: str,
        profile: Profile,
        out: Path,
        overrides: Sequence[str] = (),
        target: str = "stub",
        no_proxy: bool = False,
        time_scale: float = 1.0,
        seed: int | None = None,
        workers: int = 0,
        api_key_env: str | None = None,
        model: str | None = None,
        max_requests: int | None = None,
        extra_thresholds: tuple[str, ...] = (),
        remote_workers: int = 0,
        master_port: int = 5557,
        public_host: str | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
        prometheus: str | None = None,
        proxy_port: int = 0,
    ) -> LiveSettings:
        """From ``harness run``'s options: ``api_key_env`` overrides ``wire.auth.env``; TLS is
        verified unless ``insecure``, against ``ca_bundle`` when given. Raises ``TlsError``,
        ``SettingsError`` or ``BadTarget`` (all ``ValueError``: exit 2)."""
        tls = Tls(ca_bundle=ca_bundle, insecure=insecure).validated()
        if api_key_env is not None:
            auth = dataclasses.replace(profile.wire.auth, env=api_key_env)
            profile = dataclasses.replace(
                profile, wire=dataclasses.replace(profile.wire, auth=auth)
            )
        sc = profile.engine.scaling
        if prometheus is None and sc.enabled and sc.source == "prometheus" and not no_proxy:
            prometheus = "auto"  # the profile reads its signal through one: start it
        return cls(
            profile=profile,
            spec=profile_spec,
            overrides=tuple(overrides),
            seed=profile.seed if seed is None else seed,
            time_scale=time_scale,
            out=out.resolve(),
            target=target,
            proxied=not no_proxy,
            model=model,
            workers=workers,
            remote_workers=remote_workers,
            master_port=master_port,
            public_host=public_host,
            max_requests=max_requests,
            extra_thresholds=extra_thresholds,
            tls=tls,
            prometheus=prometheus,
            proxy_port=proxy_port,
        )

    @property
    def stub(self) -> bool:
        """The run starts the bundled stub (rather than sending to a real endpoint)."""
        return self.target == "stub"

    @property
    def model_name(self) -> str:
        return self.model or STUB_MODEL

    @property
    def key_env(self) -> str | None:
        """The environment variable the load generator reads the API key from (stub: none)."""
        return None if self.stub else self.profile.wire.auth.env

    @property
    def direct(self) -> tuple[str, str]:
        """(base URL, path) a request goes to without the proxy (the stub's base is only
        known once it listens)."""
        return ("", CHAT) if self.stub else endpoint(self.target)

    @property
    def where(self) -> str:
        """Where the load goes, for humans."""
        where = "the bundled stub" if self.stub else public(self.target)
        return where + ("" if not self.proxied else " via the proxy")
