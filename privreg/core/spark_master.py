"""A Spark master URL checked before Spark starts.

Spark takes seconds to minutes to report a master it cannot use (7 s for ``bogus``, 74 s
for an address where nothing listens), and then as a Java exception. :func:`check_master`
accepts the forms Spark documents -- ``local``, ``local[N]``, ``local[*]``,
``local[N,F]``, ``spark://HOST:PORT[,HOST:PORT...]``, ``yarn``, ``k8s://URL`` -- and for
the forms naming an address, connects to it first (at most :data:`PROBE_SECONDS` each), so
a malformed or unreachable master is refused in one line naming the parameter.
"""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

from privreg.core.errors import PrivregValueError

__all__ = ["PROBE_SECONDS", "check_master"]

#: How long to wait for a standalone or Kubernetes master to accept a connection.
PROBE_SECONDS = 5.0

_LOCAL = re.compile(r"local(?:\[(?:\*|[1-9][0-9]{0,3})(?:,[0-9]{1,3})?\])?", re.ASCII)
_FORMS = "local, local[N], local[*], spark://HOST:PORT, yarn or k8s://https://HOST:PORT"


def _address(text: str, name: str, master: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise PrivregValueError(f"{name} must be one of {_FORMS} (a port in 1..65535); got {master!r}")
    return host, int(port)


def _reachable(host: str, port: int, seconds: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=seconds):
            return True
    except OSError:  # refused, unreachable, no such host, timed out
        return False


def check_master(master: object, name: str = "parameter spark_master", *, probe_seconds: float = PROBE_SECONDS) -> str:
    """``master`` if Spark can use it: a known form and, for ``spark://`` and ``k8s://``,
    an address that accepts a connection; else a one-line error naming ``name``."""
    if not isinstance(master, str) or not master.strip():
        raise PrivregValueError(f"{name} must be one of {_FORMS}; got {master!r}")
    if _LOCAL.fullmatch(master) or master == "yarn":
        return master
    if master.startswith("spark://"):
        addresses = [_address(a, name, master) for a in master[len("spark://") :].split(",")]
    elif master.startswith("k8s://"):
        url = urlsplit(master[len("k8s://") :] if "://" in master[len("k8s://") :] else "https://" + master[6:])
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            port = -1
        if not url.hostname or not 0 < port < 65536:
            raise PrivregValueError(f"{name} must be one of {_FORMS}; got {master!r}")
        addresses = [(url.hostname, port)]
    else:
        raise PrivregValueError(f"{name} must be one of {_FORMS}; got {master!r}")
    if not any(_reachable(host, port, probe_seconds) for host, port in addresses):
        raise PrivregValueError(
            f"{name} {master!r}: no Spark master accepts connections there (waited {probe_seconds:g} s); start it, "
            f"or check the address"
        )
    return master
