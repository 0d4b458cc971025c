"""An append-only, tamper-evident privacy ledger in SQLite.

One row per charged release: time, mechanism, parameters, event JSON, caller label and
the randomness used. Rows form a hash chain, ``hash = H(prev_hash + canonical row)``; the
first ``prev_hash`` (the genesis) is a SHA-256 of the ledger's metadata, budget included.
``H`` is SHA-256, or HMAC-SHA256 under a secret key for a *keyed* ledger (metadata
``"chain": "hmac-sha256"``; ``"sha256"``, or no ``chain`` entry in ledgers written before
keys existed, for an unkeyed one). A keyed ledger also stores ``meta_mac``, an HMAC of the
rest of its metadata, so a wrong key is refused even before the first row.

What :meth:`Ledger.verify` detects, and what it cannot:

- Unkeyed chain: accidental or careless edits of any row or of the metadata (the budget),
  rows reordered, and rows deleted or inserted inside the chain. NOT detected: a full
  rewrite by anyone who can write the file and compute SHA-256 (edit a row, recompute
  every hash after it: the chain is consistent again), truncation (deleting the newest
  rows leaves a valid, shorter chain) and rollback to an older copy of the file.
- Keyed chain: in addition, any rewrite by someone without the key, including a
  downgrade to an unkeyed chain (reported when the verifier passes the key). NOT
  detected: truncation or rollback (a prefix of a valid chain is valid), and anything
  done by a holder of the key -- the key is a shared secret: whoever can verify can forge.
  Without the key, a keyed chain is reported as not verified, never as intact.
- An anchor (``expect_head``): the head ``SEQ:HASH`` (see :func:`format_head`) noted
  earlier and kept where the ledger's writers cannot change it. The anchored hash commits
  to every row up to it and to every checkpoint stored with them (a row's hash covers its
  checkpoint's state), so truncation, rollback and any rewrite of rows or checkpoints up
  to the anchored row are detected, keyed or not. Rows appended after it are normal and are
  covered only by the chain as above.
- Never detected: a rewrite of the rows after your latest anchor by someone able to
  recompute the chain (anyone if unkeyed, a key holder if keyed); releases that were
  never charged to a session; whether timestamps and labels were true when written.

Durability: WAL journal with ``synchronous=FULL``; a charge is one transaction, so a crash
leaves either the whole row or nothing.

Locking: opening an existing ledger and reading it take no write lock (plain reads; WAL
readers never wait for writers). Only creating a ledger runs its schema, inside a write
transaction. :meth:`Ledger.open_readonly` uses SQLite's ``mode=ro`` and never creates or
alters anything in the file. Writers hold SQLite's write lock for one short transaction
(:meth:`Ledger.try_append`) and take turns first come, first served through a queue in a
sidecar file ``<ledger>-lock`` (:mod:`privreg.budget.writer_queue`), so no writer can
starve another. Every wait is bounded by ``busy_timeout`` (then :class:`LedgerBusyError`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, cast

import attrs

from privreg.accountant.base import Accountant
from privreg.budget.writer_queue import QueueTimeout, WriterQueue, open_queue
from privreg.core.charging import Charge, jsonable
from privreg.core.errors import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.events import PrivacyEvent, event_from_json

__all__ = [
    "Ledger",
    "LedgerRow",
    "stored_prices",
    "Checkpoint",
    "EncodedPrices",
    "LedgerError",
    "LedgerFormatError",
    "LedgerBusyError",
    "LedgerKeyError",
    "LedgerIntegrityError",
    "LedgerRowsLostError",
    "GENESIS_TAG",
    "CHAIN_SHA256",
    "CHAIN_HMAC",
    "MIN_KEY_BYTES",
    "format_head",
    "parse_head",
]

GENESIS_TAG = "privreg-ledger-v1"
CHAIN_SHA256 = "sha256"
CHAIN_HMAC = "hmac-sha256"
MIN_KEY_BYTES = 16
_META_MAC_TAG = "privreg-ledger-meta-v1"
_COLUMNS = {
    "meta": ("key", "value"),
    "charges": ("seq", "timestamp", "mechanism", "parameters", "event", "label", "randomness", "prev_hash", "hash"),
}
#: Columns of a ledger that stores prices (format 3; hashed with the row); older ledgers lack them.
_PRICED_COLUMNS = ("stated", "prices")
_CHECKPOINT_TAG = "privreg-checkpoint-v1"
_REQUIRED_META = ("format", "budget")
_RESERVED_META = ("chain", "meta_mac")
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE charges (
        seq INTEGER PRIMARY KEY,
        timestamp REAL NOT NULL,
        mechanism TEXT NOT NULL,
        parameters TEXT NOT NULL,
        event TEXT NOT NULL,
        label TEXT NOT NULL,
        randomness TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        stated TEXT NOT NULL,
        prices TEXT NOT NULL
    )""",
    """CREATE TABLE checkpoints (
        seq INTEGER PRIMARY KEY,
        state TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    )""",
)
_RUNS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, ended REAL NOT NULL, status TEXT NOT NULL, "
    "releases INTEGER NOT NULL)"
)
_SELECT = "SELECT seq, timestamp, mechanism, parameters, event, label, randomness, prev_hash, hash"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class LedgerError(PrivregError):
    """A ledger cannot be opened, read or written (the message names the file)."""


class LedgerFormatError(LedgerError):
    """The file is not a complete privreg ledger (not SQLite, a table, column or
    metadata entry missing)."""


class LedgerBusyError(LedgerError):
    """Another writer held the ledger's write lock (or its turn) past ``busy_timeout``."""


class LedgerKeyError(LedgerError, ValueError):
    """A ledger's key is missing, malformed or not the one the ledger was created with."""


class LedgerIntegrityError(LedgerError):
    """The ledger's hash chain is broken or a row cannot be decoded."""


class LedgerRowsLostError(LedgerError):
    """Rows a reader was given are gone (a server crash took rows committed but not yet
    flushed, see :mod:`privreg.budget.store_postgres`): read the ledger again from row 1."""


#: What json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False) builds on
#: every call, built once (the same text: a charge encodes three values).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)


def _dumps(x: Any) -> str:
    return _ENCODER.encode(x)


def _digest(key: bytes | None, text: str) -> str:
    data = text.encode("utf-8")
    return hmac.new(key, data, hashlib.sha256).hexdigest() if key is not None else hashlib.sha256(data).hexdigest()


_cached_event_json = functools.lru_cache(maxsize=1024)(PrivacyEvent.to_json)


def _event_to_json(event: PrivacyEvent) -> str:
    """``event.to_json()``, cached: equal events give equal strings, and a ledger repeats a few."""
    last = _LAST_EVENT_JSON[0]
    if last[0] is event:  # the very event of the last call (a loop repeats one)
        return last[1]
    try:
        text = _cached_event_json(event)
    except TypeError:  # an event that cannot be hashed
        return event.to_json()
    _LAST_EVENT_JSON[0] = (event, text)  # kept only once hashed: a frozen event, as the cache needs
    return text


#: The last hashable event :func:`_event_to_json` encoded, with its text (one tuple, set at once).
_LAST_EVENT_JSON: list[tuple[object, str]] = [(None, "")]


def _plain_key(mapping: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A key that determines ``_dumps(jsonable(mapping))`` exactly, for a dict of str keys
    and str, int, bool, None, float (a zero with its sign) or such dicts as values; None
    for anything else (then the text is computed, not looked up)."""
    items: list[Any] = []
    for k, x in mapping.items():
        t = type(x)
        if type(k) is not str:
            return None
        if t is str or t is int or t is bool or x is None:
            items.append((k, t, x))
        elif t is float:
            items.append((k, t, x, math.copysign(1.0, x)) if x == 0 else (k, t, x))
        elif t is dict:
            sub = _plain_key(x)
            if sub is None:
                return None
            items.append((k, t, sub))
        else:
            return None
    return tuple(items)


_PARAMETERS_MEMO: dict[tuple[Any, ...], str] = {}
_PARAMETERS_MEMO_SIZE = 1024


def _parameters_json(parameters: Mapping[str, Any]) -> str:
    """``_dumps(jsonable(parameters))``, looked up by :func:`_plain_key` when it has one:
    the releases of a session repeat a few mechanisms' parameters."""
    key = _plain_key(parameters) if type(parameters) is dict else None
    if key is None:
        return _dumps(jsonable(parameters))
    text = _PARAMETERS_MEMO.get(key)
    if text is None:
        text = _dumps(jsonable(parameters))
        if len(_PARAMETERS_MEMO) >= _PARAMETERS_MEMO_SIZE:
            _PARAMETERS_MEMO.clear()
        _PARAMETERS_MEMO[key] = text
    return text


#: Texts of rows that decode (parameters, event, randomness, stated, prices): a ledger's
#: rows repeat a few, so a catch-up checks each once (cleared when full).
_DECODES: set[tuple[Any, ...]] = set()
_DECODES_SIZE = 1024

#: event_from_json, cached: a ledger's rows repeat a few kinds of release, and events are frozen.
_event_from_json = functools.lru_cache(maxsize=1024)(event_from_json)


def _row_hash(
    key: bytes | None,
    prev_hash: str,
    seq: int,
    timestamp: float,
    mechanism: str,
    parameters: str,
    event: str,
    label: str,
    randomness: str,
    *priced: str,
) -> str:
    """A row's hash; ``priced`` (stated guarantee and prices, then the state of the
    checkpoint stored with the row, if any) only in a format-3 ledger. Covering the
    checkpoint makes every later row, and so an anchored head, commit to it."""
    return _hash_row_tail(key, prev_hash, seq, timestamp, (mechanism, parameters, event, label, randomness, *priced))


def _hash_row_tail(key: bytes | None, prev_hash: str, seq: int, timestamp: float, tail_key: tuple[str, ...]) -> str:
    """:func:`_row_hash` of the row whose fields after seq and timestamp are ``tail_key``."""
    # The text is _dumps([seq, repr(timestamp), mechanism, ..., *priced]); all but the
    # first two repeat across a loop of releases, so their encoded tail is memoised.
    tail = _ROW_TAIL_MEMO.get(tail_key)
    if tail is None:
        tail = _dumps(list(tail_key))[1:]
        if len(_ROW_TAIL_MEMO) >= _ROW_TAIL_MEMO_SIZE:
            _ROW_TAIL_MEMO.clear()
        _ROW_TAIL_MEMO[tail_key] = tail
    # an int's and a float repr's JSON texts are their plain digits (a repr never needs escaping)
    if type(seq) is int and type(timestamp) is float:
        text = f'{prev_hash}[{seq},"{timestamp!r}",{tail}'
    else:
        text = f"{prev_hash}[{_dumps(seq)},{_dumps(repr(timestamp))},{tail}"
    return _digest(key, text)


#: Encoded row tails (every field after seq and timestamp) by their texts (cleared when full).
_ROW_TAIL_MEMO: dict[tuple[str, ...], str] = {}
_ROW_TAIL_MEMO_SIZE = 1024


def _checkpoint_hash(key: bytes | None, prev_hash: str, seq: int, row_hash: str, state: str) -> str:
    return _digest(key, prev_hash + _dumps([_CHECKPOINT_TAG, seq, row_hash, state]))


def _meta_mac(key: bytes, meta: Mapping[str, Any]) -> str:
    return _digest(key, _META_MAC_TAG + _dumps({k: v for k, v in meta.items() if k != "meta_mac"}))


def _check_key(key: object) -> bytes | None:
    if key is None:
        return None
    if isinstance(key, str):
        raise LedgerKeyError(
            "key must be bytes, not str: read it from a file opened in binary "
            "mode, or decode hex with bytes.fromhex(...)"
        )
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise LedgerKeyError(f"key must be bytes; got {type(key).__name__}")
    key = bytes(key)
    if len(key) < MIN_KEY_BYTES:
        raise LedgerKeyError(
            f"key has {len(key)} bytes; a ledger key needs at least {MIN_KEY_BYTES} random bytes (e.g. os.urandom(32))"
        )
    return key


def _require_file(path: str) -> None:
    if path == ":memory:" or not Path(path).exists():
        raise PrivregValueError(f"ledger {path!r} does not exist; check the path")
    if not Path(path).is_file():
        raise PrivregValueError(f"ledger {path!r} is not a file; give the ledger file (ledger.sqlite)")


def format_head(head: tuple[int, str]) -> str:
    """``"SEQ:HASH"``, the anchor form of :meth:`Ledger.head` that ``expect_head`` takes."""
    return f"{head[0]}:{head[1]}"


def parse_head(text: str, name: str = "expect_head") -> tuple[int | None, str]:
    """``"SEQ:HASH"`` or ``"HASH"`` (64 hex digits) -> (seq or None, hash); ``name``: the
    argument it came from, for the error."""
    if not isinstance(text, str):
        raise PrivregTypeError(f"{name} must be a str like '12:3fa9...'; got {text!r}")
    seq_text, _, digest = text.strip().rpartition(":")
    digest = digest.lower()
    ok = _HEX64.fullmatch(digest) is not None and (seq_text == "" or seq_text.isdigit())
    if not ok or (":" in text and seq_text == ""):
        raise PrivregValueError(
            f"{name} {text!r} is not a ledger head: give SEQ:HASH as printed by 'privreg ledger verify' "
            f"(e.g. 12:{'3fa9' * 16}) or the 64-hex-digit hash alone"
        )
    return (int(seq_text) if seq_text else None), digest


class EncodedPrices(Mapping[str, Any]):
    """A row's prices (filter name -> JSON form of its price) with their ledger text,
    ``_dumps`` of them, encoded once: a session reuses one for every charge of the same
    prices, so the ledger does not encode the same numbers again. Read-only."""

    __slots__ = ("_data", "text")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)
        self.text = _dumps(self._data)

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]  # a copy: the encoded value is shared by many rows
        return list(value) if type(value) is list else dict(value) if type(value) is dict else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return dict(self) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a dict, so unhashable like one


class StoredPrices(EncodedPrices):
    """A row's prices decoded from ``text``, the text the ledger stores: rows with the
    same text share one (:func:`stored_prices`), so a reader decodes each text once.
    Read-only, as :class:`EncodedPrices`."""

    __slots__ = ()

    def __init__(self, data: Mapping[str, Any], text: str) -> None:
        self._data = dict(data)
        self.text = text


_STORED_PRICES: dict[str, StoredPrices] = {}
_STORED_PRICES_SIZE = 1024


def stored_prices(text: str) -> StoredPrices:
    """The prices stored as ``text``, decoded once per distinct text (ValueError if they
    are not a mapping): the rows of a ledger repeat a few kinds of release."""
    found = _STORED_PRICES.get(text)
    if found is None:
        decoded = json.loads(text)
        if not isinstance(decoded, dict):
            raise ValueError("its prices are not a mapping")
        found = StoredPrices(decoded, text)
        if len(_STORED_PRICES) >= _STORED_PRICES_SIZE:
            _STORED_PRICES.clear()
        _STORED_PRICES[text] = found
    return found


@attrs.frozen(kw_only=True)
class LedgerRow:
    """A stored charge with its position and hashes. ``prices``: what each filter charged
    for it when it was decided (filter name -> stored price), None in a ledger written
    before prices were stored."""

    seq: int
    charge: Charge
    prev_hash: str
    hash: str
    prices: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class Checkpoint:
    """Every filter's state after row ``seq``, chained like rows: its hash covers the
    previous checkpoint's hash, ``seq``, that row's hash and the state."""

    seq: int
    state: Mapping[str, Any]
    prev_hash: str
    hash: str


class _SQLErrors:
    """:meth:`Ledger._sql`: a plain class, as it wraps every statement of a charge."""

    __slots__ = ("doing", "ledger")

    def __init__(self, ledger: Ledger, doing: str) -> None:
        self.ledger, self.doing = ledger, doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, sqlite3.Error):
            raise self.ledger._error(exc, self.doing) from exc


class Ledger:
    """The SQLite ledger at ``path`` (``":memory:"`` for a private, unpersisted one).

    A new ledger is created (with ``meta``, which must hold ``format`` and ``budget``)
    only when ``path`` does not exist or is an empty database and ``create`` is true.
    ``key`` (bytes, at least 16) makes a new ledger keyed, and must be the ledger's key to
    write to an existing keyed ledger. ``busy_timeout`` (seconds) bounds each wait for
    the writer queue and for SQLite's write lock.
    """

    # Declared here: _setup assigns them, but the checker reads __init__ first.
    #: The connection; unset until opened (close() copes: opening can fail).
    _db: sqlite3.Connection
    #: How a session uses this store (PostgresLedger overrides them; a third-party
    #: LedgerStore may omit them, and a session then assumes these defaults).
    #: A conflicting try_append returns the rows the caller missed (priced after, not before).
    catches_up_on_append: bool = False
    #: A session may start from the last checkpoint (no writer can forge one).
    trusts_checkpoints: bool = True
    #: Others appended during this writer's last charge (its next one waits for the turn).
    contended: bool = False
    busy_timeout: float

    def __init__(
        self,
        path: str | Path,
        *,
        meta: Mapping[str, Any] | None = None,
        create: bool = True,
        key: bytes | None = None,
        busy_timeout: float = 30.0,
    ) -> None:
        self._setup(path, key=key, busy_timeout=busy_timeout, readonly=False)
        new_meta = self._new_meta(meta) if meta is not None else None
        if self.path != ":memory:" and not create:
            _require_file(self.path)
        if create and new_meta is None and (self.path == ":memory:" or not Path(self.path).exists()):
            raise PrivregValueError(f"ledger {self.path!r} is new: pass its metadata (meta=, with the budget)")
        with self._sql("opening"):
            self._db = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._db.execute("PRAGMA synchronous = FULL")
        try:
            if create and not self._tables():
                self._create(new_meta)
            self._load()
            self._check_writer_key()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open_readonly(cls, path: str | Path, *, key: bytes | None = None, busy_timeout: float = 30.0) -> Ledger:
        """Open an existing ledger for reading only: SQLite ``mode=ro``, no journal-mode
        change, no schema statement, no write lock. A file that is not a complete privreg
        ledger raises LedgerFormatError.

        Works on files and directories we cannot write. When we cannot write the file, no
        ``-shm`` exists (so no writer has it open in WAL mode) and no ``-wal`` holds
        changes, the file is opened ``immutable=1``: SQLite then needs no ``-shm`` and
        creates nothing, but reads without locks, so a writer with more rights changing
        the file during the read could show a torn state (reported as broken, never as
        intact). Otherwise SQLite's WAL reader may create the ``-shm``/``-wal`` side files,
        as any reader does; the ledger file itself is never written.
        """
        self = cls.__new__(cls)
        self._setup(path, key=key, busy_timeout=busy_timeout, readonly=True)
        _require_file(self.path)
        target = Path(self.path)
        wal, shm = Path(self.path + "-wal"), Path(self.path + "-shm")
        wal_pending = wal.is_file() and wal.stat().st_size > 0
        immutable = not os.access(target, os.W_OK) and not shm.exists() and not wal_pending
        uri = target.absolute().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
        try:
            with self._sql("opening it read-only"):
                self._db = sqlite3.connect(
                    uri, uri=True, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
                )
                self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            try:
                self._load()
            except LedgerError as exc:
                if wal_pending and not os.access(target.parent, os.W_OK) and not shm.exists():
                    raise LedgerError(
                        f"ledger {self.path!r} has changes in {wal.name} that SQLite cannot read "
                        f"without creating {shm.name}, and its directory is not writable: copy "
                        f"{target.name} and {wal.name} together to a writable directory and read "
                        f"the copy ({exc})"
                    ) from exc
                raise
            self._check_reader_key()
        except BaseException:
            self.close()
            raise
        return self

    def _setup(self, path: str | Path, *, key: bytes | None, busy_timeout: float, readonly: bool) -> None:
        self.path = str(path)
        self._queue: WriterQueue | None = None
        self._key = _check_key(key)
        if not isinstance(busy_timeout, (int, float)) or isinstance(busy_timeout, bool) or not 0 <= busy_timeout < 1e6:
            raise PrivregValueError(
                f"busy_timeout must be a number of seconds, 0 <= busy_timeout < 1e6; got {busy_timeout!r}"
            )
        self.busy_timeout = float(busy_timeout)
        self.readonly = readonly
        self.meta: dict[str, Any] = {}
        #: whether rows store their prices and the ledger its checkpoints (format 3)
        self.priced = False
        self._key_problem: str | None = None
        self._thread_lock = threading.RLock()
        self._turn_depth = 0
        self._turn_owner: int | None = None
        self._ticket: int | None = None

    # -- opening --------------------------------------------------------------------------

    def _sql(self, doing: str) -> AbstractContextManager[None]:
        """Turn sqlite3 errors into privreg errors that name the file."""
        return _SQLErrors(self, doing)

    def _error(self, exc: sqlite3.Error, doing: str) -> LedgerError:
        name, msg = getattr(exc, "sqlite_errorname", "") or "", str(exc)
        where = f"ledger {self.path!r}"
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in msg:
            return LedgerError(f"{where} is closed; open it again")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in msg:
            return LedgerBusyError(
                f"{where}: another process held its write lock for more than {self.busy_timeout:g} s "
                f"while {doing}; retry later, pass a larger busy_timeout, or find the process that "
                f"holds it (e.g. fuser {self.path})"
            )
        if name == "SQLITE_NOTADB" or "not a database" in msg:
            return LedgerFormatError(f"{where} is not a privreg ledger: not a SQLite database ({msg}); check the path")
        if name.startswith("SQLITE_CORRUPT") or "malformed" in msg:
            return LedgerFormatError(f"{where} is corrupt ({msg}); restore it from a backup")
        if name.startswith("SQLITE_READONLY") or "readonly" in msg:
            return LedgerError(
                f"{where} cannot be written ({msg}) while {doing}: check the permissions "
                f"of the file and its directory, or only read it (Ledger.open_readonly, "
                f"privreg ledger verify)"
            )
        if name.startswith("SQLITE_CANTOPEN") or "unable to open" in msg:
            return LedgerError(
                f"{where} cannot be opened ({msg}) while {doing}: check the path and the "
                f"permissions of the file and its directory"
            )
        return LedgerError(f"{where}: SQLite failed while {doing}: {msg}")

    def _tables(self) -> list[str]:
        with self._sql("reading its schema"):
            return [r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def _new_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """The metadata a new ledger stores: ``meta`` plus its chain (and meta MAC)."""
        if not isinstance(meta, Mapping):
            raise PrivregTypeError(f"meta must be a mapping; got {type(meta).__name__}")
        missing = [k for k in _REQUIRED_META if k not in meta]
        if missing:
            raise PrivregValueError(f"meta of new ledger {self.path!r} lacks {', '.join(missing)}")
        reserved = [k for k in _RESERVED_META if k in meta]
        if reserved:
            raise PrivregValueError(f"meta must not set {', '.join(reserved)}: the ledger records them itself")
        full = {str(k): v for k, v in meta.items()}
        full["chain"] = CHAIN_HMAC if self._key is not None else CHAIN_SHA256
        if self._key is not None:
            full["meta_mac"] = _meta_mac(self._key, full)
        try:
            _dumps(full)
        except (TypeError, ValueError) as exc:
            raise PrivregValueError(f"meta of new ledger {self.path!r} must be JSON (finite numbers): {exc}") from None
        return full

    def _create(self, full: Mapping[str, Any] | None) -> None:
        """Write the schema and metadata of a new ledger, in one write transaction."""
        if full is None:
            raise PrivregValueError(f"ledger {self.path!r} is new: pass its metadata (meta=, with the budget)")
        if self.path != ":memory:":
            with self._sql("creating it"):
                self._db.execute("PRAGMA journal_mode = WAL")
        with self.transaction(), self._sql("creating it"):
            if not self._tables():  # nobody created it while we waited for the lock
                for stmt in _SCHEMA:
                    self._db.execute(stmt)
                for k, value in full.items():
                    self._db.execute("INSERT INTO meta VALUES (?, ?)", (k, _dumps(value)))

    def _load(self) -> None:
        """Check the schema and read the metadata, with plain reads."""
        tables = self._tables()
        where = f"ledger {self.path!r}"
        missing = [t for t in _COLUMNS if t not in tables]
        if missing:
            raise LedgerFormatError(
                f"{where} is not a complete privreg ledger: no {' and no '.join(missing)} table "
                f"(tables: {', '.join(sorted(tables)) or 'none'}); check the path or restore it from a backup"
            )
        with self._sql("reading its schema"):
            for table, columns in _COLUMNS.items():
                have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if table == "charges":
                    self.priced = all(c in have for c in _PRICED_COLUMNS) and "checkpoints" in tables
                lacking = [c for c in columns if c not in have]
                if lacking:
                    raise LedgerFormatError(
                        f"{where} is not a complete privreg ledger: table {table} "
                        f"has no column {', '.join(lacking)}; restore it from a backup"
                    )
            stored = self._db.execute("SELECT key, value FROM meta").fetchall()
        self._read_meta(stored)

    def _read_meta(self, stored: list[tuple[Any, Any]]) -> None:
        """Check and keep the stored metadata ``(key, JSON value)`` pairs, and the genesis."""
        where = f"ledger {self.path!r}"
        try:
            self.meta = {str(k): json.loads(v) for k, v in stored}
        except (TypeError, ValueError) as exc:
            raise LedgerFormatError(f"{where}: its metadata is not valid JSON ({exc})") from exc
        lacking = [k for k in _REQUIRED_META if k not in self.meta]
        if lacking:
            raise LedgerFormatError(
                f"{where} is not a complete privreg ledger: its metadata has no "
                f"{' and no '.join(lacking)}; restore it from a backup"
            )
        if self.chain not in (CHAIN_SHA256, CHAIN_HMAC):
            raise LedgerFormatError(
                f"{where} uses hash chain {self.chain!r}, which this privreg does not "
                f"know ({CHAIN_SHA256!r} or {CHAIN_HMAC!r}); upgrade privreg"
            )
        self._genesis = _digest(None, GENESIS_TAG + _dumps(self.meta))

    def _key_mismatch(self) -> str | None:
        """Why the given key does not fit this ledger's metadata, or None."""
        where = f"ledger {self.path!r}"
        if self.chain == CHAIN_HMAC and self._key is None:
            return (
                f"{where} is keyed ({CHAIN_HMAC}): no key was given, so its chain could not be "
                f"verified; pass the key it was created with"
            )
        if self.chain == CHAIN_SHA256 and self._key is not None:
            return (
                f"{where} has an unkeyed {CHAIN_SHA256} chain but a key was given: anyone could "
                f"have rewritten it (a keyed ledger downgraded, or the wrong file)"
            )
        if self._key is not None and not hmac.compare_digest(
            str(self.meta.get("meta_mac", "")), _meta_mac(self._key, self.meta)
        ):
            return (
                f"{where}: its metadata MAC does not verify under the given key: the wrong key, "
                f"or the metadata (budget) was edited"
            )
        return None

    def _check_writer_key(self) -> None:
        problem = self._key_mismatch()
        if problem is not None:
            if self.chain == CHAIN_HMAC and self._key is None:
                problem += " to write to it (Ledger.open_readonly reads it without the key)"
            elif self.chain == CHAIN_SHA256:
                problem = f"ledger {self.path!r} was created without a key: open it without key="
            raise LedgerKeyError(problem)
        if self._key is not None:
            with self._sql("reading its last row"):
                last = self._db.execute(f"{self._select} ORDER BY seq DESC LIMIT 1").fetchone()
            states = self._checkpoint_texts(int(last[0]) - 1) if last is not None else {}
            if last is not None and _row_hash(self._key, last[7], *last[:7], *last[9:], *states.values()) != last[8]:
                raise LedgerIntegrityError(
                    f"ledger {self.path!r}: its last row ({last[0]}) does not verify "
                    f"under the key; run 'privreg ledger verify {self.path} --key-file ...'"
                )

    def _check_reader_key(self) -> None:
        self._key_problem = self._key_mismatch()

    @property
    def _select(self) -> str:
        return _SELECT + (", stated, prices" if self.priced else "") + " FROM charges"

    @property
    def chain(self) -> str:
        """``"sha256"`` or ``"hmac-sha256"`` (ledgers from before keys: ``"sha256"``)."""
        return str(self.meta.get("chain", CHAIN_SHA256))

    def close(self) -> None:
        db: sqlite3.Connection | None = getattr(self, "_db", None)
        if db is not None:
            db.close()
        if self._queue is not None:
            self._queue.close()
            self._queue = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.readonly:
            raise LedgerError(f"ledger {self.path!r} was opened read-only; open it with Ledger(path) to write")

    @contextmanager
    def turn(self) -> Iterator[None]:
        """This writer's turn: first come, first served among all writers of the ledger.

        :meth:`try_append` and :meth:`transaction` take it themselves. Hold it yourself
        across a catch-up and retry, so that others cannot append in between::

            row = ledger.try_append(charge, expected_seq=seen)  # fast path, short turn
            if row is None:
                with ledger.turn():          # writers behind us wait; readers do not
                    seen = catch_up()        # read the new rows, re-check the budget
                    row = ledger.try_append(charge, expected_seq=seen)  # cannot conflict
                                             # (unless a writer bypasses the queue)

        Re-entrant within a thread; threads sharing this Ledger take turns through a lock.
        Raises LedgerBusyError after ``busy_timeout`` seconds of waiting.
        """
        self._writable()
        if not self._thread_lock.acquire(timeout=self.busy_timeout):
            raise self._busy("another thread of this process holds its turn")
        try:
            if self._turn_depth == 0 and self.path != ":memory:":
                self._enter_queue()
            self._turn_depth += 1
            self._turn_owner = threading.get_ident()
            try:
                yield
            finally:
                self._turn_depth -= 1
                if self._turn_depth == 0:
                    self._turn_owner = None
                    if self._ticket is not None:
                        cast(WriterQueue, self._queue).leave(self._ticket)  # a ticket comes from the queue
                        self._ticket = None
        finally:
            self._thread_lock.release()

    def _in_my_transaction(self) -> bool:
        """Whether this thread is inside :meth:`transaction` (the connection is shared
        between threads, so ``in_transaction`` alone could be another thread's)."""
        return self._turn_owner == threading.get_ident() and self._db.in_transaction

    def _busy(self, why: str) -> LedgerBusyError:
        return LedgerBusyError(
            f"ledger {self.path!r}: waited more than {self.busy_timeout:g} s for the write lock ({why}); "
            f"retry later, pass a larger busy_timeout, or find the process that holds it "
            f"(e.g. fuser {self.path} {self.path}-lock)"
        )

    def _enter_queue(self) -> None:
        try:
            if self._queue is None:
                self._queue = open_queue(self.path)
            if self._queue is not None:
                self._ticket = self._queue.enter(time.monotonic() + self.busy_timeout)
        except QueueTimeout as exc:
            raise self._busy(f"other writers are ahead in line: {exc}") from None
        except OSError as exc:
            raise LedgerError(
                f"ledger {self.path!r}: cannot use its writer queue {self.path}-lock ({exc}); "
                f"writers need the ledger's directory to be writable"
            ) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction in this writer's turn: the caller holds the write lock
        until it ends. Keep it short; readers never wait for it."""
        with self.turn():
            with self._sql("taking the write lock"):
                self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    with self._sql("rolling back"):
                        self._db.execute("ROLLBACK")
                raise
            try:
                with self._sql("committing"):
                    self._db.execute("COMMIT")
            except LedgerError:
                if self._db.in_transaction:  # the commit failed: release the lock, keep its error
                    with self._sql("rolling back"):
                        self._db.execute("ROLLBACK")
                raise

    def _check_append(self, expected_seq: int) -> None:
        """Before any append: ``expected_seq`` is a row number and the ledger is writable."""
        if not isinstance(expected_seq, int) or isinstance(expected_seq, bool) or expected_seq < 0:
            raise PrivregValueError(
                f"expected_seq must be an int >= 0 (the seq of the last row you read, 0 for none); got {expected_seq!r}"
            )
        self._writable()

    def try_append(
        self,
        charge: Charge,
        *,
        expected_seq: int,
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow | None:
        """Append ``charge`` if the ledger's head is still row ``expected_seq``, in one
        short IMMEDIATE transaction; return the new row. Return None, appending nothing,
        if other writers appended since (catch up with ``rows(after=expected_seq)`` and
        retry, holding :meth:`turn` to keep your place). ``prices``: what each filter
        charged for it; ``checkpoint``: every filter's state after it, stored in the same
        transaction. Raises LedgerBusyError after ``busy_timeout`` seconds of waiting."""
        self._check_append(expected_seq)
        if self._in_my_transaction():  # called inside transaction(): the lock is ours already
            head = self.head()
            if head[0] != expected_seq:
                return None
            return self._append_after(head, charge, prices=prices, checkpoint=checkpoint)
        with self.transaction():
            head = self.head()
            if head[0] != expected_seq:
                return None  # the transaction ends without writing: nothing to roll back
            return self._append_after(head, charge, prices=prices, checkpoint=checkpoint)

    def genesis(self) -> str:
        """The prev_hash of the first row: a hash of the metadata."""
        return self._genesis

    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last row; (0, genesis) when empty. O(log n)."""
        with self._sql("reading its head"):
            row = self._db.execute("SELECT seq, hash FROM charges ORDER BY seq DESC LIMIT 1").fetchone()
        return (0, self.genesis()) if row is None else (int(row[0]), str(row[1]))

    def append(
        self,
        charge: Charge,
        *,
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow:
        """Append a charge inside :meth:`transaction` (so the check that preceded it and
        the append are one atomic step), with its prices and, if given, a checkpoint of
        the state after it (both dropped by a ledger of an older format)."""
        self._writable()
        if not self._in_my_transaction():
            raise LedgerError(
                f"ledger {self.path!r}: append() must run inside transaction(); use try_append() on its own"
            )
        return self._append_after(self.head(), charge, prices=prices, checkpoint=checkpoint)

    def _append_after(
        self,
        head: tuple[int, str],
        charge: Charge,
        *,
        prices: Mapping[str, Any] | None,
        checkpoint: Mapping[str, Any] | None,
    ) -> LedgerRow:
        """:meth:`append` after the row ``head`` (read in this transaction)."""
        seq, prev = head
        fields = self._row_fields(charge)
        if not self.priced:
            digest = _row_hash(self._key, prev, seq + 1, *fields)
            with self._sql("appending a charge"):
                self._db.execute(
                    "INSERT INTO charges VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (seq + 1, *fields, prev, digest)
                )
            return LedgerRow(seq=seq + 1, charge=charge, prev_hash=prev, hash=digest)
        stored: Mapping[str, Any]
        if type(prices) is EncodedPrices:  # read-only, encoded once: kept as it is
            stored, text = prices, prices.text
        else:
            stored = dict(prices or {})
            text = _dumps(stored)
        stated = self._stated_text(charge)
        timestamp, mechanism, parameters, event, label, randomness = fields
        state = None if checkpoint is None else _dumps(dict(checkpoint))
        tail = (mechanism, parameters, event, label, randomness, stated, text)
        digest = _hash_row_tail(self._key, prev, seq + 1, timestamp, tail if state is None else (*tail, state))
        with self._sql("appending a charge"):
            self._insert_row(
                (seq + 1, timestamp, mechanism, parameters, event, label, randomness, prev, digest, stated, text), state
            )
        return LedgerRow(seq=seq + 1, charge=charge, prev_hash=prev, hash=digest, prices=stored)

    def _hash_of(self, prev: str, seq: int, fields: tuple[Any, ...], stated: str, text: str) -> str:
        """The hash of row ``seq`` after ``prev`` with ``fields`` (:meth:`_row_fields`),
        stated guarantee and prices texts, and no checkpoint."""
        timestamp, mechanism, parameters, event, label, randomness = fields
        tail = (mechanism, parameters, event, label, randomness, stated, text)
        return _hash_row_tail(self._key, prev, seq, timestamp, tail)

    @staticmethod
    def _stated_text(charge: Charge) -> str:
        """The stated guarantee of ``charge`` as a row stores it ("" for none)."""
        return "" if charge.stated is None else _event_to_json(charge.stated)

    @staticmethod
    def _row_fields(charge: Charge) -> tuple[float, str, str, str, str, str]:
        """``(timestamp, mechanism, parameters, event, label, randomness)`` as a row stores them."""
        return (
            float(charge.timestamp),
            charge.mechanism,
            _parameters_json(charge.parameters),
            _event_to_json(charge.event),
            charge.label,
            _parameters_json(charge.randomness) if charge.randomness else "{}",
        )

    def _insert_row(self, values: tuple[Any, ...], state: str | None) -> None:
        """Write a format-3 row ``values`` (seq, fields, prev_hash, hash, stated, prices)
        and, if ``state`` is given, its checkpoint, inside the append's transaction."""
        self._db.execute(
            "INSERT INTO charges (seq, timestamp, mechanism, parameters, event, label, randomness, prev_hash, "
            "hash, stated, prices) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            values,
        )
        if state is not None:
            seq, digest = values[0], values[8]
            self._db.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?)", (seq, state, *self._checkpoint_link(seq, digest, state))
            )

    def _checkpoint_link(self, seq: int, row_hash: str, text: str) -> tuple[str, str]:
        """(prev_hash, hash) of a new checkpoint at row ``seq``, after the newest stored one."""
        last = self._last_checkpoint_hash()
        prev = self.genesis() if last is None else last
        return prev, _checkpoint_hash(self._key, prev, seq, row_hash, text)

    def _last_checkpoint_hash(self) -> str | None:
        """The hash of the newest stored checkpoint, None if there is none."""
        last = self._db.execute("SELECT hash FROM checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
        return None if last is None else str(last[0])

    # -- run ends (outside the chain: see privreg.budget.run_log) ---------------------------

    def record_run_end(self, run_id: str, *, ended: float, status: str, releases: int) -> None:
        """Record that run ``run_id`` ended (``status``, ``releases`` charged), in one
        short write transaction in this writer's turn; once: a later call for the same run
        changes nothing (the first end stands, as on PostgreSQL)."""
        with self.transaction() as db:
            db.execute(_RUNS_SCHEMA)
            db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?)", (run_id, ended, status, releases))

    def run_end_rows(self) -> list[tuple[str, float, str, int]]:
        """``(id, ended, status, releases)`` of every recorded run end."""
        with self._sql("reading run ends"):
            if "runs" not in self._tables():
                return []
            rows = self._db.execute("SELECT id, ended, status, releases FROM runs ORDER BY id").fetchall()
        return [(str(r[0]), float(r[1]), str(r[2]), int(r[3])) for r in rows]

    # -- checkpoints ----------------------------------------------------------------------

    def last_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint, after checking its link to the previous one and to its
        row (O(log n)); None if there is none. A broken link raises LedgerIntegrityError
        (verify the ledger to see what changed)."""
        if not self.priced:
            return None
        with self._sql("reading its last checkpoint"):
            raw = self._db.execute("SELECT * FROM checkpoints ORDER BY seq DESC LIMIT 1").fetchone()
            if raw is None:
                return None
            seq, state, prev, digest = raw
            before = self._db.execute(
                "SELECT hash FROM checkpoints WHERE seq < ? ORDER BY seq DESC LIMIT 1", (seq,)
            ).fetchone()
            row = self._db.execute("SELECT hash FROM charges WHERE seq = ?", (seq,)).fetchone()
        expected_prev = self.genesis() if before is None else str(before[0])
        problem = self._checkpoint_problem(seq, state, prev, digest, expected_prev, None if row is None else row[0])
        if problem is not None:
            raise LedgerIntegrityError(f"ledger {self.path!r}: {problem}; verify it with 'privreg ledger verify'")
        return self._decode_checkpoint(raw)

    def _checkpoint_problem(
        self, seq: int, state: str, prev: str, digest: str, expected_prev: str, row_hash: str | None
    ) -> str | None:
        if row_hash is None:
            return f"checkpoint at row {seq}: the row is missing"
        if prev != expected_prev:
            return f"checkpoint at row {seq}: prev_hash does not match the previous checkpoint"
        if self._key_problem is None and _checkpoint_hash(self._key, prev, seq, row_hash, state) != digest:
            return f"checkpoint at row {seq}: its state or row does not match its hash (edited)"
        return None

    def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint in order, each link checked (problems raise LedgerIntegrityError)."""
        if not self.priced:
            return []
        with self._sql("reading checkpoints"):
            raw = self._db.execute("SELECT * FROM checkpoints ORDER BY seq").fetchall()
            hashes = dict(
                self._db.execute("SELECT c.seq, c.hash FROM charges c JOIN checkpoints k ON c.seq = k.seq").fetchall()
            )
        prev = self.genesis()
        out = []
        for r in raw:
            problem = self._checkpoint_problem(r[0], r[1], r[2], r[3], prev, hashes.get(r[0]))
            if problem is not None:
                raise LedgerIntegrityError(f"ledger {self.path!r}: {problem}")
            out.append(self._decode_checkpoint(r))
            prev = r[3]
        return out

    def _decode_checkpoint(self, raw: tuple[Any, ...]) -> Checkpoint:
        seq, state, prev, digest = raw
        try:
            decoded = json.loads(state)
        except ValueError as exc:
            raise LedgerIntegrityError(f"ledger {self.path!r}: checkpoint at row {seq} cannot be decoded") from exc
        if not isinstance(decoded, dict):
            raise LedgerIntegrityError(f"ledger {self.path!r}: checkpoint at row {seq} is not a state")
        return Checkpoint(seq=int(seq), state=decoded, prev_hash=str(prev), hash=str(digest))

    # -- reading and verifying ------------------------------------------------------------

    def rows(self, *, after: int = 0, verify: bool = True) -> list[LedgerRow]:
        """Rows with seq > ``after``, in order: O(log n + new rows). With ``verify``, a
        broken chain raises (a keyed ledger needs its key to verify)."""
        return [self._decode(r) for r in self._checked_rows(after, verify)]

    def prices_after(self, after: int, *, expect: str | None = None) -> list[tuple[int, str, str]] | None:
        """``(seq, hash, stored prices text)`` of each row with seq > ``after``, in order,
        read and checked as :meth:`rows` with ``verify`` (the chain, and that each row
        decodes) without building its charge: all a session's catch-up needs of a priced
        row. None when some row stores no prices: read those with :meth:`rows`. ``expect``:
        the hash row ``after`` had when the caller read it; LedgerRowsLostError if it is
        gone or now has another."""
        raw = self._checked_rows(after, True, expect)
        out = []
        good = _DECODES
        for r in raw:
            text = r[10] if len(r) > 10 else ""
            if not text or text == "{}":  # priced from its event, as rows() gives it
                return None
            texts = (r[3], r[4], r[6], r[9], text)  # what decoding reads (a Charge checks no type)
            if texts not in good:
                self._decode(r)  # raises, as rows() would, for a row that cannot be decoded
                if len(good) >= _DECODES_SIZE:
                    good.clear()
                good.add(texts)
            out.append((int(r[0]), str(r[8]), str(text)))
        return out

    def _checked_rows(self, after: int, verify: bool, expect: str | None = None) -> list[tuple[Any, ...]]:
        """:meth:`rows` as stored (tuples of their columns), the chain checked if ``verify``;
        ``expect``: as :meth:`prices_after`."""
        with self._sql("reading rows"):
            if expect is not None:
                self._expect_at(after, self._hash_or_none(after), expect)
            raw = self._raw_rows(after)
            if verify:
                if self._key_problem is not None:
                    raise LedgerIntegrityError(f"{self._key_problem} (or read with verify=False)")
                prev = self.genesis() if after == 0 else self._hash_at(after)
                problems = self._check(raw, prev, after, self._key, self._checkpoint_texts(after), contents=True)
                if problems:
                    raise LedgerIntegrityError(f"ledger {self.path!r}: {problems[0]}")
        return raw

    def replay(self, accountant: Accountant) -> Accountant:
        """Compose every charged event, in order, into ``accountant`` (after verifying the
        chain); returns it. Raises UnsupportedEventError if it cannot take some event."""
        for row in self.rows():
            accountant.compose(row.charge.event)
        return accountant

    def _raw_rows(self, after: int) -> list[tuple[Any, ...]]:
        """The stored rows with seq > ``after``, in order, as tuples of their columns."""
        return cast(
            list[tuple[Any, ...]], self._db.execute(f"{self._select} WHERE seq > ? ORDER BY seq", (after,)).fetchall()
        )

    def _seq_of_hash(self, digest: str) -> int | None:
        """The seq of the row whose hash is ``digest``, None if there is none."""
        row = self._db.execute("SELECT seq FROM charges WHERE hash = ?", (digest,)).fetchone()
        return None if row is None else int(row[0])

    def _hash_or_none(self, seq: int) -> str | None:
        if seq == 0:
            return self.genesis()
        try:
            return self._hash_at(seq)
        except LedgerIntegrityError:
            return None

    def _expect_at(self, seq: int, found: str | None, expect: str) -> None:
        if found != expect:
            raise LedgerRowsLostError(
                f"ledger {self.path!r}: row {seq} is {'gone' if found is None else 'another row'} since it was "
                f"read (rows committed but not flushed when the server crashed); read it again from row 1"
            )

    def _hash_at(self, seq: int) -> str:
        row = self._db.execute("SELECT hash FROM charges WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise LedgerIntegrityError(f"ledger {self.path!r}: row {seq} is missing")
        return str(row[0])

    def _checkpoint_texts(self, after: int) -> dict[int, str]:
        """The stored state of every checkpoint after row ``after`` (each row's hash covers
        its checkpoint's), by row."""
        if not self.priced:
            return {}
        found = self._db.execute("SELECT seq, state FROM checkpoints WHERE seq > ?", (after,)).fetchall()
        return {int(seq): str(state) for seq, state in found}

    @staticmethod
    def _check(
        raw: list[tuple[Any, ...]],
        prev: str,
        after: int,
        key: bytes | None,
        states: Mapping[int, str],
        *,
        contents: bool,
    ) -> list[str]:
        problems = []
        expected_seq = after
        for r in raw:
            seq, ts, mech, params, event, label, rnd, prev_hash, digest = r[:9]
            expected_seq += 1
            if seq != expected_seq:
                problems.append(f"row {expected_seq} is missing (next row is {seq})")
                expected_seq = seq
            if prev_hash != prev:
                problems.append(f"row {seq}: prev_hash does not match the previous row's hash")
            state = states.get(seq)
            priced = (*r[9:], *(() if state is None else (state,)))
            if contents and _row_hash(key, prev_hash, seq, ts, mech, params, event, label, rnd, *priced) != digest:
                what = "contents do not match" if state is None else "contents or checkpoint do not match"
                problems.append(f"row {seq}: {what} its hash (edited)")
            prev = digest
        return problems

    def verify(self, expect_head: str | None = None) -> list[str]:
        """Every integrity problem found (empty list: the chain is intact and, if given,
        ``expect_head`` -- ``"SEQ:HASH"`` or the hash alone, an earlier :func:`format_head`
        of this ledger -- is still in it at its row). Reads the whole table."""
        anchor = parse_head(expect_head) if expect_head is not None else None
        problems = [self._key_problem] if self._key_problem is not None else []
        contents = self._key_problem is None
        with self._sql("verifying"):
            raw = self._raw_rows(0)
            problems += self._check(raw, self.genesis(), 0, self._key, self._checkpoint_texts(0), contents=contents)
            if anchor is not None:
                problems += self._anchor_problems(*anchor)
        return problems

    def scan(
        self, *, after: int = 0, expect_head: str | None = None, name: str = "expect_head"
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """``(problems, raw rows)`` in one read: the integrity problems of row ``after``
        (whose hash covers the checkpoint stored with it) and the rows after it, and of the
        anchor ``expect_head`` (given as argument ``name``), and the rows after ``after`` as
        stored (:meth:`decode` them). What verification reads, once."""
        anchor = parse_head(expect_head, name) if expect_head is not None else None
        problems = [self._key_problem] if self._key_problem is not None else []
        start = max(0, after - 1)  # row `after` too: its hash covers the checkpoint stored with it
        with self._sql("verifying"):
            raw = self._raw_rows(start)
            prev = self.genesis() if start == 0 else self._hash_at(start)
            texts = self._checkpoint_texts(start)
            problems += self._check(raw, prev, start, self._key, texts, contents=self._key_problem is None)
            if anchor is not None:
                problems += self._anchor_problems(*anchor)
        return problems, [r for r in raw if r[0] > after]

    def decode(self, raw: list[tuple[Any, ...]]) -> list[LedgerRow]:
        """Rows from :meth:`scan`, decoded (LedgerIntegrityError for one that cannot be)."""
        return [self._decode(r) for r in raw]

    def verify_from(self, seq: int, *, expect_head: str, name: str = "expect_head") -> list[str]:
        """Integrity problems of row ``seq`` (whose hash covers the checkpoint stored with
        it, where an incremental verification starts) and the rows after it, chained from
        row ``seq - 1``'s hash, and of the anchor ``expect_head``, which must be at or after
        ``seq``: an incremental check whose cost is the rows since, trusting what the anchor
        covers."""
        anchor = parse_head(expect_head, name)
        if anchor[0] is not None and anchor[0] < seq:
            raise PrivregValueError(f"the anchor {expect_head!r} is before row {seq}; verify from an earlier row")
        problems = [self._key_problem] if self._key_problem is not None else []
        contents = self._key_problem is None
        with self._sql("verifying"):
            after = max(0, seq - 1)
            raw = self._raw_rows(after)
            prev = self.genesis() if after == 0 else self._hash_at(after)
            problems += self._check(raw, prev, after, self._key, self._checkpoint_texts(after), contents=contents)
            problems += self._anchor_problems(*anchor)
        return problems

    def _anchor_problems(self, seq: int | None, digest: str) -> list[str]:
        head_seq, head_hash = self.head()
        if digest == self.genesis():
            found: int | None = 0
        else:
            found = self._seq_of_hash(digest)
        shown = format_head((seq, digest[:16] + "...")) if seq is not None else digest[:16] + "..."
        if found is not None:
            if seq is None or seq == found:
                return []  # the anchored row is still there; later rows were appended since
            return [f"expected head {shown}: that hash is now row {found}: the chain was rewritten"]
        if seq is not None and seq > head_seq:
            return [
                f"expected head {shown} is gone: rows after {head_seq} were removed (the ledger "
                f"now ends at row {head_seq}; truncated or rolled back)"
            ]
        if seq is not None:
            return [
                f"expected head {shown}: row {seq} now has hash {self._hash_at(seq)[:16]}...: "
                f"the chain was rewritten at or before row {seq}"
            ]
        return [
            f"expected head {shown} is not in the chain (which ends at row {head_seq}, "
            f"{head_hash[:16]}...): rows were removed or the chain was rewritten"
        ]

    def _decode(self, r: tuple[Any, ...]) -> LedgerRow:
        # events repeat across rows and are immutable: decode each distinct text once
        seq, ts, mech, params, event, label, rnd, prev_hash, digest = r[:9]
        stated, prices = r[9:] if len(r) > 9 else ("", None)
        try:
            charge = Charge(
                timestamp=ts,
                mechanism=mech,
                parameters={} if params == "{}" else json.loads(params),
                event=_event_from_json(event),
                label=label,
                randomness={} if rnd == "{}" else json.loads(rnd),
                stated=_event_from_json(stated) if stated else None,
            )
            decoded = None if prices is None else stored_prices(prices)
        except (ValueError, TypeError) as exc:
            raise LedgerIntegrityError(f"ledger {self.path!r}: row {seq} cannot be decoded: {exc}") from exc
        return LedgerRow(seq=seq, charge=charge, prev_hash=prev_hash, hash=digest, prices=decoded)
