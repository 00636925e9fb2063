"""Run a sweep's or a tune's simulations on an existing Dask cluster (``--cluster ADDRESS``).

The engine runs as it is; Dask schedules. What goes to the workers is data, never a path: the
profile and its trace travel once per run as a task of their own (so Dask can recompute it
if the worker holding it dies), and each chunk of simulations depends on it. Each chunk also
carries the client's harness version, and a worker with another version refuses it.

Worker death costs nothing: Dask re-runs the chunks the dead worker held on the others, and
results are collected by index, so the outcome is the same as the local pool's. A stop
cancels every chunk not yet collected: nothing is left running on the cluster for this run.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from harness.exit_codes import EXIT_BAD_INPUT, EXIT_BROKEN
from harness.profile.bundle import ProfileBundle

T = TypeVar("T")
R = TypeVar("R")

INSTALL_HINT = "--cluster needs Dask: pip install 'harness[cluster]' (dask[distributed])"
CONNECT_TIMEOUT_S = 10.0  # HARNESS_CLUSTER_TIMEOUT_S overrides it (a slow network or VPN)


def connect_timeout_s() -> float:
    """How long to wait for the scheduler and for a first worker."""
    import os

    text = os.environ.get("HARNESS_CLUSTER_TIMEOUT_S", "")
    try:
        value = float(text) if text else CONNECT_TIMEOUT_S
    except ValueError:
        return CONNECT_TIMEOUT_S
    return value if value > 0 else CONNECT_TIMEOUT_S


class ClusterError(Exception):
    """A cluster that cannot serve the run; ``code`` is the exit code (2: the extra is not
    installed, 3: unreachable, no workers, or a worker with another harness version)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class VersionMismatch(RuntimeError):
    """Raised on a worker whose harness version is not the client's."""


def _identity(x: T) -> T:  # pragma: no cover - runs on a worker
    return x


def _harness_version() -> str:  # pragma: no cover - runs on a worker
    import harness

    return harness.__version__


def _located(
    fn: Callable[[ProfileBundle, T], R], bundle: ProfileBundle, chunk: T, version: str
) -> tuple[str, R]:  # pragma: no cover - runs on a worker
    """``fn(bundle, chunk)`` on a worker of the same harness version, with the worker's
    address (for "what runs where")."""
    mine = _harness_version()
    if mine != version:
        raise VersionMismatch(f"this worker runs harness {mine}; the client runs {version}")
    return _dask().get_worker().address, fn(bundle, chunk)


def _dask() -> Any:
    """``distributed``, untyped: the client's calls go through Any."""
    import importlib

    return importlib.import_module("distributed")


def available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


class ClusterPool:
    """A Dask client to ``address`` with one profile bundle on it; :meth:`run` has
    :class:`~harness.commands.pool.WorkerPool`'s contract, with ``fn(bundle, chunk)``."""

    def __init__(
        self,
        address: str,
        bundle: ProfileBundle,
        *,
        timeout_s: float | None = None,
    ) -> None:
        if not available():
            raise ClusterError(EXIT_BAD_INPUT, INSTALL_HINT)
        import harness

        for name in ("distributed", "distributed.client", "distributed.worker"):
            logging.getLogger(name).setLevel(logging.ERROR)
        if timeout_s is None:
            timeout_s = connect_timeout_s()
        self.address = address
        self.version = harness.__version__
        self.ran: Counter[str] = Counter()  # worker address -> simulations run there
        try:
            self._client: Any = _dask().Client(address, timeout=timeout_s, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise ClusterError(
                EXIT_BROKEN, f"cannot reach the cluster at {address}: {_one_line(e)}"
            ) from None
        try:
            try:
                self._client.wait_for_workers(1, timeout=timeout_s)
            except (OSError, TimeoutError) as e:
                raise ClusterError(
                    EXIT_BROKEN, f"the cluster at {address} has no workers ({_one_line(e)})"
                ) from None
            versions: dict[str, str] = self._client.run(_harness_version)
            other = {w: v for w, v in sorted(versions.items()) if v != self.version}
            if other:
                w, v = next(iter(other.items()))
                raise ClusterError(
                    EXIT_BROKEN,
                    f"worker {w} runs harness {v}, this client runs harness {self.version}: "
                    "install the same version on every worker",
                )
            self.workers = sorted(versions)
            self._bundle = self._client.submit(
                _identity, bundle, pure=False, key=f"harness-profile-{bundle.key[:16]}"
            )
        except BaseException:
            self._client.close()
            raise

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def slots(self) -> int:
        """Worker threads in the cluster now (a chunk-size hint; never changes results)."""
        info = self._client.scheduler_info()
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(
        self,
        fn: Callable[[ProfileBundle, T], list[Any]],
        chunks: Sequence[T],
        collect: Callable[[T, list[Any]], None],
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """One round: ``collect(chunk, fn(bundle, chunk))`` as chunks finish, in any order;
        False on a stop (every chunk not yet collected is cancelled on the cluster)."""
        if self._client is None:
            raise RuntimeError("the cluster pool is closed")
        client = self._client
        futures = {
            client.submit(_located, fn, self._bundle, c, self.version, pure=False): c
            for c in chunks
        }
        finished = False
        try:
            pending = set(futures)
            seq = _dask().as_completed(futures, loop=client.loop, with_results=False)
            while pending:
                if stop is not None and stop():
                    return False
                batch = seq.next_batch(block=False) or _wait_one(seq)
                for fut in batch:
                    if fut not in pending:
                        continue
                    pending.discard(fut)
                    where, out = fut.result()
                    self.ran[where] += len(out)
                    collect(futures[fut], out)
            finished = True
            return True
        except VersionMismatch as e:
            raise ClusterError(EXIT_BROKEN, f"{self.address}: {e}") from None
        except Exception as e:
            if type(e).__module__.split(".")[0] != "distributed":
                raise  # the simulation's own error, as the local pool raises it
            raise ClusterError(
                EXIT_BROKEN, f"the cluster at {self.address} failed the run: {_one_line(e)}"
            ) from None
        finally:
            if not finished:
                client.cancel(list(futures), force=True)


def _wait_one(seq: Any) -> list[Any]:
    """Block up to 0.2 s for the next finished future (so a stop is seen promptly)."""
    import time

    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        got = seq.next_batch(block=False)
        if got:
            return list(got)
        time.sleep(0.01)
    return []


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def cluster_text(pool: ClusterPool) -> str:
    """One line: where the run goes."""
    n = len(pool.workers)
    return (
        f"cluster {pool.address}: {n} worker{'s' if n != 1 else ''} "
        f"({', '.join(pool.workers)}), harness {pool.version} on each"
    )


def where_text(pool: ClusterPool) -> str:
    """Simulations finished so far, by worker (a worker that joined later shows up here)."""
    ran = ", ".join(f"{w.split('://', 1)[-1]} {n}" for w, n in sorted(pool.ran.items()))
    return f"{len(pool.ran)} workers ({ran})" if ran else pool.address
