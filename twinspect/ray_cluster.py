"""Joining or starting a Ray cluster, written once for every capability that scales out on Ray.

``twinspect fuzz run --executor ray`` (actors per system under test) and ``twinspect clones
--executor ray`` (tasks per shard of files, query rows or candidate pairs) both connect here. Without
an address a local Ray instance is started on this machine (no dashboard, Ray's logs not forwarded)
and the caller shuts it down with :func:`shutdown` when it owns it; with an address (``"auto"``,
``"HOST:6379"`` or ``"ray://HOST:10001"``) an existing cluster is joined and left running. Ray is the
optional ``ray`` extra.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

from twinspect.errors import InputError

# no square brackets: the CLI prints errors with Rich markup, which would eat "[ray]"
INSTALL_HINT = "install twinspect's optional 'ray' extra, or pip install 'ray>=2.40,<3'"


def require_ray() -> Any:
    """Import Ray.

    Returns:
        The ``ray`` module.

    Raises:
        InputError: Ray is not installed or does not import.
    """
    if importlib.util.find_spec("ray") is None:
        raise InputError(f"executor 'ray' needs Ray, which is not installed: {INSTALL_HINT}")
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"executor 'ray' needs Ray, which does not import ({exc}): {INSTALL_HINT}") from exc
    return ray


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Fail fast on a ``HOST:PORT`` / ``ray://HOST:PORT`` address nothing listens on (Ray itself retries for minutes).

    Args:
        address: ``"auto"``, ``"local"``, ``"HOST:PORT"`` or ``"ray://HOST:PORT"``.
        timeout_s: how long a TCP connection may take to open, seconds.

    Raises:
        InputError: the address does not parse or no TCP connection opens within ``timeout_s`` seconds.
    """
    import socket

    hostport = address.split("://", 1)[1] if "://" in address else address
    if hostport == "auto" or hostport.startswith("local"):
        return  # resolved by Ray from this machine's running cluster
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"cannot parse Ray address {address!r}; use auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc}") from exc


def connect(address: str | None = None, *, num_cpus: int | None = None,
            object_store_memory: int | None = None) -> bool:
    """Join the Ray cluster at ``address``, or start a local instance when ``address`` is None.

    Nothing happens when Ray is already initialised in this process (the caller then does not own it).

    Args:
        address: cluster address (see the module doc); None starts a local instance.
        num_cpus: logical CPUs of a local instance (None: Ray counts the machine's cores).
        object_store_memory: object store size of a local instance, bytes (None: Ray's default).

    Returns:
        True when this call started or joined Ray (the caller should :func:`shutdown` it when done),
        False when Ray was already initialised.

    Raises:
        InputError: Ray is missing, the address does not parse or answer, or Ray fails to start or join.
    """
    ray = require_ray()
    if address:
        check_reachable(address)
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"log_to_driver": False, "logging_level": "ERROR", "configure_logging": True}
    try:
        with warnings.catch_warnings():  # Ray Client warns before it raises; the error says it all
            warnings.simplefilter("ignore")
            if address:
                ray.init(address=address, **kw)
            else:
                if object_store_memory is not None:
                    kw["object_store_memory"] = int(object_store_memory)
                ray.init(num_cpus=num_cpus, include_dashboard=False, **kw)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        where = f"join the Ray cluster at {address!r}" if address else "start a local Ray instance"
        raise InputError(f"cannot {where}: {type(exc).__name__}: {str(exc)[:300]}") from exc
    return True


def shutdown() -> None:
    """Shut down this process's Ray connection (a local instance stops; a joined cluster keeps running)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
