"""The ledger layer: lock-free and read-only opening, refusing what is not a ledger,
optimistic appends, bounded waits, fair writers, keyed chains and anchored heads."""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import privreg
from privreg.budget.ledger import (
    CHAIN_HMAC,
    Ledger,
    LedgerBusyError,
    LedgerError,
    LedgerFormatError,
    LedgerIntegrityError,
    LedgerKeyError,
    _row_hash,
    format_head,
)
from privreg.cli.main import main
from privreg.core import Charge, PureDP

HERE = Path(__file__).parent
WORKER = str(HERE / "ledger_worker.py")
META = {
    "format": 1,
    "budget": {"epsilon": 1.0, "delta": 1e-6},
    "accountants": ["basic"],
    "event_delta": None,
    "neighbouring": "add_remove",
}
KEY = bytes(range(32))
CHILD_ENV = {**os.environ, "PYTHONPATH": str(Path(privreg.__file__).parents[1])}
TIMEOUT = 120  # seconds: an upper bound for any child process, never reached when all is well


def charge(i=0, eps=0.1):
    return Charge(timestamp=1.7e9 + i, mechanism="m", parameters={"i": i}, event=PureDP(epsilon=eps), label=f"r{i}")


def make(path, n=3, key=None):
    ledger = Ledger(path, meta=META, key=key)
    for i in range(n):
        assert ledger.try_append(charge(i), expected_seq=i).seq == i + 1
    ledger.close()
    return path


def snapshot(path):
    """Bytes and mtime of a file: what must not change when it is only read."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def child(path, *args):
    proc = subprocess.Popen(
        [sys.executable, WORKER, str(path), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=CHILD_ENV,
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def stop(proc):
    proc.kill()
    proc.wait(TIMEOUT)


# -- opening --------------------------------------------------------------------------------


@pytest.fixture
def shared_dir(tmp_path):
    """A folder another user can enter: as root, chmod does not stop us writing, so the
    read-only checks run as user nobody, who needs to reach the files."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="privreg-ledger-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        path.chmod(0o755)
        shutil.rmtree(path)


def read_as_other_user(path):
    """open_readonly in a child that cannot write the file (as root it becomes nobody
    after its imports); returns (rows, verify problems, head seq) or the error line."""
    drop = "os.setgid(65534); os.setuid(65534)\n" if os.geteuid() == 0 else ""
    code = (
        "import json, os\nfrom privreg.budget.ledger import Ledger, LedgerError\n"
        + drop
        + f"try:\n    r = Ledger.open_readonly({str(path)!r})\n"
        "    print(json.dumps([len(r.rows()), r.verify(), r.head()[0]]))\n"
        "except LedgerError as exc:\n    print(json.dumps(str(exc)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=CHILD_ENV, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_read_only_ledger_in_a_read_only_folder(shared_dir):
    path = make(shared_dir / "l.sqlite", n=4)
    before, listing = snapshot(path), sorted(os.listdir(shared_dir))
    path.chmod(0o444)
    shared_dir.chmod(0o555)
    try:
        assert read_as_other_user(path) == [4, [], 4]
    finally:
        shared_dir.chmod(0o755)
    assert snapshot(path) == before and sorted(os.listdir(shared_dir)) == listing


@pytest.mark.slow
def test_read_only_ledger_with_a_live_writer_and_rows_still_in_the_wal(shared_dir):
    path = make(shared_dir / "l.sqlite", n=2)
    writer = Ledger(path, create=False)
    writer.try_append(charge(2), expected_seq=2)  # only in l.sqlite-wal until the writer closes
    assert Path(f"{path}-wal").stat().st_size > 0
    path.chmod(0o444)
    shared_dir.chmod(0o555)
    try:
        assert read_as_other_user(path) == [3, [], 3]
        writer.try_append(charge(3), expected_seq=3)
        assert read_as_other_user(path) == [4, [], 4]
    finally:
        shared_dir.chmod(0o755)
        writer.close()


def test_unreadable_wal_is_refused_rather_than_read_stale(shared_dir):
    path = make(shared_dir / "l.sqlite", n=2)
    writer = Ledger(path, create=False)
    writer.try_append(charge(2), expected_seq=2)
    copy = shared_dir / "copy"
    copy.mkdir()
    shutil.copy(path, copy / "l.sqlite")  # a copy without its -shm: row 3 is only in the -wal
    shutil.copy(f"{path}-wal", copy / "l.sqlite-wal")
    writer.close()
    (copy / "l.sqlite").chmod(0o444)
    copy.chmod(0o555)
    try:
        message = read_as_other_user(copy / "l.sqlite")
    finally:
        copy.chmod(0o755)
    assert "cannot read without creating l.sqlite-shm" in message and "copy" in message


def test_opening_an_existing_ledger_takes_no_lock(tmp_path, capsys):
    path = make(tmp_path / "l.sqlite")
    holder = child(path, "hold-sqlite", 60)  # a slow charge in another process
    try:
        ledger = Ledger(path, create=False)  # opening for writing: plain reads only
        assert len(ledger.rows()) == 3 and ledger.verify() == []
        ledger.close()
        assert main(["audit", str(path)]) == 0
        assert holder.poll() is None, "the audit must not have waited for the holder"
    finally:
        stop(holder)
    assert "head: 3:" in capsys.readouterr().out


def test_dropped_charges_table_is_refused_and_not_repaired(tmp_path, capsys):
    path = make(tmp_path / "l.sqlite")
    db = sqlite3.connect(path)
    db.execute("DROP TABLE charges")
    db.commit()
    db.close()
    before = snapshot(path)
    for opener in (
        lambda: Ledger.open_readonly(path),
        lambda: Ledger(path, create=False),
        lambda: Ledger(path, meta=META),
    ):
        with pytest.raises(LedgerFormatError, match=r"l\.sqlite.* no charges table"):
            opener()
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no charges table" in err
    assert snapshot(path) == before


@pytest.mark.parametrize(
    "damage, missing",
    [
        ("ALTER TABLE charges DROP COLUMN randomness", "no column randomness"),
        ("DELETE FROM meta WHERE key = 'budget'", "metadata has no budget"),
        ("DROP TABLE meta", "no meta table"),
    ],
)
def test_incomplete_ledgers_are_refused(tmp_path, damage, missing):
    path = make(tmp_path / "l.sqlite")
    db = sqlite3.connect(path)
    db.execute(damage)
    db.commit()
    db.close()
    before = snapshot(path)
    with pytest.raises(LedgerFormatError, match=missing):
        Ledger.open_readonly(path)
    with pytest.raises(LedgerFormatError, match=missing):
        Ledger(path, meta=META)
    assert snapshot(path) == before


def test_a_file_that_is_not_sqlite_is_refused(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    before = snapshot(path)
    for opener in (lambda: Ledger.open_readonly(path), lambda: Ledger(path, meta=META)):
        with pytest.raises(LedgerFormatError, match=r"notes\.txt.*not a SQLite database"):
            opener()
    assert main(["audit", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert snapshot(path) == before


def test_read_only_ledger_refuses_writes(tmp_path):
    ledger = Ledger.open_readonly(make(tmp_path / "l.sqlite"))
    with pytest.raises(LedgerError, match="read-only"):
        ledger.try_append(charge(), expected_seq=3)
    assert ledger.head()[0] == 3


# -- writing --------------------------------------------------------------------------------


def test_try_append_returns_none_on_a_conflict(tmp_path):
    path = make(tmp_path / "l.sqlite", n=1)
    a, b = Ledger(path, create=False), Ledger(path, create=False)
    second = a.try_append(charge(1), expected_seq=1)
    assert second.seq == 2
    assert b.try_append(charge(9), expected_seq=1) is None  # b has not seen row 2
    assert b.head() == (2, second.hash) and [r.charge.label for r in b.rows(after=1)] == ["r1"]
    with b.turn():  # catch up and retry in one turn
        row = b.try_append(charge(9), expected_seq=b.rows(after=1)[-1].seq)
    assert row.seq == 3 and row.prev_hash == second.hash
    assert a.verify() == [] and a.head() == (3, row.hash)
    with pytest.raises(ValueError, match="expected_seq"):
        a.try_append(charge(), expected_seq=-1)


@pytest.mark.parametrize("hold", ["hold-sqlite", "hold-turn"])  # SQLite's lock; a writer ahead in line
def test_busy_timeout_gives_ledger_busy_error(tmp_path, hold):
    path = make(tmp_path / "l.sqlite")
    ledger = Ledger(path, create=False, busy_timeout=0.2)
    holder = child(path, hold, 60)
    try:
        with pytest.raises(LedgerBusyError, match=r"l\.sqlite.*0\.2 s.*retry later"):
            ledger.try_append(charge(3), expected_seq=3)
        assert holder.poll() is None
    finally:
        stop(holder)
    assert ledger.try_append(charge(3), expected_seq=3).seq == 4  # giving up left nothing behind
    assert Ledger(path, create=False, busy_timeout=0.2).try_append(charge(4), expected_seq=4).seq == 5


@pytest.mark.slow
def test_both_writers_progress_under_contention(tmp_path):
    """Two processes charge in a tight loop until the ledger holds 400 rows. Writers take
    turns first come, first served, so neither is starved: with SQLite's busy handler
    alone one of them commonly got a handful of the rows."""
    path = make(tmp_path / "l.sqlite", n=0)
    total = 400
    procs = [child(path, "charge", total, label) for label in ("a", "b")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    counts = [int(p.communicate(timeout=TIMEOUT)[0]) for p in procs]
    assert sum(counts) == total and min(counts) >= total // 5, counts
    ledger = Ledger.open_readonly(path)
    labels = [r.charge.label for r in ledger.rows()]
    assert ledger.verify() == [] and [labels.count("a"), labels.count("b")] == counts


@pytest.mark.slow
def test_two_processes_creating_one_ledger(tmp_path):
    path = tmp_path / "new.sqlite"
    code = (
        "import sys\nfrom privreg.budget.ledger import Ledger\nsys.stdin.readline()\n"
        f"Ledger({str(path)!r}, meta={META!r}).close()\nprint('ok')\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=CHILD_ENV
        )
        for _ in range(2)
    ]
    outs = [p.communicate("go\n", timeout=TIMEOUT)[0].strip() for p in procs]
    assert outs == ["ok", "ok"]
    assert Ledger.open_readonly(path).meta == {**META, "chain": "sha256"}


# -- keyed chain and anchors ----------------------------------------------------------------


def rewrite(path, seq, epsilon, key=None):
    """What someone able to write the file does: change row ``seq`` and recompute the
    chain after it (unkeyed unless ``key``), so that every link is consistent again."""
    db = sqlite3.connect(path)
    db.execute("UPDATE charges SET event = ? WHERE seq = ?", (PureDP(epsilon=epsilon).to_json(), seq))
    rows = db.execute("SELECT * FROM charges WHERE seq >= ? ORDER BY seq", (seq,)).fetchall()
    prev = rows[0][7]
    for r in rows:
        digest = _row_hash(key, prev, *r[:7], *r[9:])
        db.execute("UPDATE charges SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, r[0]))
        prev = digest
    db.commit()
    db.close()


def test_keyed_chain_detects_a_recomputed_rewrite(tmp_path):
    plain, keyed = make(tmp_path / "plain.sqlite", n=4), make(tmp_path / "keyed.sqlite", n=4, key=KEY)
    assert Ledger.open_readonly(keyed, key=KEY).meta["chain"] == CHAIN_HMAC
    for path in (plain, keyed):
        rewrite(path, 2, 1e-9)
    assert Ledger.open_readonly(plain).verify() == []  # documented: unkeyed rewrites pass
    problems = Ledger.open_readonly(keyed, key=KEY).verify()
    assert problems == [f"row {i}: contents do not match its hash (edited)" for i in (2, 3, 4)]
    with pytest.raises(LedgerIntegrityError, match="last row"):
        Ledger(keyed, create=False, key=KEY)


def test_keyed_ledger_refuses_missing_wrong_or_bad_keys(tmp_path):
    path = make(tmp_path / "l.sqlite", n=2, key=KEY)
    with pytest.raises(LedgerKeyError, match=r"is keyed.*pass the key"):
        Ledger(path, create=False)
    with pytest.raises(LedgerKeyError, match="does not verify under the given key"):
        Ledger(path, create=False, key=b"\x01" * 32)
    with pytest.raises(LedgerKeyError, match="not str"):
        Ledger(path, create=False, key=KEY.hex())
    with pytest.raises(LedgerKeyError, match="at least 16"):
        Ledger(path, create=False, key=b"short")
    with pytest.raises(LedgerKeyError, match="created without a key"):
        Ledger(make(tmp_path / "plain.sqlite"), create=False, key=KEY)
    with pytest.raises(LedgerKeyError, match="does not verify"):  # wrong key, even with no rows
        Ledger(make(tmp_path / "empty.sqlite", n=0, key=KEY), create=False, key=b"\x02" * 16)
    reader = Ledger.open_readonly(path)  # no key: readable, never reported intact
    assert len(reader.rows(verify=False)) == 2
    (problem,) = reader.verify()
    assert "keyed" in problem and "could not be verified" in problem
    with pytest.raises(LedgerIntegrityError, match="keyed"):
        reader.rows()
    assert Ledger.open_readonly(path, key=KEY).verify() == []
    assert Ledger(path, create=False, key=KEY).try_append(charge(2), expected_seq=2).seq == 3


def test_downgrade_to_an_unkeyed_chain_is_reported_with_the_key(tmp_path):
    path = make(tmp_path / "l.sqlite", n=2, key=KEY)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '\"sha256\"' WHERE key = 'chain'")
    db.execute("DELETE FROM meta WHERE key = 'meta_mac'")
    db.commit()
    db.close()
    genesis = Ledger.open_readonly(path).genesis()
    db = sqlite3.connect(path)
    db.execute("UPDATE charges SET prev_hash = ? WHERE seq = 1", (genesis,))
    db.commit()
    db.close()
    rewrite(path, 1, 0.1)  # recompute the whole chain with plain SHA-256
    assert Ledger.open_readonly(path).verify() == []
    (problem,) = Ledger.open_readonly(path, key=KEY).verify()
    assert "unkeyed sha256 chain but a key was given" in problem


def test_expect_head_detects_removed_newest_rows(tmp_path):
    path = make(tmp_path / "l.sqlite", n=5)
    ledger = Ledger(path, create=False)
    anchor = format_head(ledger.head())
    assert ledger.verify(expect_head=anchor) == []
    ledger.try_append(charge(5), expected_seq=5)  # growth after the anchor is normal
    assert ledger.verify(expect_head=anchor) == [] and ledger.verify(expect_head=anchor.split(":")[1]) == []
    ledger.close()
    db = sqlite3.connect(path)
    db.execute("DELETE FROM charges WHERE seq >= 4")
    db.commit()
    db.close()
    reader = Ledger.open_readonly(path)
    assert reader.verify() == []  # without an anchor, a shorter chain is a valid chain
    (problem,) = reader.verify(expect_head=anchor)
    assert "rows after 3 were removed" in problem
    (problem,) = reader.verify(expect_head=anchor.split(":")[1])
    assert "not in the chain" in problem


def test_expect_head_detects_a_recomputed_rewrite(tmp_path):
    path = make(tmp_path / "l.sqlite", n=5)
    anchor = format_head(Ledger.open_readonly(path).head())
    rewrite(path, 2, 1e-9)
    reader = Ledger.open_readonly(path)
    assert reader.verify() == []
    (problem,) = reader.verify(expect_head=anchor)
    assert "rewritten at or before row 5" in problem
    assert reader.verify(expect_head=format_head((0, reader.genesis()))) == []
    with pytest.raises(ValueError, match="SEQ:HASH"):
        reader.verify(expect_head="5:nothex")


def test_cli_audit_head_expect_head_and_key_file(tmp_path, capsys):
    path = make(tmp_path / "l.sqlite", n=3, key=KEY)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    assert main(["audit", str(path), "--key-file", str(key_file)]) == 0
    out = capsys.readouterr().out
    head = format_head(Ledger.open_readonly(path, key=KEY).head())
    assert f"head: {head}  (keep this elsewhere; pass it as --expect-head next time)" in out
    assert main(["audit", str(path), "--json", "--key-file", str(key_file), "--expect-head", head]) == 0
    assert json.loads(capsys.readouterr().out)["head"] == head
    assert main(["audit", str(path)]) == 3  # keyed, no key: not verified
    assert "could not be verified" in capsys.readouterr().out
    db = sqlite3.connect(path)
    db.execute("DELETE FROM charges WHERE seq = 3")
    db.commit()
    db.close()
    assert main(["audit", str(path), "--key-file", str(key_file), "--expect-head", head]) == 3
    assert "rows after 2 were removed" in capsys.readouterr().out
    for bad in (["--expect-head", "3:xyz"], ["--key-file", str(tmp_path / "missing")]):
        assert main(["audit", str(path), *bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("privreg: error:")


def test_refused_creation_leaves_no_file(tmp_path):
    for meta, match in (
        (None, "is new: pass its metadata"),
        ({"format": 1}, "lacks budget"),
        ({**META, "chain": "sha256"}, "must not set chain"),
    ):
        with pytest.raises(ValueError, match=match):
            Ledger(tmp_path / "new.sqlite", meta=meta)
        assert not (tmp_path / "new.sqlite").exists()
    with pytest.raises(ValueError, match="is not a file"):
        Ledger.open_readonly(tmp_path)


def test_audit_changes_nothing_in_the_file(tmp_path):
    path = make(tmp_path / "l.sqlite")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    db.close()
    before = snapshot(path)
    assert main(["audit", str(path)]) == 0
    assert snapshot(path) == before
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL
    db.close()


@pytest.mark.parametrize("timestamp", [0.0, -0.0, 1732870000.25, 5e-324, 1.7976931348623157e308, 1e21, 1.0e-7])
@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_row_hash_is_the_documented_json_text(timestamp, key):
    """A row's hash is SHA-256 (or HMAC) of prev_hash + the compact JSON list of its fields,
    the timestamp as its repr: the fast path that writes seq and timestamp directly must
    give the same text as the JSON encoder."""
    import hmac

    fields = ["laplace", '{"epsilon":1.0}', '{"kind":"pure_dp"}', 'lbl \u00e9"', "{}", "", '{"basic":[1.0,0.0]}']
    text = "prev" + json.dumps([123, repr(timestamp), *fields], separators=(",", ":"), ensure_ascii=True)
    data = text.encode()
    want = hmac.new(key, data, hashlib.sha256).hexdigest() if key else hashlib.sha256(data).hexdigest()
    assert _row_hash(key, "prev", 123, timestamp, *fields) == want
