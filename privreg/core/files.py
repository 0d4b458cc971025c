"""Files the user names: one-line errors, atomic writes and temporary folders.

Every failure caused by a file or the environment (not UTF-8, missing, a folder where a
file is expected, no permission, exists already, full disk, read-only file system)
becomes a :class:`~privreg.core.errors.PrivregValueError` of one line naming what the
file is for (``what``, e.g. ``"--input"``), the path, what is wrong and the fix; it never
quotes the file's content.

Outputs are written atomically (:func:`atomic_write`): to a hidden temporary name in the
same folder, flushed, fsynced and renamed into place, so a reader sees the old file or
the whole new one, never a half-written or empty one (also after a crash or a full disk).

Temporary folders are named ``privreg-<purpose>.<owner pid>.<random>``
(:func:`temporary_dir`), removed on every exit that runs Python code, and swept by
:func:`sweep_temp_dirs` at the next start when their owner was killed: a folder is
removed when it belongs to this user, its owner pid is not running and it was last
changed more than a minute ago (the age guards against a pid of another pid namespace
sharing the folder, where the owner would look dead).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from privreg.core.errors import PrivregValueError

__all__ = [
    "TEMP_PREFIX",
    "MAX_SMALL_FILE",
    "file_error",
    "regular_file_error",
    "open_regular",
    "reading",
    "open_input",
    "read_text",
    "read_bytes",
    "atomic_write",
    "write_text",
    "write_bytes",
    "make_dir",
    "temporary_dir",
    "make_temp_dir",
    "sweep_temp_dirs",
    "pid_running",
]

#: Every temporary folder privreg makes starts with this.
TEMP_PREFIX = "privreg-"

#: The largest key, certificate or configuration file read (:func:`read_bytes`): 1 MiB.
MAX_SMALL_FILE = 1 << 20

_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_TEMP_NAME = re.compile(r"^privreg-[A-Za-z0-9_-]+\.(\d+)\.[A-Za-z0-9_]+$")


def _name(path: str | os.PathLike[str]) -> str:
    return repr(os.fspath(path))


def file_error(
    exc: BaseException, path: str | os.PathLike[str], what: str, *, doing: str = "read"
) -> PrivregValueError:
    """The one-line error for ``exc`` (``UnicodeDecodeError``, ``OSError``, ``EOFError``) raised
    while ``doing`` (``"read"``, ``"written"``, ``"created"``) the file ``path`` given as
    ``what``. The message names the file and the fix, never the file's content."""
    p = _name(path)
    if isinstance(exc, UnicodeDecodeError):
        return PrivregValueError(f"{what} {p} is not UTF-8 text; save it as UTF-8 (e.g. iconv -t UTF-8) and try again")
    if isinstance(exc, EOFError):
        return PrivregValueError(f"{what} {p} ends too early (truncated or damaged); check the file or copy it again")
    if not isinstance(exc, OSError):
        return PrivregValueError(f"{what} {p} cannot be {doing}: {type(exc).__name__}; check the file")
    code = exc.errno
    if code in _NO_SPACE:
        return PrivregValueError(
            f"no space left on the device while {what} {p} was {doing}; free some space or choose a folder "
            f"on another disk"
        )
    if code == errno.EROFS:
        return PrivregValueError(
            f"{what} {p} cannot be {doing}: the file system is read-only; choose a writable folder"
        )
    if isinstance(exc, FileExistsError):
        return PrivregValueError(f"{what} {p} exists already; choose a new path or remove it")
    if isinstance(exc, FileNotFoundError):
        if doing == "read":
            return PrivregValueError(f"{what} {p} does not exist; check the path")
        return PrivregValueError(f"{what} {p} cannot be {doing}: its folder does not exist; check the path")
    if isinstance(exc, IsADirectoryError):
        return PrivregValueError(f"{what} {p} is a folder; give a file")
    if isinstance(exc, NotADirectoryError):
        return PrivregValueError(f"{what} {p}: a part of the path is a file, not a folder; check the path")
    if isinstance(exc, PermissionError):
        return PrivregValueError(
            f"{what} {p} cannot be {doing}: permission denied; check its permissions or choose another path"
        )
    reason = exc.strerror or type(exc).__name__
    return PrivregValueError(f"{what} {p} cannot be {doing} ({reason}); check the path and the device")


@contextlib.contextmanager
def reading(path: str | os.PathLike[str], what: str) -> Iterator[None]:
    """Turn a ``UnicodeDecodeError``, ``OSError`` or ``EOFError`` (a truncated compressed
    file) raised in the block (which reads ``path``) into the one-line :func:`file_error`."""
    try:
        yield
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise file_error(exc, path, what, doing="read") from None


@contextlib.contextmanager
def open_input(
    path: str | os.PathLike[str],
    what: str,
    *,
    mode: str = "r",
    encoding: str | None = "utf-8",
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """``open(path)`` for reading, with errors (opening and while reading in the block)
    turned into one-line errors naming ``what``."""
    if "b" in mode:
        encoding = None
    with reading(path, what), open(path, mode, encoding=encoding, newline=newline) as fh:
        yield fh


def regular_file_error(path: str | os.PathLike[str], what: str, mode: int) -> PrivregValueError | None:
    """The one-line error for ``path`` (``what``) whose ``st_mode`` is ``mode`` when it is
    not a regular file (a folder, a FIFO, a device, a socket), else None."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return PrivregValueError(f"{what} {_name(path)} is a folder; give a file")
    kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or socket"
    return PrivregValueError(f"{what} {_name(path)} is {kind}, not a regular file; give a regular file")


def open_regular(path: str | os.PathLike[str], what: str) -> int:
    """A read-only descriptor of ``path``, refused by type before any byte is read unless
    it is a regular file: the type is checked before opening, and the open does not
    block (a FIFO swapped in meanwhile opens at once and is then refused by ``fstat``).
    Use inside :func:`reading` (an ``OSError`` is the caller's one-line error)."""
    err = regular_file_error(path, what, os.stat(path).st_mode)
    if err is not None:
        raise err
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        err = regular_file_error(path, what, os.fstat(fd).st_mode)
        if err is not None:
            raise err
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_SMALL_FILE) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most
    ``max_bytes`` of them; a larger file, a FIFO, a device or a folder is a one-line error
    naming ``what``, found without reading more than ``max_bytes + 1`` bytes."""
    with reading(path, what), open(open_regular(path, what), "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PrivregValueError(
            f"{what} {_name(path)} is larger than {max_bytes} bytes, more than such a file holds; check the path"
        )
    return data


def read_text(
    path: str | os.PathLike[str], what: str, *, encoding: str = "utf-8", max_bytes: int = MAX_SMALL_FILE
) -> str:
    """The text of ``path`` (UTF-8), bounded as :func:`read_bytes`, or a one-line error
    naming ``what`` (also for bytes that are not UTF-8)."""
    data = read_bytes(path, what, max_bytes=max_bytes)
    with reading(path, what):
        return data.decode(encoding)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        # some file systems do not sync folders; the rename is still atomic
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str],
    what: str,
    *,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = None,
    overwrite: bool = True,
) -> Iterator[IO[Any]]:
    """Write ``path`` atomically: the block writes a hidden temporary file in the same
    folder, which is flushed, fsynced and renamed onto ``path`` when the block ends
    without an error (and removed otherwise). ``overwrite=False`` refuses an existing
    ``path``. OS errors (full disk, permissions, ...) become one-line errors naming
    ``what``."""
    if mode not in ("w", "wb"):
        raise PrivregValueError(f"atomic_write mode must be 'w' or 'wb'; got {mode!r}")
    target = Path(path)
    if not overwrite and target.exists():
        raise file_error(FileExistsError(errno.EEXIST, "exists"), target, what, doing="written")
    tmp = target.with_name(f".{target.name}.privreg-tmp.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise file_error(exc, target, what, doing="written") from None
    done = False
    try:
        with open(fd, mode, encoding=None if "b" in mode else encoding, newline=newline) as fh:
            try:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                raise file_error(exc, target, what, doing="written") from None
        try:
            if overwrite:
                os.replace(tmp, target)
            else:
                os.link(tmp, target)  # fails if target appeared meanwhile
                os.unlink(tmp)
        except OSError as exc:
            raise file_error(exc, target, what, doing="written") from None
        done = True
        _fsync_dir(target.parent)
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str, what: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`); returns the path."""
    with atomic_write(path, what, encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | os.PathLike[str], data: bytes, what: str) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`); returns the path."""
    with atomic_write(path, what, mode="wb") as fh:
        fh.write(data)
    return Path(path)


def make_dir(path: str | os.PathLike[str], what: str) -> Path:
    """Create the folder ``path`` (and its parents; an existing folder is fine), or a
    one-line error naming ``what`` (e.g. a file exists there, or no permission)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PrivregValueError(
            f"{what} {_name(p)} exists and is not a folder; choose a new folder or remove the file"
        ) from None
    except OSError as exc:
        raise file_error(exc, p, what, doing="created") from None
    return p


# -- temporary folders -------------------------------------------------------------------


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a zombie has exited)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:  # no /proc (not Linux) or it exited meanwhile
        return os.path.exists(f"/proc/{pid}") or not os.path.isdir("/proc")
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def make_temp_dir(purpose: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """A new temporary folder ``privreg-<purpose>.<pid>.<random>`` inside ``directory``
    (default the system's); the caller removes it (see :func:`temporary_dir`)."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", purpose):
        raise PrivregValueError(f"purpose must be letters, digits, '-' or '_'; got {purpose!r}")
    try:
        return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{purpose}.{os.getpid()}.", dir=directory))
    except OSError as exc:
        raise file_error(exc, directory or tempfile.gettempdir(), "temporary folder", doing="created") from None


@contextlib.contextmanager
def temporary_dir(purpose: str, directory: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A temporary folder (:func:`make_temp_dir`), removed when the block ends, however."""
    path = make_temp_dir(purpose, directory)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sweep_temp_dirs(directory: str | os.PathLike[str] | None = None, *, min_age: float = 60.0) -> list[Path]:
    """Remove the temporary folders of killed privreg processes in ``directory`` (default
    the system's): named ``privreg-<purpose>.<pid>.<random>``, owned by this user, whose
    pid is not running and last changed more than ``min_age`` seconds ago. Returns the
    folders removed; never raises."""
    folder = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if not m:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or (uid is not None and st.st_uid != uid):
                continue
            if now - st.st_mtime < min_age or pid_running(int(m.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(Path(entry.path))
    return removed
