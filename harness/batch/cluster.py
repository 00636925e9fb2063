"""Run a sweep's or a tune's simulations on an existing Dask cluster (``--cluster ADDRESS``).

The engine runs as it is; Dask schedules. What goes to the workers is data, never a path: the
profile and its traces travel once per run as a task of their own (so Dask can recompute it
if the worker holding it dies), and each chunk of simulations depends on it. Each chunk also
carries the client's harness version, and a worker with another version refuses it.

Worker death costs nothing: Dask re-runs the chunks the dead worker held on the others, and
results are collected by index, so the outcome is the same as the local pool's. A stop
cancels every chunk not yet collected: nothing is left running on the cluster for this run.

Every failure is one line and an exit code (docs/cluster.md, "When it fails"): the address is
checked before the results folder is made (exit 2); connecting, the handshake and every call
before the first simulation are bounded in time and give way to a stop signal (exit 3, nothing
written); a cluster lost mid-run ends the round like a stop, so the caller writes what
finished (:attr:`ClusterPool.failure` says why). Workers that cannot run this harness (not
installed, another version) are left out with a warning when others can serve.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN
from harness.profile import ProfileError
from harness.profile.bundle import TRACE_KEY, ProfileBundle, make_bundle

T = TypeVar("T")
R = TypeVar("R")

INSTALL_HINT = "--cluster needs Dask: pip install 'harness[cluster]' (dask[distributed])"
CONNECT_TIMEOUT_S = 10.0  # HARNESS_CLUSTER_TIMEOUT_S overrides it (a slow network or VPN)
WATCH_EVERY_S = 1.0  # how often a run restricted to some workers checks they are still there
QUIET = logging.CRITICAL + 10  # distributed's own log lines, while a pool is open
QUIET_LOGGERS = ("distributed", "tornado", "tornado.application")


def connect_timeout_s() -> float:
    """How long to wait for the scheduler, its answer, and a first worker."""
    import os

    text = os.environ.get("HARNESS_CLUSTER_TIMEOUT_S", "")
    try:
        value = float(text) if text else CONNECT_TIMEOUT_S
    except ValueError:
        return CONNECT_TIMEOUT_S
    return value if value > 0 else CONNECT_TIMEOUT_S


class ClusterError(Exception):
    """A cluster that cannot serve the run; ``code`` is the exit code (2: the extra is not
    installed, a malformed address, a bad profile or trace to ship; 3: unreachable, not a
    scheduler, no worker that can run harness, lost mid-run, or stopped while connecting)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Stopped(ClusterError):
    """A stop signal arrived before the cluster took any work (exit 3, nothing ran)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_BROKEN, message)


class VersionMismatch(RuntimeError):
    """Raised on a worker whose harness version is not the client's."""


def install_text(version: str) -> str:
    return f"pip install 'harness[cluster]=={version}'"


def _identity(x: T) -> T:  # pragma: no cover - runs on a worker
    return x


def _harness_version() -> str:  # pragma: no cover - runs on a worker
    import harness

    return harness.__version__


def _fitness_check() -> Callable[[], tuple[str, str]]:
    """What each worker runs before any work: (its harness version or "", its Python or the
    import error). A nested function, so Dask ships its code by value and a worker without
    harness can run it (one named by reference would fail to unpickle there)."""

    def fitness() -> tuple[str, str]:  # pragma: no cover - runs on a worker
        import sys

        try:
            import harness
        except ImportError as e:
            return "", str(e)
        return str(harness.__version__), f"{sys.version_info[0]}.{sys.version_info[1]}"

    return fitness


def _located(
    fn: Callable[[ProfileBundle, T], R], bundle: ProfileBundle, chunk: T, version: str
) -> tuple[str, R]:  # pragma: no cover - runs on a worker
    """``fn(bundle, chunk)`` on a worker of the same harness version, with the worker's
    address (for "what runs where")."""
    mine = _harness_version()
    if mine != version:
        raise VersionMismatch(f"this worker runs harness {mine}; the client runs {version}")
    return _dask().get_worker().address, fn(bundle, chunk)


def _dask(module: str = "distributed") -> Any:
    """``distributed`` (or one of its modules), untyped: the client's calls go through Any."""
    import importlib

    return importlib.import_module(module)


def available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def address_problem(address: str) -> str | None:
    """Why ``address`` is not a scheduler address Dask can dial (bad input: exit 2), or None.
    Needs the extra (see :func:`available`)."""
    from distributed.comm.addressing import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    expected = "expected tcp://HOST:PORT (the scheduler's port, 8786 by default)"
    try:
        scheme, _loc = parse_address(address)
        get_backend(scheme)
        if scheme not in ("tcp", "tls", "ws", "wss"):
            return None
        host, port = get_address_host_port(address)
    except (ValueError, TypeError) as e:
        return f"--cluster {address}: {_one_line(e)}; {expected}"
    if not host or not 0 < port < 65536:
        return f"--cluster {address}: no host or no valid port; {expected}"
    return None


def bundle_for(
    profile: str, overrides: Sequence[str], params: Iterable[tuple[str, Sequence[Any]]]
) -> ProfileBundle:
    """The bundle a cluster run ships: the profile, its trace, and one trace per value a
    parameter gives ``arrivals.file``. A profile or trace that cannot be read: exit 2."""
    values = [str(v) for path, choices in params if path == TRACE_KEY for v in choices]
    try:
        return make_bundle(profile, overrides, values)
    except ProfileError as e:
        raise ClusterError(EXIT_BAD_INPUT, str(e)) from None


class ClusterPool:
    """A Dask client to ``address`` with one profile bundle on it; :meth:`run` has
    :class:`~harness.batch.pool.WorkerPool`'s contract, with ``fn(bundle, chunk)``.
    ``stop`` is polled while connecting: a stop signal there raises :class:`Stopped`."""

    def __init__(
        self,
        address: str,
        bundle: ProfileBundle,
        *,
        timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        if not available():
            raise ClusterError(EXIT_BAD_INPUT, INSTALL_HINT)
        problem = address_problem(address)
        if problem is not None:
            raise ClusterError(EXIT_BAD_INPUT, problem)
        import harness

        self.address = address
        self.version = harness.__version__
        self.timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
        self.ran: Counter[str] = Counter()  # worker address -> simulations run there
        self.left_out: dict[str, str] = {}  # worker address -> why it cannot run harness
        self.failure: ClusterError | None = None  # why the last round ended early, if it did
        self.workers: list[str] = []
        self._only: list[str] | None = None  # the workers tasks may run on, when restricted
        self._threads: dict[str, int] = {}  # worker address -> threads, when last asked
        self._stop = stop
        self._client: Any = None
        self._levels = _quiet()
        try:
            _probe(address, self.timeout_s, stop)
            self._client = self._call(self._connect, "connecting to the scheduler")
            fit = self._fit_workers()
            if self.left_out:
                self._only = fit
            self.workers = fit
            self._bundle = self._client.submit(
                _identity,
                bundle,
                pure=False,
                key=f"harness-profile-{bundle.key[:16]}",
                **self._where(),
            )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], R], what: str) -> R:
        """``fn()`` before any work: bounded by the timeout, and a stop ends the wait."""
        return _bounded(fn, self.timeout_s, self._stop, f"{what} at {self.address}")

    def _connect(self) -> Any:
        client = _dask().Client.__new__(_dask().Client)
        try:
            client.__init__(self.address, timeout=self.timeout_s, set_as_default=False)
        except BaseException:
            _drop(client)
            raise
        return client

    def _fit_workers(self) -> list[str]:
        """Wait for a first worker, run the check on each; the ones that can run this
        harness, sorted (ClusterError when none can)."""
        deadline = time.monotonic() + self.timeout_s
        while not self._call(self._worker_names, "asking for workers"):
            if self._stop is not None and self._stop():
                raise Stopped(f"stopped while waiting for workers at {self.address}: nothing ran")
            if time.monotonic() > deadline:
                raise ClusterError(
                    EXIT_BROKEN,
                    f"the cluster at {self.address} has no workers (none joined in "
                    f"{self.timeout_s:g} s): start workers with {install_text(self.version)} "
                    "installed, or wait longer with HARNESS_CLUSTER_TIMEOUT_S=30",
                )
            time.sleep(0.1)
        check = _fitness_check()
        found: dict[str, Any] = self._call(
            lambda: self._client.run(check, on_error="return"), "checking the workers"
        )
        fit: list[str] = []
        for worker, got in sorted(found.items()):
            why = self._unfit(got)
            if why is None:
                fit.append(worker)
            else:
                self.left_out[worker] = why
        if not fit:
            worker, why = next(iter(self.left_out.items()))
            more = len(self.left_out) - 1
            others = f" (and {more} other worker{'s' if more != 1 else ''})" if more else ""
            raise ClusterError(
                EXIT_BROKEN,
                f"worker {worker}{others} {why}: {install_text(self.version)} on every worker "
                "(the same harness as here)",
            )
        return fit

    def _unfit(self, got: Any) -> str | None:
        """Why a worker's answer to the check rules it out, or None."""
        if isinstance(got, BaseException):
            return f"cannot run harness's check ({_one_line(got)}; the same Python is needed)"
        version, detail = got
        if not version:
            return f"has no harness ({detail})"
        if version != self.version:
            return f"runs harness {version}, this client runs harness {self.version}"
        return None

    def _worker_names(self) -> list[str]:
        workers = self._client.scheduler_info().get("workers", {})
        self._threads = {w: int(info.get("nthreads", 1)) for w, info in workers.items()}
        return sorted(workers)

    def _where(self) -> dict[str, Any]:
        """submit()'s restriction to the workers that passed the check, when some did not."""
        if self._only is None:
            return {}
        return {"workers": list(self._only), "allow_other_workers": False}

    @property
    def slots(self) -> int:
        """Worker threads of the workers the run may use, as they were when it connected (a
        chunk-size hint; never changes results. No call: a lost scheduler cannot stall it)."""
        return max(1, sum(n for w, n in self._threads.items() if w in self.workers))

    def _serving(self) -> bool:
        """The client is connected (not reconnecting to a lost scheduler, not closed)."""
        return self._client is not None and getattr(self._client, "status", "") == "running"

    def close(self) -> None:
        client, self._client = self._client, None
        try:
            if client is not None and getattr(client, "status", "") != "running":
                _drop(client)  # reconnecting to a lost scheduler: nothing to tell it
            elif client is not None:
                try:
                    client.close(timeout=min(self.timeout_s, 5.0))
                except Exception:  # the scheduler went away meanwhile
                    _drop(client)
        finally:
            if self._levels:
                _restore(self._levels)
                self._levels = {}

    def run(
        self,
        fn: Callable[[ProfileBundle, T], list[Any]],
        chunks: Sequence[T],
        collect: Callable[[T, list[Any]], None],
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """One round: ``collect(chunk, fn(bundle, chunk))`` as chunks finish, in any order;
        False on a stop, or when the cluster fails the run (then :attr:`failure` says why:
        what was collected stays collected, as after a stop). Every chunk not yet collected
        is cancelled on the cluster."""
        if self._client is None:
            raise RuntimeError("the cluster pool is closed")
        if self.failure is not None:
            return False
        client = self._client
        futures: dict[Any, T] = {}
        finished = False
        try:
            for c in chunks:
                fut = client.submit(
                    _located, fn, self._bundle, c, self.version, pure=False, **self._where()
                )
                futures[fut] = c
            pending = set(futures)
            seq = _dask().as_completed(futures, loop=client.loop, with_results=False)
            watched = time.monotonic()
            while pending:
                if stop is not None and stop():
                    return False
                if not self._serving():  # Dask cancels every future of a lost connection
                    raise self._lost()
                batch = seq.next_batch(block=False) or _wait_one(seq)
                for fut in batch:
                    if fut not in pending:
                        continue
                    pending.discard(fut)
                    where, out = fut.result()
                    self.ran[where] += len(out)
                    collect(futures[fut], out)
                due = time.monotonic() - watched >= WATCH_EVERY_S
                if not batch and self._only is not None and due:
                    watched = time.monotonic()
                    self._check_serving(stop)
            finished = True
            return True
        except Stopped:
            return False
        except ClusterError as e:
            self.failure = e
            return False
        except Exception as e:
            failure = self._failure(e)
            if failure is None:
                raise  # the simulation's own error, as the local pool raises it
            self.failure = failure
            return False
        finally:
            if not finished and futures and self._serving():
                with contextlib.suppress(Exception):  # a lost scheduler has nothing to cancel
                    _bounded(
                        lambda: client.cancel(list(futures), force=True),
                        min(self.timeout_s, 5.0),
                        None,
                        "cancelling",
                    )

    def _lost(self) -> ClusterError:
        return ClusterError(
            EXIT_BROKEN,
            f"lost the connection to the scheduler at {self.address} mid-run: check that it "
            "runs (restart it) and run again",
        )

    def _check_serving(self, stop: Callable[[], bool] | None) -> None:
        """A run restricted to some workers fails once none of them is left (Dask would
        wait for them forever: the others cannot run harness)."""
        if not self._serving():
            return  # a lost scheduler: its futures are cancelled, and say so
        names = _bounded(self._worker_names, self.timeout_s, stop, "asking for workers")
        if set(names) & set(self._only or ()):
            return
        raise ClusterError(
            EXIT_BROKEN,
            f"every worker at {self.address} that can run harness {self.version} left (the "
            f"others lack it): restart them, or {install_text(self.version)} on the others",
        )

    def _failure(self, e: Exception) -> ClusterError | None:
        """The cluster's failure behind ``e``, or None when ``e`` is the simulation's own."""
        text = _one_line(e)
        if isinstance(e, VersionMismatch) or "VersionMismatch" in type(e).__name__:
            return ClusterError(
                EXIT_BROKEN,
                f"a worker of {self.address} refused the work: {text}: "
                f"{install_text(self.version)} on every worker",
            )
        if "No module named 'harness" in text:
            return ClusterError(
                EXIT_BROKEN,
                f"a worker without harness joined the cluster at {self.address} mid-run "
                f"({text}): {install_text(self.version)} there, or stop that worker",
            )
        if type(e).__module__.split(".")[0] != "distributed":
            return None
        lost = "scheduler-connection-lost" in text or "Cancelled" in type(e).__name__
        if lost or not self._serving():
            return self._lost()
        return ClusterError(
            EXIT_BROKEN,
            f"the cluster at {self.address} failed the run ({text}): check its workers "
            "(a task that kills workers repeatedly is given up) and run again",
        )


def _probe(address: str, timeout_s: float, stop: Callable[[], bool] | None) -> None:
    """Connect, handshake and ask the peer who it is, each bounded by ``timeout_s``, before
    any client is made: a port where another service listens (the dashboard, any HTTP
    server) ends in one line instead of a hang or an allocation of what it sent as a size."""
    import asyncio

    async def ask() -> Any:
        connect = _dask("distributed.comm").connect
        send_recv = _dask("distributed.core").send_recv
        args = _dask("distributed.security").Security().get_connection_args("client")
        try:
            comm = await asyncio.wait_for(
                connect(address, timeout=timeout_s, **args), timeout_s + 1.0
            )
        except TimeoutError:  # connected, but the peer's handshake never came
            raise _not_a_scheduler(address, None, timeout_s) from None
        except OSError as e:
            if not str(e).startswith("Timed out trying to connect"):
                raise _not_a_scheduler(address, e) from None  # closed mid-handshake
            raise ClusterError(
                EXIT_BROKEN,
                f"cannot reach the cluster at {address}: {_one_line(e)}: check that the "
                "scheduler runs there (port 8786 by default), or wait longer with "
                "HARNESS_CLUSTER_TIMEOUT_S=30",
            ) from None
        except Exception as e:  # the peer's handshake: bytes that are not Dask's
            raise _not_a_scheduler(address, e) from None
        try:
            return await asyncio.wait_for(send_recv(comm, op="identity"), timeout_s)
        except TimeoutError:
            raise _not_a_scheduler(address, None, timeout_s) from None
        except Exception as e:
            raise _not_a_scheduler(address, e) from None
        finally:
            comm.abort()

    def run() -> Any:
        return asyncio.run(ask())

    # connect retries for up to timeout_s, then the handshake and the question get as long
    me = _bounded(run, 2 * timeout_s + 2.0, stop, f"connecting to {address}", no_answer=True)
    kind = me.get("type") if isinstance(me, dict) else None
    if kind == "Scheduler":
        return
    if kind in ("Worker", "Nanny"):
        raise ClusterError(
            EXIT_BROKEN,
            f"{address} is a Dask {kind.lower()}, not the scheduler: give the scheduler's "
            "address (port 8786 by default)",
        )
    raise _not_a_scheduler(address, None)


def _not_a_scheduler(
    address: str, e: BaseException | None, silent_s: float | None = None
) -> ClusterError:
    if silent_s is not None:
        what = f"accepted the connection but did not answer as Dask does in {silent_s:g} s"
    elif e is None or isinstance(e, MemoryError):  # what it sent, read as a frame's size
        what = "answered with something other than Dask's protocol"
    else:
        what = f"did not complete Dask's handshake ({_one_line(e)})"
    return ClusterError(
        EXIT_BROKEN,
        f"{address} is not a Dask scheduler: it {what}; give the scheduler's address (port "
        "8786 by default; 8787 is its dashboard)",
    )


def _bounded(
    fn: Callable[[], R],
    timeout_s: float,
    stop: Callable[[], bool] | None,
    what: str,
    *,
    no_answer: bool = False,
) -> R:
    """``fn()`` on a daemon thread, waited for at most ``timeout_s`` and only while ``stop``
    is False, so neither a silent peer nor a stop signal leaves the command hanging (an
    abandoned call ends with the process). Exceptions pass through."""
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except BaseException as e:  # handed to the caller's thread
            box.append((False, e))

    t = threading.Thread(target=target, name="harness-cluster-call", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while t.is_alive():
        t.join(0.1)
        if not t.is_alive():
            break
        if stop is not None and stop():
            raise Stopped(f"stopped while {what}: nothing ran")
        if time.monotonic() > deadline:
            hint = "; is it a Dask scheduler?" if no_answer else ""
            raise ClusterError(EXIT_BROKEN, f"no answer in {timeout_s:g} s {what}{hint}")
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _drop(client: Any) -> None:
    """Forget a client that failed or whose scheduler is gone, at once: without this its
    ``__del__`` would wait twice the timeout to close a connection that is not there."""
    try:
        client.status = "closed"
        runner = getattr(client, "_loop_runner", None)
        if runner is not None:
            runner.stop()
    except Exception:
        pass


def _quiet() -> dict[str, int]:
    """Silence distributed's own log lines (a lost scheduler logs tracebacks from its
    background tasks); the one line harness prints says what happened. Returns the levels
    to restore."""
    names = [
        n
        for n in (*QUIET_LOGGERS, *logging.root.manager.loggerDict)
        if n.split(".")[0] in ("distributed", "tornado")
    ]
    old: dict[str, int] = {}
    for name in dict.fromkeys(names):
        logger = logging.getLogger(name)
        old[name] = logger.level
        logger.setLevel(QUIET)
    return old


def _restore(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _wait_one(seq: Any) -> list[Any]:
    """Block up to 0.2 s for the next finished future (so a stop is seen promptly)."""
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        got = seq.next_batch(block=False)
        if got:
            return list(got)
        time.sleep(0.01)
    return []


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0].rstrip(".") if text else type(e).__name__


def cluster_text(pool: ClusterPool) -> str:
    """Where the run goes: one line, and a second, a warning, when workers were left out."""
    n = len(pool.workers)
    text = (
        f"cluster {pool.address}: {n} worker{'s' if n != 1 else ''} "
        f"({', '.join(pool.workers)}), harness {pool.version} on each"
    )
    if pool.left_out:
        k = len(pool.left_out)
        why = "; ".join(f"{w} {reason}" for w, reason in sorted(pool.left_out.items()))
        text += (
            f"\nwarning: left out {k} worker{'s' if k != 1 else ''} that cannot run this "
            f"harness: {why}; {install_text(pool.version)} there to use "
            f"{'them' if k != 1 else 'it'}"
        )
    return text


def failure_text(pool: ClusterPool | None) -> str | None:
    """The one line saying why a cluster run ended early, or None."""
    return None if pool is None or pool.failure is None else str(pool.failure)


def where_text(pool: ClusterPool) -> str:
    """Simulations finished so far, by worker (a worker that joined later shows up here)."""
    ran = ", ".join(f"{w.split('://', 1)[-1]} {n}" for w, n in sorted(pool.ran.items()))
    return f"{len(pool.ran)} workers ({ran})" if ran else pool.address


def cluster_meta(address: str, pool: ClusterPool) -> dict[str, Any]:
    """``meta.cluster``: the address, simulations by worker, and, when there were any, the
    workers left out and why the run ended early."""
    meta: dict[str, Any] = {
        "address": address,
        "simulations_by_worker": dict(sorted(pool.ran.items())),
    }
    if pool.left_out:
        meta["left_out"] = dict(sorted(pool.left_out.items()))
    failed = failure_text(pool)
    if failed is not None:
        meta["failed"] = failed
    return meta
