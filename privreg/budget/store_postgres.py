"""The ledger on PostgreSQL: one budget shared by analysts on any number of machines.

A budget named ``NAME`` lives in schema ``privreg_NAME`` of a database, in the same
tables as the SQLite ledger (``meta``, ``charges``, ``checkpoints``, ``runs``), so the
rows, stored prices, checkpoints and hash chain are those of :class:`Ledger`, and
reading, decoding and verifying them is :class:`Ledger`'s code. URLs name it as
``postgresql://[user@]host[:port]/db[?host=/socket/dir]#NAME``.

Admission: a session prices a charge under every filter on the rows it knows, outside
any lock, and calls the schema's ``append`` function: one round trip, one transaction,
which locks the budget's rows against other appenders (``LOCK TABLE ... SHARE ROW
EXCLUSIVE``: readers never wait) and appends only if the head is still the row the
session priced after. Two sessions that both read row ``n`` cannot both append row
``n + 1``, on any number of machines, so no interleaving overspends. When the head moved,
the call writes nothing and returns the rows the session missed; the session then takes
its *turn* (``wait_turn``: a PostgreSQL advisory lock, waiters blocked in the server,
first come first served, released by the server when the connection ends), which returns
the rows appended since, decides again on them (each distinct stored price text decoded
once) and appends; that append gives the turn back as its transaction ends, so the next
writer wakes once, to a ledger holding it. On an unkeyed chain the turn's rows are seq,
hash and prices only (a repeated price text sent once): the server checked each row's
hash, chaining and prices as it appended it, and a catch-up reads nothing else; a keyed
chain's come whole, their HMACs checked by the session.

Admission in the server: a writer that others outpace (its last charge found rows it had
not read) sends its charge to ``append_within`` instead, priced and decided on the rows it
knows, with the *room* its vouching filter leaves (:meth:`~privreg.budget.filters.Filter.room`:
how much others' releases may add to each of its totals while it still vouches). In one
transaction, after any writer in its turn, the server appends the row after the head,
chained and hashed as the session would (unkeyed chains only), if the rows since the
writer's state add at most that room to that filter (summed exactly, as numerics), kill
none of the filters alive for the writer, and add nothing to a total one of its prices
depends on (a pair filter's delta); and if no checkpoint is due. Then its release is
admitted by a filter that vouches after every row, and each of its prices is the one a
replay derives: exactly what a session that had read every row admits. Else nothing is
written and the writer takes its turn. No round trip to the writer inside the lock, and
the row's own checks (``check_row``, its price) run before it: under contention most
charges take this path (952 of 1,000 in the race test). An append out of turn yields to a
writer in its turn, so no writer waits for ever; a writer that found others ahead of it
waits for its turn before pricing its next charge.

Durability outside the turn: an append in a turn commits without waiting for the WAL
flush (``synchronous_commit`` off for its transaction alone), so the next writer's turn
does not wait for the disk; the writer then flushes (a transaction that writes one WAL
record and commits synchronously flushes the WAL past every earlier commit) before the
charge returns, and so before anything is released. Flushes of writers in a row share the
disk's syncs. A server crash can then take rows committed but not yet flushed -- never a
released one -- which other sessions may have read: each session chains its append on
the hash of the row its filters hold last (:meth:`PostgresLedger.try_append_after`), so
it can only append after that very row, and reads the ledger again from row 1 when that
row is gone (:class:`~privreg.budget.ledger.LedgerRowsLostError`).

Faults: a connection lost during ``append`` (server restart, network) leaves the outcome
unknown to the client; the store reconnects, ends its old server process if it is still
running (so that its transaction cannot commit later), and looks the row up by its hash:
found (after a flush on the new connection), the charge stands; not found, nothing was
written and the session decides again.
Neither case charges twice or loses a charge. A client killed mid-transaction leaves
nothing: the server rolls its transaction back.

Trust model, enforced by the server (:func:`schema_sql`, :func:`grant_sql`):

- the **owner** (the role that ran ``privreg ledger init``) owns the schema;
- an **analyst** reads the ledger and appends only through ``append`` and
  ``append_within`` (and waits for its turn through ``wait_turn``; all ``SECURITY
  DEFINER``): no INSERT, UPDATE or DELETE on the tables;
- an **auditor** reads only;
- triggers refuse every UPDATE, DELETE and TRUNCATE of ``charges``, ``checkpoints``,
  ``meta``, ``requests`` (which ``append_within`` call wrote which row) and ``runs`` (a
  run's end is recorded once), whoever asks, even a role granted
  too much by mistake. Only the schema's owner or a superuser can drop them;
  :meth:`PostgresLedger.deployment_problems` (part of verification) reports missing or
  disabled triggers and every role other than the owner that may write the tables directly.

What an analyst appends is checked by the server first (``check_row``, called at the top
of ``append``), since a row no session can read back makes every session on the budget
refuse: JSON fields that do not parse or are not of their kind (parameters, randomness
and checkpoint state objects, events objects with a kind), a price for every filter of
the rule as a session reads it (its width, non-negative numbers or ``{"unsupported": ...}``),
hashes of 64 lowercase hex digits, row 1 and the first checkpoint after the genesis, a
timestamp below 1e15 s, and, on an unkeyed chain, the row's and the checkpoint's hashes
recomputed from the same text (the server holds no HMAC key: a keyed chain's hashes are
the key holders' to check). The server cannot decode events (their kinds and fields are
privreg's), nor re-price a row: a session takes a row's stored prices as they are, so an
analyst who misprices her own release under-charges it (as leaving it uncharged would) or
spends the budget faster (as an honest large release would), and one who sends
``append_within`` a room her filter does not leave has her release admitted beyond the
budget (as an uncharged one would be); verification re-prices every row, re-derives every
decision, and flags a stored price that differs and a release the budget should have refused.

What the chain cannot show on SQLite (a full rewrite by someone able to recompute it) it
cannot show here either; the roles make it the owner's or a superuser's act, not an
analyst's. Keep anchors (``privreg ledger verify --expect-head``) where the owner cannot
change them. psycopg 3 is the client, imported only when a URL is opened (``pip install
'privreg[postgres]'``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType, TracebackType
from typing import Any, cast

from privreg.budget.filters import FILTERS
from privreg.budget.ledger import (
    EncodedPrices,
    Ledger,
    LedgerBusyError,
    LedgerError,
    LedgerFormatError,
    LedgerIntegrityError,
    LedgerRow,
)
from privreg.budget.store import is_postgres_url
from privreg.core.charging import Charge
from privreg.core.errors import PrivregError, PrivregValueError

__all__ = [
    "PostgresLedger",
    "parse_url",
    "schema_of",
    "schema_sql",
    "grant_sql",
    "run_turn",
    "APPEND_ARGS",
    "WITHIN_ARGS",
]

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,54}")
_LEDGER_TABLES = ("charges", "checkpoints", "meta", "requests", "runs")  # append-only
#: The argument types of a budget's ``append`` function, as GRANT names it.
APPEND_ARGS = (
    "bigint, double precision, text, text, text, text, text, text, text, text, text, text, text, text, boolean"
)
#: The argument types of a budget's ``append_within`` function, as GRANT names it.
WITHIN_ARGS = (
    "bigint, text, double precision, text, text, text, text, text, text, text, text, text[], jsonb, bigint, text"
)
_RUN_END_ARGS = "text, double precision, text, bigint"
#: What ``append`` and ``wait_turn`` return: whether it appended, then rows as stored
#: (with the state of the checkpoint at each row, if any).
_RESULT = (
    "r_appended boolean, r_seq bigint, r_timestamp double precision, r_mechanism text, r_parameters text, "
    "r_event text, r_label text, r_randomness text, r_prev_hash text, r_hash text, r_stated text, "
    "r_prices text, r_state text"
)
_APPEND_CALL = "SELECT * FROM append(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_WITHIN_CALL = "SELECT * FROM append_within(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_ROWS_FROM = (
    "c.seq, c.timestamp, c.mechanism, c.parameters, c.event, c.label, c.randomness, c.prev_hash, c.hash, "
    "c.stated, c.prices, k.state FROM charges c LEFT JOIN checkpoints k ON k.seq = c.seq WHERE c.seq >="
)


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise PrivregError(
            "a ledger on PostgreSQL needs psycopg 3, which is not installed: pip install 'privreg[postgres]'"
        ) from None
    return psycopg


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def parse_url(url: str, option: str = "ledger") -> tuple[str, str, str]:
    """``(conninfo, budget name, URL shown in messages)`` of ``postgresql://...#NAME``;
    the shown URL has no password. ``option``: the argument it came from, for errors."""
    if not is_postgres_url(url):
        raise PrivregValueError(f"{option} {url!r} is not a PostgreSQL URL: give postgresql://HOST/DB#BUDGET")
    conninfo, _, name = url.partition("#")
    parts = urllib.parse.urlsplit(conninfo)
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k.lower() != "password"]
    query_text = urllib.parse.urlencode(query, safe="/")
    shown = f"{parts.scheme}://{user + '@' if user else ''}{netloc[2]}{parts.path}" + (
        f"?{query_text}" if query_text else ""
    )
    if not name:
        raise PrivregValueError(
            f"{option} {shown!r} names no budget: add #NAME, e.g. {shown}#adult-2026 "
            f"(create it with 'privreg ledger init {shown}#adult-2026 --epsilon E')"
        )
    if _NAME.fullmatch(name) is None:
        raise PrivregValueError(
            f"{option}: budget name {name!r} must be 1 to 55 lowercase letters, digits, '-' or '_', "
            f"starting with a letter or digit (e.g. adult-2026)"
        )
    return conninfo, name, f"{shown}#{name}"


def schema_of(name: str) -> str:
    """The schema holding budget ``name``."""
    return f"privreg_{name}"


def schema_sql(schema: str) -> list[str]:
    """The statements creating a budget's schema: tables as in the SQLite ledger, the
    append-only triggers, the ``append`` and ``record_run_end`` functions (``SECURITY
    DEFINER``: they run with the owner's rights, the only way an analyst writes), the
    ``wait_turn`` function (the writers' queue), and no
    right for anyone else until :func:`grant_sql`."""
    s = _ident(schema)
    out = [
        f"CREATE SCHEMA {s}",
        f"CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE {s}.charges (
            seq BIGINT PRIMARY KEY CHECK (seq > 0),
            timestamp DOUBLE PRECISION NOT NULL,
            mechanism TEXT NOT NULL,
            parameters TEXT NOT NULL,
            event TEXT NOT NULL,
            label TEXT NOT NULL,
            randomness TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL UNIQUE,
            stated TEXT NOT NULL,
            prices TEXT NOT NULL)""",
        f"""CREATE TABLE {s}.checkpoints (
            seq BIGINT PRIMARY KEY REFERENCES {s}.charges (seq),
            state TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL)""",
        f"""CREATE TABLE {s}.runs (
            id TEXT PRIMARY KEY, ended DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, releases BIGINT NOT NULL)""",
        # which append_within call wrote which row: its outcome, after a lost connection
        f"CREATE TABLE {s}.requests (id TEXT PRIMARY KEY, seq BIGINT NOT NULL)",
        f"""CREATE FUNCTION {s}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $f$
        BEGIN
            RAISE EXCEPTION 'privreg ledger %: % on table % refused: its rows are append-only',
                TG_TABLE_SCHEMA, TG_OP, TG_TABLE_NAME
                USING HINT = 'a ledger is never edited; charges are appended through append()';
        END $f$""",
    ]
    for table in _LEDGER_TABLES:  # per statement: refused even when no row would change
        out.append(
            f"CREATE TRIGGER append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {s}.{table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse_change()"
        )
        # ALWAYS: also under session_replication_role = replica, which skips ordinary triggers
        out.append(f"ALTER TABLE {s}.{table} ENABLE ALWAYS TRIGGER append_only")
    out += _check_sql(schema)
    out += [
        # identifiers come from a checked budget name, quoted: no SQL is built from data
        f"""CREATE FUNCTION {s}.append(
            p_seq bigint, p_timestamp double precision, p_mechanism text, p_parameters text, p_event text,
            p_label text, p_randomness text, p_prev_hash text, p_hash text, p_stated text, p_prices text,
            p_state text, p_cp_prev text, p_cp_hash text, p_in_turn boolean)
        RETURNS TABLE ({_RESULT})
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {s}, pg_temp AS $f$
        DECLARE
            head_seq bigint;
            head_hash text;
            cp_last text;
        BEGIN
            PERFORM check_row(p_seq, p_timestamp, p_mechanism, p_parameters, p_event, p_label, p_randomness,
                p_prev_hash, p_hash, p_stated, p_prices, p_state, p_cp_prev, p_cp_hash);
            -- a writer out of turn yields to one in its turn (no one waits for ever)
            IF NOT p_in_turn AND NOT pg_try_advisory_lock({_lock_id(schema, "turn")}) THEN
                RETURN QUERY SELECT false, {_ROWS_FROM} p_seq - 1 ORDER BY c.seq;
                RETURN;
            END IF;
            -- one appender at a time on this budget (readers never wait); each statement
            -- after the lock reads what committed before it (READ COMMITTED)
            LOCK TABLE charges IN SHARE ROW EXCLUSIVE MODE;
            SELECT c.seq, c.hash INTO head_seq, head_hash FROM charges c ORDER BY c.seq DESC LIMIT 1;
            IF coalesce(head_seq, 0) <> p_seq - 1 OR (head_seq IS NOT NULL AND head_hash <> p_prev_hash) THEN
                IF NOT p_in_turn THEN
                    PERFORM pg_advisory_unlock({_lock_id(schema, "turn")});
                END IF;
                -- the head moved since the caller priced: nothing written; the caller gets
                -- row p_seq - 1 and the rows after it, to decide again on
                RETURN QUERY SELECT false, {_ROWS_FROM} p_seq - 1 ORDER BY c.seq;
                RETURN;
            END IF;
            IF p_in_turn THEN
                -- the turn passes at commit; the caller flushes the WAL before it releases
                PERFORM set_config('synchronous_commit', 'off', true);
            END IF;
            INSERT INTO charges VALUES (p_seq, p_timestamp, p_mechanism, p_parameters, p_event, p_label,
                p_randomness, p_prev_hash, p_hash, p_stated, p_prices);
            IF p_state IS NOT NULL THEN
                SELECT k.hash INTO cp_last FROM checkpoints k ORDER BY k.seq DESC LIMIT 1;
                IF cp_last IS NOT NULL AND cp_last <> p_cp_prev THEN
                    RAISE EXCEPTION 'privreg ledger %: the checkpoint does not follow the last one', {_lit(schema)};
                END IF;
                INSERT INTO checkpoints VALUES (p_seq, p_state, p_cp_prev, p_cp_hash);
            END IF;
            -- the caller's turn ends with its append (one round trip less), once it commits: the
            -- transaction's hold on the turn outlives the session's, so the next writer wakes
            -- once, to a ledger holding this row
            PERFORM pg_advisory_xact_lock({_lock_id(schema, "turn")});
            PERFORM pg_advisory_unlock({_lock_id(schema, "turn")});
            RETURN QUERY SELECT true, p_seq, NULL::double precision, NULL::text, NULL::text, NULL::text,
                NULL::text, NULL::text, NULL::text, p_hash, NULL::text, NULL::text, NULL::text;
        END $f$""",  # noqa: S608
        f"""CREATE FUNCTION {s}.within_price(t text, p_filter text, p_width int, p_fixed jsonb) RETURNS numeric[]
        LANGUAGE plpgsql IMMUTABLE AS $f$
        DECLARE
            pj jsonb := t::jsonb;
            x jsonb;
            out numeric[];
        BEGIN
            -- a row's price for append_within: filter p_filter's, exactly (NULL: not a price it can
            -- count, or one that kills a filter alive for the caller or changes a total its
            -- prices depend on)
            IF NOT coalesce(jsonb_typeof(pj) = 'object' AND jsonb_typeof(pj -> p_filter) = 'array'
                    AND jsonb_array_length(pj -> p_filter) = p_width
                    AND NOT EXISTS (SELECT 1 FROM jsonb_each(p_fixed) z
                        WHERE jsonb_typeof(pj -> z.key) IS DISTINCT FROM 'array')
                    AND NOT EXISTS (SELECT 1 FROM jsonb_each(p_fixed) z, jsonb_array_elements_text(z.value) k
                        WHERE (pj -> z.key -> k::int) IS DISTINCT FROM '0'::jsonb), false) THEN
                RETURN NULL;
            END IF;
            FOR i IN 1 .. p_width LOOP
                x := pj -> p_filter -> (i - 1);
                IF jsonb_typeof(x) IS DISTINCT FROM 'number' THEN
                    RETURN NULL;
                END IF;
                out[i] := x::numeric;
            END LOOP;
            RETURN out;
        END $f$""",  # noqa: S608 (no data: a checked, quoted name)
        f"""CREATE FUNCTION {s}.append_within(
            p_after bigint, p_after_hash text, p_timestamp double precision, p_mechanism text, p_parameters text,
            p_event text, p_label text, p_randomness text, p_stated text, p_prices text, p_filter text,
            p_room text[], p_fixed jsonb, p_every bigint, p_id text)
        RETURNS TABLE (r_appended boolean, r_seq bigint, r_hash text, r_prices text)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {s}, pg_temp AS $f$
        DECLARE
            p_seq bigint;
            p_prev_hash text;
            p_state text;  -- no checkpoint: a row due one is appended in a turn
            ok boolean;
            whole text;
            v_hash text;
            t text;
            n bigint;
            vals numeric[];
            own numeric[];
            total numeric[];
        BEGIN
            -- admission with no round trip to the caller (the module docstring: in the server):
            -- the caller decided on rows up to p_after; the rows since add at most p_room to the
            -- totals of filter p_filter, which then still vouches, kill none of the filters alive
            -- for the caller (p_fixed's keys), and add nothing to a total its price depends on
            -- (p_fixed: filter -> indexes)
            IF current_setting('extra_float_digits')::int < 1 THEN
                PERFORM set_config('extra_float_digits', '1', true);
            END IF;
            -- what the row says, checked before the lock (it does not depend on where the row
            -- goes): at the place the caller read, hashed as it would be there
            p_seq := p_after + 1;
            p_prev_hash := p_after_hash;
            whole := {_ROW_TEXT};
            v_hash := {_HASHED};
            PERFORM check_row(p_seq, p_timestamp, p_mechanism, p_parameters, p_event, p_label, p_randomness,
                p_prev_hash, v_hash, p_stated, p_prices, NULL, NULL, NULL);
            IF cardinality(p_room) > 0 THEN  -- the rows since mostly repeat the caller's prices
                own := within_price(p_prices, p_filter, cardinality(p_room), p_fixed);
            END IF;
            PERFORM pg_advisory_xact_lock({_lock_id(schema, "turn")});  -- after any writer in its turn
            LOCK TABLE charges IN SHARE ROW EXCLUSIVE MODE;
            SELECT c.seq, c.hash INTO p_seq, p_prev_hash FROM charges c ORDER BY c.seq DESC LIMIT 1;
            -- NULL anywhere refuses (IS NOT TRUE below): an argument missing admits nothing
            ok := p_seq IS NOT NULL AND CASE WHEN p_every > 0 THEN (p_seq + 1) % p_every <> 0 END
                AND p_seq - p_after < 1000000
                AND cardinality(p_room) > 0 AND p_fixed ? p_filter
                AND NOT EXISTS (SELECT 1 FROM meta WHERE key = 'chain' AND value <> '"sha256"')
                AND EXISTS (SELECT 1 FROM charges c WHERE c.seq = p_after AND c.hash = p_after_hash);
            -- each distinct prices text of the rows since once (releases repeat), in exact numeric
            FOR t, n IN SELECT c.prices, count(*) FROM charges c WHERE ok AND c.seq > p_after GROUP BY c.prices LOOP
                vals := CASE WHEN t = p_prices AND own IS NOT NULL THEN own
                    ELSE within_price(t, p_filter, cardinality(p_room), p_fixed) END;
                ok := vals IS NOT NULL;
                EXIT WHEN NOT ok;
                FOR i IN 1 .. cardinality(p_room) LOOP
                    total[i] := coalesce(total[i], 0) + n * vals[i];
                END LOOP;
            END LOOP;
            IF ok IS TRUE THEN
                FOR i IN 1 .. cardinality(p_room) LOOP
                    ok := coalesce(total[i], 0) <= p_room[i]::numeric;
                    EXIT WHEN ok IS NOT TRUE;
                END LOOP;
            END IF;
            IF ok IS NOT TRUE THEN
                RETURN QUERY SELECT false, NULL::bigint, NULL::text, NULL::text;
                RETURN;
            END IF;
            -- the next writer does not wait for the disk; the caller flushes before it releases
            PERFORM set_config('synchronous_commit', 'off', true);
            p_seq := p_seq + 1;
            IF p_seq <> p_after + 1 THEN  -- others appended since: chained after the head
                whole := {_ROW_TEXT};
                v_hash := {_HASHED};
            END IF;
            INSERT INTO charges VALUES (p_seq, p_timestamp, p_mechanism, p_parameters, p_event, p_label,
                p_randomness, p_prev_hash, v_hash, p_stated, p_prices);
            INSERT INTO requests VALUES (p_id, p_seq);
            -- the rows the caller folds: those since p_after, its own last (prices NULL: the row before's)
            RETURN QUERY SELECT true, c.seq, c.hash,
                CASE WHEN c.prices = lag(c.prices) OVER (ORDER BY c.seq) THEN NULL ELSE c.prices END
                FROM charges c WHERE c.seq > p_after ORDER BY c.seq;
        END $f$""",  # noqa: S608
        f"""CREATE FUNCTION {s}.wait_turn(p_after bigint, p_lean boolean DEFAULT false) RETURNS TABLE ({_RESULT})
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {s}, pg_temp AS $f$
        BEGIN
            -- the turn: writers queue here, blocked in the server, first come first served; an
            -- append gives it back as its transaction ends, so row p_after and the rows after it
            -- are all committed
            PERFORM pg_advisory_lock({_lock_id(schema, "turn")});
            IF p_lean THEN
                -- what a catch-up on an unkeyed chain reads (append checked the rest): seq, hash
                -- and prices, NULL where a row's prices are the row before's (releases repeat)
                RETURN QUERY SELECT false, c.seq, NULL::double precision, NULL::text, NULL::text, NULL::text,
                    NULL::text, NULL::text, NULL::text, c.hash, NULL::text,
                    CASE WHEN c.prices = lag(c.prices) OVER (ORDER BY c.seq) THEN NULL ELSE c.prices END,
                    NULL::text FROM charges c WHERE c.seq >= p_after ORDER BY c.seq;
                RETURN;
            END IF;
            RETURN QUERY SELECT false, {_ROWS_FROM} p_after ORDER BY c.seq;
        END $f$""",  # noqa: S608
        f"""CREATE FUNCTION {s}.record_run_end(p_id text, p_ended double precision, p_status text, p_releases bigint)
        RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, {s}, pg_temp AS $f$
            -- recorded once: a later call for the same run (anyone's) changes nothing
            INSERT INTO runs VALUES (p_id, p_ended, p_status, p_releases) ON CONFLICT (id) DO NOTHING
        $f$""",  # noqa: S608
        f"REVOKE ALL ON SCHEMA {s} FROM PUBLIC",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM PUBLIC",
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {s} FROM PUBLIC",  # functions are PUBLIC by default
    ]
    return out


#: Each filter's price width (numbers per release), which a stored price must have.
_WIDTHS = {name: cls.width for name, cls in sorted(FILTERS.items())}


#: A row's text as privreg.budget.ledger hashes it, from append's arguments (an unkeyed
#: chain's hash is its sha256): _dumps of a str is to_json's text (quotes, backslashes and
#: control characters escaped as Python does), then json_ascii's where any character is
#: outside ' '..'~'.
_ROW_TEXT = (
    "p_prev_hash || '[' || p_seq || ',\"' || p_timestamp::text || CASE WHEN p_timestamp::text ~ '[.e]' THEN '' "
    "ELSE '.0' END || '\",' || to_json(p_mechanism)::text || ',' || to_json(p_parameters)::text || ',' "
    "|| to_json(p_event)::text || ',' || to_json(p_label)::text || ',' || to_json(p_randomness)::text || ',' "
    "|| to_json(p_stated)::text || ',' || to_json(p_prices)::text || coalesce(',' || to_json(p_state)::text, '') "
    "|| ']'"
)


#: The sha256 (hex) of ``whole``, a row's, checkpoint's or metadata's text, as
#: privreg.budget.ledger hashes it (json_ascii's text where any character is outside ' '..'~').
_HASHED = "encode(sha256(convert_to(CASE WHEN whole ~ '[^ -~]' THEN json_ascii(whole) ELSE whole END, 'UTF8')), 'hex')"


def _check_sql(schema: str) -> list[str]:
    """``json_ascii`` and ``check_row``, which ``append`` calls first: it refuses a row a
    session could not read back, which would make every session on the budget refuse
    (see the module docstring)."""
    s, where = _ident(schema), _lit(schema)
    u = "chr(92) || 'u' || "  # a backslash and u: no escape in a literal (standard_conforming_strings)
    refuse = "USING ERRCODE = 'invalid_parameter_value'"
    hexed = "^[0-9a-f]{64}$"
    checkpoint_text = (
        "p_cp_prev || '[\"privreg-checkpoint-v1\",' || p_seq || ',\"' || p_hash || '\",' || to_json(p_state)::text "
        "|| ']'"
    )
    meta_text = """'privreg-ledger-v1{' || string_agg(to_json(key)::text || ':' || value, ',' ORDER BY key COLLATE "C")
                    || '}'"""
    price_ok = f"""CASE jsonb_typeof(pj -> f.name)
                        WHEN 'object' THEN jsonb_typeof(pj -> f.name -> 'unsupported') = 'string'
                            AND (SELECT count(*) FROM jsonb_object_keys(pj -> f.name)) = 1
                        WHEN 'array' THEN jsonb_array_length(pj -> f.name)
                                = ({_lit(json.dumps(_WIDTHS))}::jsonb ->> f.name)::int
                            AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(pj -> f.name) x
                                WHERE NOT CASE jsonb_typeof(x)
                                WHEN 'number' THEN x::numeric >= 0 WHEN 'string' THEN x = '"inf"' ELSE false END)
                        ELSE false END"""  # noqa: S608 (no data)
    return [
        # Python's json.dumps also escapes DEL and every non-ASCII character, as \\uXXXX
        f"""CREATE FUNCTION {s}.json_ascii(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $f$
            SELECT string_agg(CASE WHEN c ~ '[ -~]' THEN c
                WHEN ascii(c) < 65536 THEN {u}lpad(to_hex(ascii(c)), 4, '0')
                ELSE {u}to_hex(55296 + ((ascii(c) - 65536) >> 10)) || {u}to_hex(56320 + ((ascii(c) - 65536) & 1023))
                END, '' ORDER BY n)
            FROM pg_catalog.regexp_split_to_table(t, '') WITH ORDINALITY AS x(c, n)
        $f$""",  # noqa: S608 (no data: a checked, quoted name)
        f"""CREATE FUNCTION {s}.check_row(
            p_seq bigint, p_timestamp double precision, p_mechanism text, p_parameters text, p_event text,
            p_label text, p_randomness text, p_prev_hash text, p_hash text, p_stated text, p_prices text,
            p_state text, p_cp_prev text, p_cp_hash text)
        RETURNS void LANGUAGE plpgsql AS $f$
        DECLARE
            field text;
            kinds text[];
            pj jsonb;
            bad text;
            genesis text;
            whole text;
        BEGIN
            -- what every session reads back, refused here; the cause named, never a value
            IF p_seq IS NULL OR p_timestamp IS NULL OR p_mechanism IS NULL OR p_label IS NULL THEN
                RAISE EXCEPTION 'privreg ledger %: row refused: a field is missing', {where} {refuse};
            END IF;
            -- below 1e15, Python's repr and the server's shortest text of a float agree (the
            -- text extra_float_digits > 0 gives); run by append, under its search_path
            IF current_setting('extra_float_digits')::int < 1 THEN
                PERFORM set_config('extra_float_digits', '1', true);
            END IF;
            IF p_timestamp IN ('NaN', 'Infinity', '-Infinity') OR abs(p_timestamp) >= 1e15 THEN
                field := 'timestamp is not a time (seconds since 1970)';
            ELSIF NOT coalesce(p_prev_hash ~ '{hexed}', false) THEN
                field := 'prev_hash is not 64 lowercase hex digits';
            ELSIF NOT coalesce(p_hash ~ '{hexed}', false) THEN
                field := 'hash is not 64 lowercase hex digits';
            ELSIF p_state IS NOT NULL AND NOT coalesce(p_cp_prev ~ '{hexed}', false) THEN
                field := 'checkpoint''s prev_hash is not 64 lowercase hex digits';
            ELSIF p_state IS NOT NULL AND NOT coalesce(p_cp_hash ~ '{hexed}', false) THEN
                field := 'checkpoint''s hash is not 64 lowercase hex digits';
            END IF;
            IF field IS NOT NULL THEN
                RAISE EXCEPTION 'privreg ledger %: row % refused: its %', {where}, p_seq, field {refuse};
            END IF;
            BEGIN  -- JSON the server cannot parse, or numbers beyond its range
                field := 'parameters';
                kinds[1] := json_typeof(p_parameters::json);
                field := 'randomness';
                kinds[2] := json_typeof(p_randomness::json);
                field := 'event';
                kinds[3] := json_typeof(p_event::json -> 'kind');
                field := 'stated event';
                kinds[4] := CASE WHEN p_stated = '' THEN 'string' ELSE json_typeof(p_stated::json -> 'kind') END;
                field := 'checkpoint state';
                kinds[5] := CASE WHEN p_state IS NULL THEN 'object' ELSE json_typeof(p_state::json) END;
                field := 'prices';
                pj := p_prices::jsonb;
                kinds[6] := jsonb_typeof(pj);
                -- each filter's price as privreg.budget.filters.price_from_json and a session
                -- take it; {{}} (no prices): a session prices the row from its event; the text of
                -- the row before (checked as it was appended; releases repeat): no need again
                IF kinds[6] = 'object' AND pj <> '{{}}'
                        AND NOT EXISTS (SELECT 1 FROM charges c WHERE c.seq = p_seq - 1 AND c.prices = p_prices) THEN
                    SELECT f.name INTO bad
                    FROM meta m, jsonb_array_elements_text(m.value::jsonb -> 'filters') AS f(name)
                    WHERE m.key = 'rule' AND m.value::jsonb ->> 'kind' = 'filters' AND NOT coalesce({price_ok}, false)
                    LIMIT 1;
                    kinds[6] := coalesce('filter ' || bad, 'object');
                END IF;
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION 'privreg ledger %: row % refused: its % is not valid JSON', {where}, p_seq, field
                    {refuse};
            END;
            field := CASE WHEN kinds[1] IS DISTINCT FROM 'object' THEN 'parameters are not a JSON object'
                WHEN kinds[2] IS DISTINCT FROM 'object' THEN 'randomness is not a JSON object'
                WHEN kinds[3] IS DISTINCT FROM 'string' THEN 'event is not an event (an object with a kind)'
                WHEN kinds[4] IS DISTINCT FROM 'string' THEN 'stated event is not an event (an object with a kind)'
                WHEN kinds[5] IS DISTINCT FROM 'object' THEN 'checkpoint state is not a JSON object'
                WHEN kinds[6] LIKE 'filter %' THEN 'price for ' || kinds[6] || ' is missing or not a price'
                WHEN kinds[6] IS DISTINCT FROM 'object' THEN 'prices are not a JSON object' END;
            IF field IS NOT NULL THEN
                RAISE EXCEPTION 'privreg ledger %: row % refused: its %', {where}, p_seq, field {refuse};
            END IF;
            -- the genesis, row 1's and the first checkpoint's prev_hash: a hash of the metadata
            IF p_seq = 1 OR (p_state IS NOT NULL AND NOT EXISTS (SELECT 1 FROM checkpoints)) THEN
                SELECT {meta_text} INTO whole FROM meta;
                genesis := {_HASHED};
                IF p_seq = 1 AND p_prev_hash <> genesis THEN
                    field := 'prev_hash is not the budget''s genesis';
                ELSIF p_state IS NOT NULL AND p_cp_prev <> genesis THEN
                    field := 'checkpoint''s prev_hash is not the budget''s genesis';
                END IF;
            END IF;
            -- the hashes, as privreg.budget.ledger computes them; a keyed chain's (HMAC) need its
            -- key, which the server does not hold
            IF field IS NULL AND NOT EXISTS (SELECT 1 FROM meta WHERE key = 'chain' AND value = '"hmac-sha256"') THEN
                whole := {_ROW_TEXT};
                IF {_HASHED} <> p_hash THEN
                    field := 'hash is not the hash of its contents';
                ELSIF p_state IS NOT NULL THEN
                    whole := {checkpoint_text};
                    IF {_HASHED} <> p_cp_hash THEN
                        field := 'checkpoint''s hash is not the hash of its state';
                    END IF;
                END IF;
            END IF;
            IF field IS NOT NULL THEN
                RAISE EXCEPTION 'privreg ledger %: row % refused: its %', {where}, p_seq, field {refuse};
            END IF;
        END $f$""",  # noqa: S608 (no data: a checked, quoted name)
    ]


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _role(name: str, option: str) -> str:
    # no control character: a line break would end the SQL comment naming the role in the
    # printed script, and what follows would run as the owner
    if not isinstance(name, str) or not name or not name.isprintable() or len(name.encode()) > 63:
        raise PrivregValueError(
            f"{option} {name!r} is not a role name: give 1 to 63 bytes, no control characters, e.g. {option} alice"
        )
    return _ident(name)


def grant_sql(
    url: str, *, analysts: tuple[str, ...] = (), auditors: tuple[str, ...] = (), owners: tuple[str, ...] = ()
) -> str:
    """The SQL giving roles their part on budget ``url`` (``postgresql://.../db#NAME``):
    ``owners`` may create budgets in the database, ``analysts`` read it and append only
    through its ``append`` function, ``auditors`` read it. Run it as the budget's owner
    (``owners``: as the database's owner). The roles must exist (``CREATE ROLE alice LOGIN``)."""
    conninfo, name, shown = parse_url(url, "URL")
    s = _ident(schema_of(name))
    lines = [f"-- privreg ledger grant: roles of budget {name!r} ({shown}), schema {s}"]
    parts = urllib.parse.urlsplit(conninfo)
    query = dict(urllib.parse.parse_qsl(parts.query))
    db = query.get("dbname") or urllib.parse.unquote(parts.path.lstrip("/"))
    roles = [
        _role(r, f"--{kind}")
        for kind, rs in (("owner", owners), ("analyst", analysts), ("auditor", auditors))
        for r in rs
    ]
    if owners:
        if not db:
            raise PrivregValueError(f"URL {shown!r} names no database: give postgresql://HOST/DB#{name}")
        lines.append("-- owners: create budgets ('privreg ledger init'); run as the database's owner")
        lines += [f"GRANT CREATE ON DATABASE {_ident(db)} TO {_role(r, '--owner')};" for r in owners]
    for role in analysts:
        r = _role(role, "--analyst")
        lines += [
            f"-- analyst {role}: reads the ledger, appends only through {s}.append",
            f"GRANT USAGE ON SCHEMA {s} TO {r};",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r};",
            f"GRANT EXECUTE ON FUNCTION {s}.append({APPEND_ARGS}) TO {r};",
            f"GRANT EXECUTE ON FUNCTION {s}.wait_turn(bigint, boolean) TO {r};",
            f"GRANT EXECUTE ON FUNCTION {s}.append_within({WITHIN_ARGS}) TO {r};",
            f"GRANT EXECUTE ON FUNCTION {s}.record_run_end({_RUN_END_ARGS}) TO {r};",
        ]
    for role in auditors:
        r = _role(role, "--auditor")
        lines += [
            f"-- auditor {role}: reads only",
            f"GRANT USAGE ON SCHEMA {s} TO {r};",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r};",
        ]
    # any role that may connect can hold the budget's writers' turn and its run lock (advisory
    # locks): writers then wait busy_timeout and refuse; only the roles that need it should connect
    target = _ident(db) if db else "DB"
    lines += [
        "-- once per database, as its owner (PUBLIC may connect by default: any role could then hold",
        "-- the budget's locks, and every writer would wait and refuse), let only the roles connect:",
        f"--   REVOKE CONNECT ON DATABASE {target} FROM PUBLIC;",
    ] + [f"--   GRANT CONNECT ON DATABASE {target} TO {r};" for r in roles]
    return "\n".join(lines) + "\n"


def _lock_id(schema: str, what: str) -> int:
    """A 64-bit advisory lock key for ``what`` on budget ``schema``."""
    return int.from_bytes(hashlib.sha256(f"privreg:{what}:{schema}".encode()).digest()[:8], "big", signed=True)


#: How long a run waits for the run before it on the same budget (seconds), by default.
RUN_WAIT = 600.0


@contextmanager
def run_turn(url: str, *, waiting: str, timeout: float = RUN_WAIT) -> Iterator[None]:
    """Held for a whole ``privreg run`` on budget ``url``: runs on one budget take turns,
    on any machine (an advisory lock on a connection of its own; the server releases it
    if the run dies). ``waiting`` is printed on stderr while another run holds it; after
    ``timeout`` seconds of waiting, LedgerBusyError (any role that may connect can take
    the lock: see :func:`grant_sql`)."""
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 <= timeout < 1e6:
        raise PrivregValueError(f"timeout must be a number of seconds, 0 <= timeout < 1e6; got {timeout!r}")
    conninfo, name, shown = parse_url(url, "--ledger")
    pg = _Connection(conninfo, schema_of(name), readonly=False, busy_timeout=30.0, shown=shown)
    key = _lock_id(schema_of(name), "run")
    try:
        if not pg.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            print(f"privreg: {waiting}", file=sys.stderr, flush=True)
            pg.conn.execute(f"SET lock_timeout = {max(1, int(timeout * 1000))}")
            try:
                pg.conn.execute("SELECT pg_advisory_lock(%s)", (key,)).fetchall()
            except pg.psycopg.errors.LockNotAvailable:
                raise LedgerBusyError(
                    f"ledger {shown!r}: waited {timeout:g} s for the budget's run lock, held by another run "
                    f"charging it (or by any role that may connect to the database); retry when it has finished, "
                    f"or let only the budget's roles connect (see 'privreg ledger grant')"
                ) from None
        yield
    finally:
        pg.close()  # ends the session: the lock is released with it


def _first_line(exc: BaseException, conninfo: str) -> str:
    """The first line of ``exc``'s message, any password of ``conninfo`` masked."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    parts = urllib.parse.urlsplit(conninfo)
    userinfo = parts.netloc.rpartition("@")[0]
    secrets = [userinfo.partition(":")[2]] if ":" in userinfo else []
    secrets += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if k.lower() == "password"]
    for secret in sorted({x for s in secrets for x in (s, urllib.parse.unquote(s)) if x}, key=len, reverse=True):
        first = first.replace(secret, "***")
    return first


#: pg_trigger.tgtype of append_only: BEFORE (2), DELETE (8), UPDATE (16), TRUNCATE (32), per statement.
_TRIGGER_TYPE = 2 | 8 | 16 | 32


def _function_bodies(schema: str) -> dict[str, tuple[str, bool, list[str] | None]]:
    """``name -> (body, SECURITY DEFINER, settings as pg_proc.proconfig holds them)`` of
    each function :func:`schema_sql` creates."""
    out = {}
    for stmt in schema_sql(schema):
        if stmt.startswith("CREATE FUNCTION"):
            name = stmt[len(f"CREATE FUNCTION {_ident(schema)}.") :].partition("(")[0]
            head, body = stmt.split("$f$")[:2]
            settings = re.findall(r"\bSET (\w+) = (.+?)(?= SET \w+ = | AS$)", " ".join(head.split()))
            out[name] = (body, "SECURITY DEFINER" in head, [f"{k}={v}" for k, v in settings] or None)
    return out


#: Makes every commit before it durable: a transaction that writes a WAL record (an empty
#: logical message, read by no one) and commits synchronously flushes the WAL up to its
#: own commit, and so past every earlier one (the WAL is one sequence).
_FLUSH = "SELECT pg_logical_emit_message(true, 'privreg', ''), set_config('synchronous_commit', 'on', true)"


class _HeadMoved(Exception):
    """The append function found a newer head: nothing was written."""


class _Connection:
    """What :class:`Ledger`'s reads need of a connection (``execute(sql, params)`` with
    ``?`` placeholders, ``close()``, ``in_transaction``), on psycopg. A writer's connection
    is in autocommit (each statement its own READ COMMITTED transaction) and reconnects
    when the server went away, for up to ``busy_timeout`` seconds; a reader's holds one
    REPEATABLE READ snapshot, so that a verification reads one state of the ledger."""

    in_transaction = False
    #: close() was called (a lost connection is not closed: a writer reconnects)
    closed = False

    def __init__(self, conninfo: str, schema: str, *, readonly: bool, busy_timeout: float, shown: str) -> None:
        self.psycopg = _psycopg()
        self.conninfo, self.schema, self.readonly, self.shown = conninfo, schema, readonly, shown
        self.busy_timeout = busy_timeout
        self.conn: Any = None
        self.backend: tuple[int, Any] | None = None
        self.connect(deadline=time.monotonic())

    def connect(self, *, deadline: float) -> None:
        while True:
            try:
                conn = self.psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
                break
            except self.psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"ledger {self.shown!r}: cannot connect to the PostgreSQL server "
                        f"({_first_line(exc, self.conninfo)}); check the URL, that the server runs, and the "
                        f"role's password"
                    ) from None
                time.sleep(0.1)
            except self.psycopg.Error as exc:  # libpq cannot parse the URL: its message may quote the password
                raise PrivregValueError(
                    f"ledger {self.shown!r} is not a valid PostgreSQL URL ({_first_line(exc, self.conninfo)}); "
                    f"give postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB#BUDGET, with '%' in a password as %25"
                ) from None
        ms = int(self.busy_timeout * 1000)
        conn.execute(f"SET search_path = pg_catalog, {_ident(self.schema)}")  # built-ins cannot be shadowed
        conn.execute("SET default_transaction_isolation = 'read committed'")
        conn.execute(f"SET lock_timeout = {ms}")
        self.backend = conn.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        if self.readonly:
            conn.autocommit = False
            conn.isolation_level = self.psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        self.conn = conn

    def lost(self) -> bool:
        return self.conn is None or bool(self.conn.broken) or bool(self.conn.closed)

    def reconnect(self) -> None:
        """A new connection (waiting up to ``busy_timeout`` for the server), after ending
        the old one's server process if it still runs: its transaction can then no longer
        commit after we looked."""
        old = self.backend
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        self.connect(deadline=time.monotonic() + self.busy_timeout)
        if old is not None:
            self.conn.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
                old,
            ).fetchall()

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = (), *, retry: bool = True) -> Any:
        """Run ``sql`` (``?`` placeholders); a writer retries once on a new connection
        when the server went away (reads and locks only: ``retry=False`` for writes)."""
        sql = sql.replace("?", "%s")
        if self.conn is None:  # closed, or a reconnect found no server in time
            if self.closed or self.readonly:
                raise LedgerError(f"ledger {self.shown!r} is closed; open it again")
            self.reconnect()  # the server may be back: this writer carries on
        try:
            return self.conn.execute(sql, tuple(params))
        except self.psycopg.OperationalError:
            if not (retry and not self.readonly and self.lost()):
                raise
        self.reconnect()
        return self.conn.execute(sql, tuple(params))

    def close(self) -> None:
        self.closed = True
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _Errors:
    """:meth:`PostgresLedger._sql`: psycopg errors as privreg errors naming the ledger
    (the server's first line only: its details can quote values)."""

    __slots__ = ("doing", "ledger")

    def __init__(self, ledger: PostgresLedger, doing: str) -> None:
        self.ledger, self.doing = ledger, doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        psycopg = self.ledger._pg.psycopg
        if not isinstance(exc, psycopg.Error):
            return
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = f"ledger {self.ledger.path!r}"
        errors = psycopg.errors
        if isinstance(exc, errors.InsufficientPrivilege):
            raise LedgerError(
                f"{where}: the server refused {self.doing} ({first}); this role lacks the right: "
                f"ask the budget's owner ('privreg ledger grant')"
            ) from exc
        if isinstance(exc, errors.InvalidParameterValue) and first.startswith("privreg ledger"):
            raise LedgerError(f"{where}: the server refused {self.doing}: {first}") from exc  # check_row
        if isinstance(exc, (errors.LockNotAvailable, errors.QueryCanceled)):
            raise LedgerBusyError(
                f"{where}: waited more than {self.ledger.busy_timeout:g} s while {self.doing} ({first}); "
                f"retry later or pass a larger busy_timeout (the writers' turn is a lock any role that may "
                f"connect to the database can hold: see 'privreg ledger grant')"
            ) from exc
        if isinstance(exc, (errors.UndefinedTable, errors.InvalidSchemaName, errors.UndefinedFunction)):
            raise LedgerFormatError(
                f"{where} is not a complete privreg budget ({first}) while {self.doing}; create it with "
                f"'privreg ledger init' or check the URL"
            ) from exc
        if self.ledger._pg.lost():
            raise LedgerError(
                f"{where}: the connection to the server was lost while {self.doing} ({first}) and not "
                f"re-established within {self.ledger.busy_timeout:g} s; retry when the server is back"
            ) from exc
        raise LedgerError(f"{where}: PostgreSQL failed while {self.doing}: {first}") from exc


class PostgresLedger(Ledger):
    """The budget named in ``url`` (``postgresql://.../db#NAME``), created before with
    :meth:`create` (``privreg ledger init URL#NAME``). ``readonly``: read and verify only,
    in one snapshot. ``key``, ``busy_timeout``: as :class:`Ledger` (``busy_timeout`` bounds
    each wait for the turn, for the append lock, and for a lost server to come back)."""

    _pg: _Connection

    def __init__(
        self, url: str, *, key: bytes | None = None, busy_timeout: float = 30.0, readonly: bool = False
    ) -> None:
        conninfo, self.name, shown = parse_url(url)
        self._setup(shown, key=key, busy_timeout=busy_timeout, readonly=readonly)
        self.schema = schema_of(self.name)
        self._lock_id = _lock_id(self.schema, "turn")
        self._in_turn = False  # this connection holds the turn (a session advisory lock)
        self._held: list[tuple[Any, ...]] | None = None  # rows a conflicting append returned
        self._known: tuple[int, str] = (-1, "")  # (seq, hash) of the newest row we know
        # a turn on an unkeyed chain reads each row's seq, hash and prices only (see prices_after)
        self._lean = self._key is None
        self._pg = _Connection(conninfo, self.schema, readonly=readonly, busy_timeout=self.busy_timeout, shown=shown)
        self._db = cast(sqlite3.Connection, self._pg)  # duck-typed: execute(sql, params).fetchone/fetchall
        try:
            self._load()
            if readonly:
                self._check_reader_key()
            else:
                self._check_writer_key()
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(
        cls, url: str, *, meta: Mapping[str, Any], key: bytes | None = None, busy_timeout: float = 30.0
    ) -> PostgresLedger:
        """Create budget ``NAME`` of ``url`` with ``meta`` (format, budget, rule), in one
        transaction, owned by the connecting role; refused if it exists."""
        conninfo, name, shown = parse_url(url)
        probe = cls.__new__(cls)
        probe._setup(shown, key=key, busy_timeout=busy_timeout, readonly=False)
        full = probe._new_meta({**meta, "name": name})
        pg = _Connection(conninfo, schema_of(name), readonly=False, busy_timeout=busy_timeout, shown=shown)
        psycopg = pg.psycopg
        try:
            with pg.conn.transaction():
                for stmt in schema_sql(schema_of(name)):
                    pg.conn.execute(stmt)
                for k, value in full.items():
                    pg.conn.execute(
                        f"INSERT INTO {_ident(schema_of(name))}.meta VALUES (%s, %s)",  # noqa: S608 (a checked, quoted name)
                        (k, json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)),
                    )
        except psycopg.errors.DuplicateSchema:
            raise PrivregValueError(
                f"budget {name!r} exists already at {shown}; a budget is created once: choose a new name, or "
                f"charge it with 'privreg run WORKFLOW ... --ledger {shown}'"
            ) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            first = str(exc).strip().splitlines()[0]
            raise LedgerError(
                f"ledger {shown!r}: the server refused to create the budget ({first}); budgets are created by "
                f"an owner role (see 'privreg ledger grant --owner')"
            ) from None
        finally:
            pg.close()
        return cls(url, key=key, busy_timeout=busy_timeout)

    def _sql(self, doing: str) -> AbstractContextManager[None]:
        return _Errors(self, doing)

    def _tables(self) -> list[str]:
        with self._sql("reading its schema"):
            found = self._db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name",
                (self.schema,),
            ).fetchall()
        return [str(r[0]) for r in found]

    def _load(self) -> None:
        tables = self._tables()
        if not tables:
            raise PrivregValueError(
                f"ledger {self.path!r}: there is no budget {self.name!r} in this database (or this role may not "
                f"see it); create it with 'privreg ledger init {self.path} --epsilon E', or ask its owner for "
                f"'privreg ledger grant'"
            )
        missing = [t for t in ("meta", "charges", "checkpoints") if t not in tables]
        if missing:
            raise LedgerFormatError(f"ledger {self.path!r} is not a complete privreg budget: no {', '.join(missing)}")
        self.priced = True
        with self._sql("reading its metadata"):
            stored = self._db.execute("SELECT key, value FROM meta").fetchall()
            functions = self._db.execute(
                "SELECT p.proname, p.pronargs FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = ? AND p.proname IN ('append_within', 'wait_turn')",
                (self.schema,),
            ).fetchall()
        self._read_meta(stored)
        # a budget created before append_within and the lean turn existed is charged through
        # whole-row turns, as it was then
        self._lean = self._lean and ("wait_turn", 2) in functions
        self.admits_within = self._lean and any(name == "append_within" for name, _ in functions)

    #: A conflicting :meth:`try_append` returns the rows the caller missed (read with
    #: :meth:`rows` in the turn that follows, no query): a session prices on what it knows
    #: and catches up only then.
    catches_up_on_append = True
    #: Whether a session may start from the last checkpoint. Not here: any analyst writes
    #: checkpoints through ``append``, and the server cannot check a filter state, so one
    #: forged state would reset the budget for every session opened after it. Sessions
    #: replay the stored prices from row 1 instead (rows are immutable; an analyst can
    #: misprice only her own releases, which she could also leave uncharged).
    trusts_checkpoints = False
    #: Rows a session was given may be lost: appends in a turn commit asynchronously (each
    #: flushed before its caller releases), so a crash can take rows others read (never
    #: released ones). A session then chains its appends on the hash of the row its state holds
    #: (:meth:`try_append_after`) and reads again from row 1 when that row is gone.
    may_lose_rows = True
    #: Whether others appended while this writer last charged: its next charge then goes
    #: to the server's admission (:meth:`try_append_within`) or waits for the turn, not to
    #: price on rows it would surely miss.
    contended = False
    #: Whether :meth:`try_append_within` can admit a charge here: an unkeyed chain (the
    #: server hashes the row) on a budget that has the function.
    admits_within = False

    def _held_rows(self, after: int) -> list[tuple[Any, ...]] | None:
        """The rows after ``after`` that this writer's turn began with (or a conflicting
        append in it returned), if they reach back to row ``after``."""
        held = self._held
        if held is None or not self._in_turn or after > held[-1][0]:
            return None
        if held[0][0] > after and not (after == 0 and held[0][0] == 1):
            return None
        return [r for r in held if r[0] > after]

    def _hash_held(self, seq: int) -> str:
        return str(next(r[8] for r in cast(list[tuple[Any, ...]], self._held) if r[0] == seq))

    def head(self) -> tuple[int, str]:
        """:meth:`Ledger.head`; in a turn, the newest row its rows hold (an append that
        slipped in before it conflicts, and returns the rows again)."""
        held = self._held if self._in_turn else None
        if held is not None:
            return int(held[-1][0]), str(held[-1][8])
        head = super().head()
        self._known = head
        return head

    def prices_after(self, after: int, *, expect: str | None = None) -> list[tuple[int, str, str]] | None:
        """:meth:`Ledger.prices_after`; in a turn on an unkeyed chain, from the rows the turn
        began with (seq, hash and prices only: the server checked each row's hash against its
        contents, its chaining on the head, its JSON and its prices as it appended it)."""
        raw = self._held_rows(after) if self._lean else None
        if raw is None:
            return super().prices_after(after, expect=expect)
        if expect is not None:
            self._expect_at(after, self.genesis() if after == 0 else self._hash_held(after), expect)
        out = []
        for i, r in enumerate(raw, start=after + 1):
            text = r[10]
            if r[0] != i:
                raise LedgerIntegrityError(f"ledger {self.path!r}: row {i} is missing (next row is {r[0]})")
            if not text or text == "{}":  # priced from its event: rows() reads it in full
                return None
            out.append((i, str(r[8]), str(text)))
        return out

    def _checked_rows(self, after: int, verify: bool, expect: str | None = None) -> list[tuple[Any, ...]]:
        """:meth:`Ledger.rows` as stored; in a turn, from the rows it began with when they
        reach back to ``after`` and hold whole rows (their chain checked the same way)."""
        raw = self._held_rows(after)
        if raw is not None and any(r[1] is None for r in raw):  # a lean turn's: read them whole
            raw = None
        if raw is None:
            rows = super()._checked_rows(after, verify, expect)
            if rows:
                self._known = (int(rows[-1][0]), str(rows[-1][8]))
            return rows
        if expect is not None:
            self._expect_at(after, self.genesis() if after == 0 else self._hash_held(after), expect)
        if verify:
            if self._key_problem is not None:
                raise LedgerIntegrityError(f"{self._key_problem} (or read with verify=False)")
            prev = self.genesis() if after == 0 else self._hash_held(after)
            states = {int(r[0]): str(r[11]) for r in raw if r[11] is not None}
            problems = self._check([r[:11] for r in raw], prev, after, self._key, states, contents=True)
            if problems:
                raise LedgerIntegrityError(f"ledger {self.path!r}: {problems[0]}")
        return [r[:11] for r in raw]

    @contextmanager
    def turn(self) -> Iterator[None]:
        """This writer's turn among all writers of the budget, on any machine: a session
        advisory lock taken by the budget's ``wait_turn`` function (waiters block in the
        server, served in order), which returns the rows since the newest one this writer
        knows, so the catch-up in the turn reads nothing more. An append in the turn gives
        it back as it writes; else it is given back as the turn ends (the server releases
        it when the connection ends). Re-entrant within a thread."""
        self._writable()
        if not self._thread_lock.acquire(timeout=self.busy_timeout):
            raise LedgerBusyError(
                f"ledger {self.path!r}: another thread of this process held its turn for more than "
                f"{self.busy_timeout:g} s; retry later or pass a larger busy_timeout"
            )
        try:
            if self._turn_depth == 0 and not self._in_turn:
                self._take_turn()
            self._turn_depth += 1
            try:
                yield
            finally:
                self._turn_depth -= 1
                if self._turn_depth == 0:
                    self._end_turn()
        finally:
            self._thread_lock.release()

    def _take_turn(self) -> None:
        after = self._known[0]
        # rows a conflicting append returned just before: the turn's rows continue them
        earlier = self._held if self._held is not None and self._held[-1][0] == after else []
        self._held = None
        self._in_turn = True  # a session lock outlives a failed call: give it back below
        try:
            with self._sql("waiting for the budget's writers' turn"):
                if after < 0:  # nothing known yet: the turn alone
                    self._db.execute("SELECT pg_advisory_lock(?)", (self._lock_id,)).fetchall()
                    return
                if self._lean:
                    found = self._db.execute("SELECT * FROM wait_turn(?, ?)", (after, True)).fetchall()
                else:  # a keyed chain's whole rows; or a budget created with wait_turn(bigint) alone
                    found = self._db.execute("SELECT * FROM wait_turn(?)", (after,)).fetchall()
        except BaseException:
            with contextlib.suppress(PrivregError, self._pg.psycopg.Error):
                self._end_turn()
            raise
        self.contended = len(found) > 1  # rows since the newest one we knew
        if found:
            rows = [r[1:] for r in found]
            if self._lean:  # NULL prices: the row before's (the same text object: decoded once)
                text = None
                for i, r in enumerate(rows):
                    if r[10] is None:
                        rows[i] = (*r[:10], text, r[11])
                    text = rows[i][10]
            self._held = earlier[:-1] + rows
            self._known = (int(found[-1][1]), str(found[-1][9]))

    def _end_turn(self) -> None:
        """Give the turn back, if an append did not (one round trip)."""
        self._held = None
        if self._in_turn:
            self._in_turn = False
            if not self._pg.lost():
                with self._sql("ending its turn"):
                    self._pg.execute("SELECT pg_advisory_unlock(?)", (self._lock_id,), retry=False).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        raise LedgerError(
            f"ledger {self.path!r}: a budget on PostgreSQL is written only through try_append (its append function)"
        )
        yield self._db  # pragma: no cover -- a generator, for contextmanager

    def try_append(
        self,
        charge: Charge,
        *,
        expected_seq: int,
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow | None:
        """Append ``charge`` (with its prices and checkpoint) if the head is still row
        ``expected_seq``, in one call of the budget's ``append`` function (one round trip,
        one transaction); None (nothing written) if another writer appended since: the
        call returned the rows since ``expected_seq``, which the :meth:`turn` taken next
        continues. After a lost connection the outcome is read back (see the module
        docstring): never twice, never lost."""
        self._check_append(expected_seq)
        if self._known[0] == expected_seq:
            head = self._known
        elif self._held_rows(expected_seq) is not None:
            head = (expected_seq, self._hash_held(expected_seq))
        else:
            head = self.head()
            if head[0] != expected_seq:
                return None
        try:
            return self._append_after(head, charge, prices=prices, checkpoint=checkpoint)
        except _HeadMoved:
            return None

    def try_append_after(
        self,
        charge: Charge,
        *,
        head: tuple[int, str],
        prices: Mapping[str, Any] | None = None,
        checkpoint: Mapping[str, Any] | None = None,
    ) -> LedgerRow | None:
        """:meth:`try_append` after row ``head`` = ``(seq, hash)`` as the caller read it:
        nothing is written unless the ledger's head is that very row (rows may be lost in
        a crash and others appended in their place: see the module docstring)."""
        self._check_append(head[0])
        if self._known[0] == head[0]:
            known = self._known
        elif self._held_rows(head[0]) is not None:
            known = (head[0], self.genesis() if head[0] == 0 else self._hash_held(head[0]))
        else:
            known = self.head()
        if known != head:  # others appended, or the row the caller read is gone: its turn reads again
            return None
        try:
            return self._append_after(head, charge, prices=prices, checkpoint=checkpoint)
        except _HeadMoved:
            return None

    def _insert_row(self, values: tuple[Any, ...], state: str | None) -> None:
        seq, digest = values[0], values[8]
        link = (None, None) if state is None else self._checkpoint_link(seq, digest, state)
        in_turn = self._in_turn
        args = (*values, state, *link, in_turn)
        try:
            found = self._pg.execute(_APPEND_CALL, args, retry=False).fetchall()
            if in_turn and found and found[0][0]:  # committed in its turn, not yet durable: flush it now
                self._pg.execute(_FLUSH, retry=False).fetchall()
        except self._pg.psycopg.OperationalError:
            if not self._pg.lost():
                raise
            self._in_turn, self._held = False, None  # the server ended the turn with the connection
            self._pg.reconnect()  # ends the old server process first: its outcome is final
            self._pg.execute(_FLUSH, retry=False).fetchall()  # what committed before is durable, or gone
            written = self._db.execute("SELECT 1 FROM charges WHERE hash = ?", (digest,)).fetchone() is not None
            found = [(True,)] if written else []
        if found and found[0][0]:
            self._in_turn, self._held = False, None  # the append gave the turn back as it wrote
            self._known = (seq, digest)
            return
        self.contended = True
        self._held = [r[1:] for r in found] or None  # the rows since: decide again on them
        self._known = (int(found[-1][1]), str(found[-1][9])) if found else (-1, "")
        raise _HeadMoved

    def try_append_within(
        self,
        charge: Charge,
        *,
        head: tuple[int, str],
        prices: EncodedPrices,
        filter_name: str,
        room: tuple[float, ...],
        fixed: Mapping[str, list[int]],
        every: int,
    ) -> tuple[LedgerRow, list[tuple[int, str, str]]] | None:
        """Append ``charge`` with ``prices`` (priced on the rows up to ``head`` = ``(seq,
        hash)``, as the caller read them) through the budget's ``append_within``, in one
        round trip (then a flush, before it returns), whatever others appended since
        ``head``, provided the server finds that those rows (a) add at most ``room`` to
        filter ``filter_name``'s totals (the caller found that it still vouches for the
        release then: :meth:`~privreg.budget.filters.Filter.room`), (b) kill none of the
        filters ``fixed`` names (those alive for the caller) and add nothing to the totals it
        lists (filter -> indexes: those its prices depend on), so every price of this
        release is the one a replay derives, (c) store prices, and that (d) row ``head`` is
        still there, no checkpoint is due (``every``) and the chain
        is unkeyed (the server chains and hashes the row). So the release is admitted only
        where a session that read every row would admit it too. Returns the row and
        ``(seq, hash, prices text)`` of the rows after ``head``, the row's own last, for the
        caller to fold; None when the server found otherwise (nothing written): decide in
        a turn. After a lost connection the outcome is read back by a random request id."""
        self._writable()
        if not self._lean or self._in_turn or head[0] < 1:
            return None
        fields = self._row_fields(charge)
        stated = self._stated_text(charge)
        text = prices.text
        request = secrets.token_hex(16)
        limits = [repr(float(x)) for x in room]
        args = (
            *head,
            *fields,
            stated,
            text,
            filter_name,
            limits,
            json.dumps(dict(fixed), sort_keys=True),
            every,
            request,
        )
        with self._sql("appending a charge"):
            try:
                found = self._pg.execute(_WITHIN_CALL, args, retry=False).fetchall()
                if found and found[0][0]:  # committed, not yet durable: flush it now
                    self._pg.execute(_FLUSH, retry=False).fetchall()
            except self._pg.psycopg.OperationalError:
                if not self._pg.lost():
                    raise
                self._in_turn, self._held = False, None
                self._pg.reconnect()  # ends the old server process first: its outcome is final
                self._pg.execute(_FLUSH, retry=False).fetchall()  # what committed before is durable, or gone
                written = self._db.execute("SELECT seq FROM requests WHERE id = ?", (request,)).fetchone()
                if written is None:
                    return None  # nothing was written: decide again
                rows = self.prices_after(head[0], expect=head[1])
                if rows is None or rows[-1][0] < int(written[0]):
                    raise LedgerIntegrityError(f"ledger {self.path!r}: row {written[0]} cannot be read back") from None
                found = [(True, s, h, t) for s, h, t in rows if s <= int(written[0])]
        if not found or not found[0][0]:
            self.contended = True
            return None
        out, last = [], None
        for _, seq, digest, prices_text in found:
            last = prices_text if prices_text is not None else last
            out.append((int(seq), str(digest), str(last)))
        seq, digest = out[-1][0], out[-1][1]
        prev = out[-2][1] if len(out) > 1 else head[1]
        if out[-1][2] != text or digest != self._hash_of(prev, seq, fields, stated, text):
            raise LedgerIntegrityError(
                f"ledger {self.path!r}: row {seq}, appended by the server, is not the charge sent (its prices or "
                f"hash differ); verify it with 'privreg ledger verify'"
            )
        self.contended = len(out) > 1
        self._known = (seq, digest)
        return LedgerRow(seq=seq, charge=charge, prev_hash=prev, hash=digest, prices=prices), out

    def record_run_end(self, run_id: str, *, ended: float, status: str, releases: int) -> None:
        """Record that run ``run_id`` ended, through the budget's ``record_run_end``; once:
        a later call for the same run changes nothing (the first end stands)."""
        self._writable()
        with self._sql("recording a run's end"):
            self._db.execute("SELECT record_run_end(?, ?, ?, ?)", (run_id, ended, status, releases)).fetchall()

    def deployment_problems(self) -> list[str]:
        """What the server lets happen that the trust model forbids: an append-only
        trigger missing, disabled, firing only in origin mode or not on every UPDATE,
        DELETE and TRUNCATE; a function of the budget changed since it was created (its
        body, rights or search_path); every role other than the owner (or PUBLIC) that may
        INSERT, UPDATE, DELETE or TRUNCATE a ledger table or some of its columns directly,
        may CREATE in the schema, or is a member of the owner (and so may drop the
        triggers); row-level security or rules on a ledger table (readers may be shown
        some rows only, or writes redirected); PUBLIC allowed to connect to the database
        (any role may then hold the budget's writers' turn and run lock, so that every
        writer waits ``busy_timeout`` and refuses). Superusers can do all of it: not listed."""
        with self._sql("reading its triggers and rights"):
            triggers = self._db.execute(
                "SELECT c.relname, t.tgname, t.tgenabled, t.tgtype, p.proname, pn.nspname FROM pg_trigger t "
                "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace pn ON pn.oid = p.pronamespace "
                "WHERE n.nspname = ? AND NOT t.tgisinternal",
                (self.schema,),
            ).fetchall()
            grants = self._db.execute(
                "SELECT c.relname, a.grantee, a.privilege_type, '' FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace CROSS JOIN LATERAL aclexplode(c.relacl) a WHERE n.nspname = ? "
                "AND c.relkind = 'r' AND a.grantee <> c.relowner "
                "AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE') "
                "UNION ALL SELECT c.relname, a.grantee, a.privilege_type, t.attname FROM pg_attribute t "
                "JOIN pg_class c ON c.oid = t.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                "CROSS JOIN LATERAL aclexplode(t.attacl) a WHERE n.nspname = ? AND c.relkind = 'r' "
                "AND a.grantee <> c.relowner AND a.privilege_type IN ('INSERT', 'UPDATE') ORDER BY 1, 2, 3, 4",
                (self.schema, self.schema),
            ).fetchall()
            creators = self._db.execute(
                "SELECT a.grantee FROM pg_namespace n CROSS JOIN LATERAL aclexplode(n.nspacl) a "
                "WHERE n.nspname = ? AND a.grantee <> n.nspowner AND a.privilege_type = 'CREATE' ORDER BY 1",
                (self.schema,),
            ).fetchall()
            members = self._db.execute(
                "SELECT DISTINCT r.rolname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_roles r ON r.oid <> c.relowner AND NOT r.rolsuper AND pg_has_role(r.oid, c.relowner, "
                "'MEMBER') WHERE n.nspname = ? AND c.relkind = 'r' ORDER BY 1",
                (self.schema,),
            ).fetchall()
            guarded = self._db.execute(
                "SELECT c.relname, c.relrowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = ? AND c.relkind = 'r' ORDER BY 1",
                (self.schema,),
            ).fetchall()
            rules = self._db.execute(
                "SELECT tablename, rulename FROM pg_rules WHERE schemaname = ? ORDER BY 1, 2", (self.schema,)
            ).fetchall()
            functions = self._db.execute(
                "SELECT p.proname, p.prosrc, p.prosecdef, p.proconfig, p.proowner = n.nspowner FROM pg_proc p "
                "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ?",
                (self.schema,),
            ).fetchall()
            names = dict(self._db.execute("SELECT oid, rolname FROM pg_roles").fetchall())
            # no ACL: the default, under which PUBLIC may connect
            public = self._db.execute(
                "SELECT datname FROM pg_database WHERE datname = current_database() AND (datacl IS NULL OR "
                "EXISTS (SELECT 1 FROM aclexplode(datacl) a WHERE a.grantee = 0 AND a.privilege_type = 'CONNECT'))"
            ).fetchall()
        problems = self._trigger_problems(triggers) + self._function_problems(functions)

        def who(grantee: Any) -> str:
            return "PUBLIC" if int(grantee) == 0 else str(names.get(grantee, grantee))

        rights: dict[tuple[str, str, str], list[str]] = {}
        for table, grantee, right, column in grants:
            rights.setdefault((who(grantee), str(table), str(right) if column else ""), []).append(
                str(column) if column else str(right)
            )
        for (role, table, right), what in sorted(rights.items()):
            may = f"{right} columns {', '.join(what)} of" if right else ", ".join(what)
            problems.append(
                f"role {role} may {may} table {table} directly (granted too much: only the owner should; "
                f"analysts append through append())"
            )
        creating = sorted(who(g) for (g,) in creators)
        problems += [f"role {r} may CREATE in schema {self.schema} (granted too much)" for r in creating]
        problems += [
            f"role {m} is a member of the owner of the ledger's tables: it may drop or disable their triggers"
            for (m,) in members
        ]
        problems += [
            f"table {t} has row-level security: readers may be shown some of its rows only" for t, on in guarded if on
        ]
        problems += [f"table {t} has rule {r}: writes to it may be redirected" for t, r in rules]
        problems += [
            f"PUBLIC may connect to database {d}: any role may hold the budget's writers' turn and run lock, "
            f"and every writer waits and refuses (REVOKE CONNECT ON DATABASE ... FROM PUBLIC: 'privreg ledger grant')"
            for (d,) in public
        ]
        return problems

    def _trigger_problems(self, triggers: list[tuple[Any, ...]]) -> list[str]:
        found = {(str(t), str(g)): (str(e), int(kind), str(f), str(ns)) for t, g, e, kind, f, ns in triggers}
        problems = []
        for table in _LEDGER_TABLES:
            state = found.get((table, "append_only"))
            if state is None:
                problems.append(f"table {table}: trigger append_only is missing: its rows can be changed")
                continue
            enabled, kind, function, namespace = state
            if enabled == "D":
                problems.append(f"table {table}: trigger append_only is disabled: its rows can be changed")
            elif enabled != "A":  # O: origin only, R: replica only
                problems.append(
                    f"table {table}: trigger append_only fires only in {'origin' if enabled == 'O' else 'replica'} "
                    f"mode: a session that sets session_replication_role can change its rows (ENABLE ALWAYS it)"
                )
            if kind != _TRIGGER_TYPE or (function, namespace) != ("refuse_change", self.schema):
                problems.append(
                    f"table {table}: trigger append_only does not refuse every UPDATE, DELETE and TRUNCATE "
                    f"through {self.schema}.refuse_change(): its rows can be changed"
                )
        return problems

    def _function_problems(self, functions: list[tuple[Any, ...]]) -> list[str]:
        expected = _function_bodies(self.schema)
        have = {str(r[0]): r[1:] for r in functions}
        problems = []
        for name, (body, definer, config) in sorted(expected.items()):
            got = have.get(name)
            if got is None:
                problems.append(f"function {name} is missing: the budget is incomplete")
            elif (str(got[0]), bool(got[1]), got[2], bool(got[3])) != (body, definer, config, True):
                problems.append(
                    f"function {name} was changed since the budget was created (its body, SECURITY DEFINER, "
                    f"search_path or owner): it may let rows be changed or appended unchecked"
                )
        return problems

    def verify(self, expect_head: str | None = None) -> list[str]:
        """:meth:`Ledger.verify`, plus :meth:`deployment_problems`."""
        return super().verify(expect_head) + self.deployment_problems()
