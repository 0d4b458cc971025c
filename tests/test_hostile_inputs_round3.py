"""Issue #31, items 1, 4 and 5: hostile inputs, round three.

Every case must exit 2 with exactly one ``privreg: error:`` line (after any progress
lines), no traceback, within 60 s, leaving no ledger row and no partial output. The
cases that could exhaust memory or block (decompression bombs, millions of tiny rows,
``/dev/zero``, FIFOs, a 200,000-column header) run in a child process under a 1 GiB
address-space limit (``RLIMIT_AS``) and a 60 s timeout; the others run in-process with
``tracemalloc`` bounding what the refusal allocated. The 60 s and memory bounds are hang
and blow-up guards, not speed targets.
"""

from __future__ import annotations

import csv
import gzip
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from privreg.budget.ledger import Ledger
from privreg.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


# -- helpers -------------------------------------------------------------------------------


def _ledger_rows(folder: Path) -> int:
    path = folder / "ledger.sqlite"
    if not path.exists():
        return 0
    ledger = Ledger(path, create=False)
    try:
        return len(list(ledger.rows()))
    finally:
        ledger.close()


def _one_error_line(err: str) -> str:
    """The refusal: exactly one ``privreg: error:`` line, the last one (a warning such as
    "runs WITHOUT TLS" may come before it), and no traceback."""
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("privreg: error")]
    assert errors == [lines[-1]] and lines[-1].startswith("privreg: error: "), err
    return lines[-1]


def refused(capsys, *argv: str, out: Path | None = None) -> str:
    """Run ``privreg ARGV`` in-process; assert a one-line exit-2 refusal within 60 s that
    allocated under 512 MiB and left no ledger row or output in ``out``."""
    capsys.readouterr()
    start = time.perf_counter()
    tracemalloc.start()
    try:
        code = main(list(argv))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - start
    stdout, err = capsys.readouterr()
    assert code == 2, (code, stdout, err)
    line = _one_error_line(err)
    assert elapsed < 60, f"the refusal took {elapsed:.0f} s"
    assert peak < 512 << 20, f"the refusal allocated {peak >> 20} MiB"
    if out is not None:
        assert _ledger_rows(out) == 0
        assert not (out / "result.json").exists() and not (out / "run.json").exists()
    return line


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))


def refused_in_child(*argv: str, cwd: Path, out: Path | None = None) -> str:
    """Run ``privreg ARGV`` in a child process limited to 1 GiB of address space; assert
    exit 2 and one error line within 60 s (a timeout fails the test: a hang)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", PRIVREG_PROGRESS="off")
    proc = subprocess.run(
        [sys.executable, "-m", "privreg", *argv],
        cwd=cwd,
        env=env,
        preexec_fn=_limit_memory,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    line = _one_error_line(proc.stderr)
    if out is not None:
        assert _ledger_rows(out) == 0
        assert not (out / "result.json").exists() and not (out / "run.json").exists()
    return line


def _gzip_repeated(path: Path, head: bytes, block: bytes, times: int) -> Path:
    """A gzip file of ``head`` then ``block`` ``times`` times: members compressed once and
    concatenated (a valid gzip stream), so a 1 GiB expansion is made in a fraction of a second."""
    member = gzip.compress(block, compresslevel=9)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(times):
            fh.write(member)
    return path


@pytest.fixture(scope="module")
def nul_bomb(tmp_path_factory) -> Path:
    """About 1 MB of gzip expanding to 1 GiB of NULs on one line, after a header row."""
    folder = tmp_path_factory.mktemp("bomb")
    path = _gzip_repeated(folder / "nul.csv.gz", b"user_id,text,age\n1,", b"\0" * (1 << 24), 64)
    assert path.stat().st_size < 2 << 20
    return path


@pytest.fixture(scope="module")
def tiny_rows(tmp_path_factory) -> Path:
    """About 1.4 MB of gzip expanding to 700 million rows of one digit."""
    folder = tmp_path_factory.mktemp("rows")
    path = _gzip_repeated(folder / "rows.csv.gz", b"age\n", b"1\n" * (1 << 23), 84)
    assert path.stat().st_size < 3 << 20
    return path


# -- item 1: bounded readers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "workflow, name",
    [("bounded-mean", "nul.csv.gz"), ("bounded-mean", "nul.csv"), ("ngrams", "nul.csv.gz")],
    ids=["gzip", "gzip-named-csv", "ngrams"],
)
def test_a_gzip_bomb_of_one_long_line_is_refused_by_the_line_cap(tmp_path, nul_bomb, workflow, name):
    data = tmp_path / name
    data.write_bytes(nul_bomb.read_bytes())
    extra = ["--column", "age", "--lower", "17", "--upper", "90"] if workflow == "bounded-mean" else []
    out = tmp_path / "out"
    line = refused_in_child("run", workflow, "--input", str(data), *extra, "-o", str(out), cwd=tmp_path, out=out)
    assert "line longer than 64 MiB" in line and name in line


@pytest.mark.parametrize("workflow", ["bounded-mean", "outlier-count"])
def test_millions_of_tiny_rows_are_refused_by_the_input_cap(tmp_path, tiny_rows, workflow):
    extra = ["--column", "age", "--lower", "17", "--upper", "90"] if workflow == "bounded-mean" else []
    out = tmp_path / "out"
    argv = ["run", workflow, "--input", str(tiny_rows), *extra, "--max-input-gib", "0.1", "-o", str(out)]
    line = refused_in_child(*argv, cwd=tmp_path, out=out)
    assert "--max-input-gib 0.1" in line and "64 bytes a line" in line


def test_the_row_charge_lets_a_file_within_the_cap_through():
    """The per-line charge counts: 1,000 lines of 2 bytes pass a cap of 70 KB and are
    refused under 60 KB (2 + 64 bytes each = 66 KB), whatever the chunking."""
    import io

    from privreg.core.cost import ResourceLimitError, capped_reader

    data = b"1\n" * 1000
    assert capped_reader(io.BytesIO(data), "x", 70_000 / GIB, lines=True).read() == data
    with pytest.raises(ResourceLimitError, match="64 bytes a line"):
        capped_reader(io.BytesIO(data), "x", 60_000 / GIB, lines=True).read()
    # without lines (a mail archive), only the bytes count
    assert capped_reader(io.BytesIO(data), "x", 3_000 / GIB).read() == data


def test_a_200000_column_header_is_refused_at_once(tmp_path):
    wide = tmp_path / "wide.csv"
    with open(wide, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([f"c{i}" for i in range(200_000)])
        writer.writerow(range(200_000))
    out = tmp_path / "out"
    line = refused_in_child("run", "outlier-count", "--input", str(wide), "-o", str(out), cwd=tmp_path, out=out)
    assert "200000 columns" in line and "65536" in line


def test_the_header_check_is_linear():
    """60,000 distinct names are checked, and a repeated name found, in one pass (the
    quadratic ``names.count`` took minutes for 200,000)."""
    from privreg.core.errors import PrivregValueError
    from privreg.core.validation import check_header

    names = [f"c{i}" for i in range(60_000)]
    start = time.process_time()
    assert check_header(names, "t") == names
    with pytest.raises(PrivregValueError, match=r"\['c7'\] more than once"):
        check_header([*names, "c7"], "t")
    assert time.process_time() - start < 30  # a hang guard: the quadratic check needs ~1e9 steps


@pytest.mark.parametrize("case", ["dev-zero", "fifo"])
def test_a_device_or_fifo_as_key_file_or_config_is_refused_by_type(tmp_path, case):
    if case == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    else:
        target = Path("/dev/zero")
        if not target.exists():
            pytest.skip("no /dev/zero")
    kind = "FIFO" if case == "fifo" else "device"
    line = refused_in_child("party", "run", str(target), cwd=tmp_path)
    assert kind in line and "party configuration" in line
    line = refused_in_child("audit", str(tmp_path / "x.sqlite"), "--key-file", str(target), cwd=tmp_path)
    assert kind in line and "--key-file" in line
    line = refused_in_child("ledger", "verify", str(tmp_path / "x.sqlite"), "--key-file", str(target), cwd=tmp_path)
    assert kind in line


def test_a_fifo_as_workflow_input_is_refused(tmp_path):
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    line = refused_in_child("run", "outlier-count", "--input", str(fifo), "-o", str(out), cwd=tmp_path, out=out)
    assert "in.csv" in line and "FIFO" in line


def test_read_bytes_refuses_a_file_larger_than_its_cap(tmp_path):
    from privreg.core import files
    from privreg.core.errors import PrivregValueError

    big = tmp_path / "key"
    big.write_bytes(b"k" * 101)
    assert files.read_bytes(big, "--key-file", max_bytes=101) == b"k" * 101
    with pytest.raises(PrivregValueError, match="larger than 100 bytes"):
        files.read_bytes(big, "--key-file", max_bytes=100)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("workflow", ["ngrams", "bounded-mean"])
def test_a_jsonl_value_nested_100000_deep_is_refused(capsys, tmp_path, workflow):
    data = tmp_path / "deep.jsonl"
    data.write_text('{"user_id": "1", "text": "a b", "age": ' + _deep(100_000) + "}\n", encoding="utf-8")
    out = tmp_path / "out"
    extra = ["--column", "age", "--lower", "17", "--upper", "90"] if workflow == "bounded-mean" else []
    line = refused(capsys, "run", workflow, "--input", str(data), *extra, "-o", str(out), out=out)
    assert "nests JSON arrays or objects more than" in line and "deep.jsonl" in line


def test_audit_mechanism_refuses_neighbours_nested_100000_deep(capsys):
    line = refused(capsys, "audit-mechanism", "laplace", "--samples", "1000", "--neighbours", _deep(100_000), "1")
    assert "--neighbours FIRST" in line and "32 levels" in line


def test_a_moderately_nested_neighbour_is_refused_before_numpy():
    from privreg.core import jsontext
    from privreg.core.errors import PrivregValueError

    assert jsontext.loads(_deep(32), "v", max_depth=32) is not None
    with pytest.raises(PrivregValueError, match="more than 32 levels"):
        jsontext.loads(_deep(33), "v", max_depth=32)
    assert jsontext.depth_of({"a": [1, {"b": []}]}, 10) == 4 and jsontext.depth_of(5, 10) == 0


# -- item 4: internal errors and wrong successes become refusals ---------------------------


@pytest.mark.parametrize("k", ["9223372036854775808", "1e30", "99999999999"])
def test_outlier_count_refuses_a_huge_k(capsys, tmp_path, k):
    out = tmp_path / "out"
    line = refused(capsys, "run", "outlier-count", "--k", k, "-o", str(out), out=out)
    assert "--k" in line


def test_data_at_1e308_with_the_core_cover_is_refused(capsys, tmp_path):
    data = tmp_path / "big.csv"
    data.write_text("a,b\n1e308,-1e308\n-1e308,1e308\n0,0\n1,2\n", encoding="utf-8")
    out = tmp_path / "out"
    line = refused(capsys, "run", "outlier-count", "--input", str(data), "--cover", "core", "-o", str(out), out=out)
    assert "[-1e100, 1e100]" in line and "1e308" not in line  # the rule, never a cell


def test_a_very_wide_outlier_input_runs(capsys, tmp_path):
    """2,000 columns: the kissing bound's cap fraction underflows; the bound stays a
    (larger, still safe) number instead of a ZeroDivisionError."""
    from privreg.plugins.outliers.kissing import kissing_upper_bound

    assert kissing_upper_bound(2000) >= kissing_upper_bound(1000) > 0


def test_a_binary_party_config_is_refused(capsys, tmp_path):
    config = tmp_path / "party.toml"
    config.write_bytes(bytes(range(256)) * 8)
    line = refused(capsys, "party", "run", str(config))
    assert "party.toml" in line and "not UTF-8" in line


@pytest.mark.parametrize("value", ["\uff11", "1_0", "\u0663", "0x1", "1e", " ", "\u00b9"])
def test_numbers_are_ascii_only(capsys, tmp_path, value):
    out = tmp_path / "out"
    line = refused(capsys, "run", "bounded-mean", "--epsilon", value, "-o", str(out), out=out)
    assert "--epsilon" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--budget-epsilon", "1_0", "bounded-mean"],
        ["run", "bounded-mean", "--budget-epsilon", "\uff11"],
        ["run", "bounded-mean", "--max-memory-gib", "1_0"],
        ["run", "bounded-mean", "--insecure-seed", "\u0663"],
        ["ledger", "init", "L.sqlite", "--epsilon", "1_0"],
        ["party", "init", "clk-dice", "D", "--base-port", "7\uff1100"],
        ["audit-mechanism", "laplace", "--samples", "1_000"],
    ],
    ids=["budget-before", "budget-after", "limit", "seed", "ledger-init", "base-port", "samples"],
)
def test_every_number_flag_is_ascii_only(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    refused(capsys, *argv)
    assert not (tmp_path / "L.sqlite").exists() and not (tmp_path / "D").exists()


def test_parse_helpers_accept_plain_ascii():
    from privreg.core.numtext import parse_float, parse_int

    assert parse_int("x", "-12") == -12 and parse_int("x", "+7") == 7
    assert parse_float("x", "1e-6") == 1e-6 and parse_float("x", ".5") == 0.5 and parse_float("x", "3.") == 3.0
    assert parse_float("x", "inf") == float("inf")


@pytest.mark.parametrize("flag", ["--epsilon", "--budget-epsilon"])
def test_epsilon_above_the_workflow_maximum_needs_a_flag(capsys, tmp_path, flag):
    out = tmp_path / "out"
    line = refused(capsys, "run", "bounded-mean", flag, "1e300", "-o", str(out), out=out)
    assert "--allow-large-epsilon" in line and "20" in line
    line = refused(capsys, "run", "bounded-mean", flag, "21", "-o", str(out), out=out)
    assert "--allow-large-epsilon" in line


def test_allow_large_epsilon_runs_and_charges_it(capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["run", "bounded-mean", "--epsilon", "21", "--allow-large-epsilon", "-o", str(out)]) == 0
    assert "epsilon spent: 21 of 21" in capsys.readouterr().out
    assert _ledger_rows(out) > 0


def test_describe_states_the_largest_epsilon(capsys):
    assert main(["describe", "bounded-mean"]) == 0
    assert "largest epsilon: 20 (more needs --allow-large-epsilon)" in capsys.readouterr().out


def test_existing_outputs_need_overwrite(capsys, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("mine\n", encoding="utf-8")
    line = refused(capsys, "run", "bounded-mean", "-o", str(out))
    assert "--overwrite" in line and "result.json" in line
    assert (out / "result.json").read_text(encoding="utf-8") == "mine\n" and _ledger_rows(out) == 0
    assert main(["run", "bounded-mean", "-o", str(out), "--overwrite"]) == 0
    assert (out / "result.json").read_text(encoding="utf-8") != "mine\n"
    # an earlier run's ledger is never overwritten, flag or not
    line = refused(capsys, "run", "bounded-mean", "-o", str(out), "--overwrite")
    assert "ledger.sqlite" in line and "exists already" in line


def test_an_empty_output_folder_name_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refused(capsys, "run", "bounded-mean", "--output", "")
    assert "--output must name a folder" in line
    assert not (tmp_path / "privreg-out").exists()


def test_a_token_pattern_matching_only_empty_strings_is_refused(capsys, tmp_path):
    out = tmp_path / "out"
    line = refused(capsys, "run", "ngrams", "--token-pattern", "(?=x)", "-o", str(out), out=out)
    assert "token_pattern" in line and "empty" in line


@pytest.mark.parametrize("value", ["99999999999999999999", "1025", "0"])
def test_max_workers_has_a_maximum(capsys, tmp_path, value):
    out = tmp_path / "out"
    line = refused(capsys, "run", "bounded-mean", "--max-workers", value, "-o", str(out), out=out)
    assert "--max-workers" in line


def test_every_integer_parameter_of_a_workflow_is_bounded():
    import privreg
    from privreg.core.errors import PrivregValueError
    from privreg.core.params import INT_LIMIT

    registry = privreg.default_registry()
    for item in registry.items():
        for p in item.params:
            if p.type is int:
                with pytest.raises(PrivregValueError):
                    p.validate(INT_LIMIT + 1)
    for name in ("outlier-count", "outlier-subspaces"):
        assert registry.get(name).param("k").maximum is not None


# -- item 5: party configurations checked before anything listens --------------------------


@pytest.fixture
def party_dir(tmp_path) -> Path:
    folder = tmp_path / "run"
    assert main(["party", "init", "clk-dice", str(folder), "--insecure-plaintext", "--base-port", "7300"]) == 0
    return folder


def _edit(config: Path, old: str, new: str) -> None:
    text = config.read_text(encoding="utf-8")
    assert old in text, text
    config.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "0", "-1", "86401"])
def test_timeouts_must_be_finite_and_bounded(capsys, party_dir, value):
    config = next(party_dir.glob("*.toml"))
    _edit(config, "connect = 300.0", f"connect = {value}")
    line = refused(capsys, "party", "run", str(config))
    assert "[timeouts] connect" in line and "86400" in line


@pytest.mark.parametrize("where", ["a-file", "inside-a-file"])
def test_an_output_folder_that_is_a_file_is_refused_before_listening(capsys, party_dir, where):
    config = next(party_dir.glob("*.toml"))
    blocker = party_dir / "blocker"
    blocker.write_text("x", encoding="utf-8")
    target = "blocker" if where == "a-file" else "blocker/out"
    text = config.read_text(encoding="utf-8")
    start = text.index("[outputs]")
    end = text.index("\n\n", start)
    config.write_text(text[:start] + f'[outputs]\ndirectory = "{target}"' + text[end:], encoding="utf-8")
    start_time = time.perf_counter()
    line = refused(capsys, "party", "run", str(config))
    assert "[outputs] directory" in line
    assert time.perf_counter() - start_time < 60  # refused at once, not after waiting for peers
    assert blocker.read_text(encoding="utf-8") == "x"


def test_an_unwritable_output_folder_is_refused_before_listening(capsys, party_dir, monkeypatch):
    """A read-only file system (root ignores permission bits, so the write is made to fail)."""
    import errno

    from privreg.mpc import party_config

    config = next(party_dir.glob("*.toml"))
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if ".privreg-write-probe." in str(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(party_config.os, "open", read_only)
    line = refused(capsys, "party", "run", str(config))
    assert "read-only" in line and "[outputs] directory" in line


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--base-port", "70000"], "--base-port"),
        (["--base-port", "-1"], "--base-port"),
        (["--base-port", "65534"], "65532"),
        (["--connect-timeout", "nan"], "--connect-timeout"),
        (["--connect-timeout", "1e308"], "--connect-timeout"),
    ],
)
def test_party_init_refuses_bad_ports_and_timeouts(capsys, tmp_path, argv, match):
    folder = tmp_path / "run"
    line = refused(capsys, "party", "init", "clk-dice", str(folder), "--insecure-plaintext", *argv)
    assert match in line
    assert not folder.exists() or not any(folder.iterdir())


def test_ledger_init_does_not_create_parent_folders(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refused(capsys, "ledger", "init", "missing/dir/x.sqlite", "--epsilon", "1")
    assert "missing/dir" in line and "does not exist" in line
    assert not (tmp_path / "missing").exists()


# -- item 4: an interrupted run says in one line what it charged ----------------------------


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("after_charge", [False, True], ids=["before-charge", "after-charge"])
def test_an_interrupted_run_says_what_was_charged(capsys, tmp_path, monkeypatch, signal_name, after_charge):
    """Ctrl-C (KeyboardInterrupt) or SIGTERM (the CLI raises its own exception) while
    bounded-mean writes its result (after both charges) or reads its input (before any)."""
    from privreg.cli import main as cli
    from privreg.core.workflow import WorkflowContext
    from privreg.plugins.standard import workflows as standard

    exc = KeyboardInterrupt if signal_name == "SIGINT" else cli._Terminated

    def interrupt(*args, **kwargs):
        raise exc

    if after_charge:
        monkeypatch.setattr(WorkflowContext, "output_path", interrupt)
    else:
        monkeypatch.setattr(standard, "estimate_bounded_mean", interrupt)
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["run", "bounded-mean", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == (130 if signal_name == "SIGINT" else 143)
    lines = [line for line in err.strip().splitlines() if line.startswith("privreg:")]
    assert len(lines) == 1, err
    word = "interrupted" if signal_name == "SIGINT" else "terminated"
    if after_charge:
        assert lines[0].startswith(f"privreg: {word}: the run of 'bounded-mean'") and "2 release" in lines[0], lines
        assert _ledger_rows(out) == 2
    else:
        assert lines[0] == f"privreg: {word}: nothing was charged"
        assert _ledger_rows(out) == 0


# -- item 4: Spark masters refused before Spark starts; its progress follows privreg's ------


def _closed_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("workflow", ["ngrams", "pprl"])
@pytest.mark.parametrize("master", ["bogus", "spark://", "spark://host", "local[0]", "local[x]", "unreachable"])
def test_a_malformed_or_unreachable_spark_master_is_refused_naming_the_flag(capsys, tmp_path, workflow, master):
    if master == "unreachable":
        master = f"spark://127.0.0.1:{_closed_port()}"
    out = tmp_path / "out"
    line = refused(capsys, "run", workflow, "--backend", "spark", "--spark-master", master, "-o", str(out), out=out)
    # refused by the check (a connect of at most 5 s), not by Spark after it started
    assert "spark_master" in line and "Py4J" not in line
    if master.startswith("spark://127.0.0.1"):
        assert "no Spark master accepts connections" in line


def test_the_spark_master_forms_spark_documents_pass_the_check():
    import socket

    from privreg.core.spark_master import check_master

    for master in ("local", "local[2]", "local[*]", "local[4,2]", "yarn"):
        assert check_master(master) == master
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        master = f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}"  # one live master of two suffices
        assert check_master(master, probe_seconds=2) == master
        assert check_master(f"k8s://https://127.0.0.1:{port}", probe_seconds=2).startswith("k8s://")


@pytest.mark.parametrize(
    "env, tty, shown",
    [(None, True, "true"), ("auto", False, "false"), ("off", True, "false"), ("plain", True, "false")],
)
def test_spark_console_progress_follows_privreg_progress(monkeypatch, env, tty, shown):
    from privreg.plugins.ngrams.backends import spark

    if env is None:
        monkeypatch.delenv("PRIVREG_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("PRIVREG_PROGRESS", env)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    assert spark.console_progress() == shown


def test_a_huge_certificate_file_is_refused_unread(tmp_path):
    from privreg.core.errors import PrivregValueError
    from privreg.mpc.tls import TlsConfig

    big = tmp_path / "cert.pem"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)  # sparse: 2 MiB of NULs, no disk used
    key = tmp_path / "key.pem"
    key.write_bytes(b"k")
    key.chmod(0o600)
    with pytest.raises(PrivregValueError, match="larger than 1048576 bytes"):
        TlsConfig(certificate=big, key=key, ca=big)


def test_a_jsonl_line_with_more_keys_than_a_table_has_is_refused_unparsed(capsys, tmp_path):
    data = tmp_path / "keys.jsonl"
    data.write_text("{" + ",".join(f'"k{i}": 0' for i in range(70_000)) + "}\n", encoding="utf-8")
    out = tmp_path / "out"
    line = refused(capsys, "run", "ngrams", "--input", str(data), "-o", str(out), out=out)
    assert "more than 65536 keys" in line


def test_the_missing_column_error_lists_a_bounded_number_of_keys(capsys, tmp_path):
    """60,000 keys (under the cap) and no wanted column: the error lists at most 1,000."""
    data = tmp_path / "keys.jsonl"
    data.write_text("{" + ",".join(f'"k{i}": 0' for i in range(60_000)) + "}\n", encoding="utf-8")
    out = tmp_path / "out"
    line = refused(capsys, "run", "ngrams", "--input", str(data), "-o", str(out), out=out)
    assert "user_id" in line and line.count("'k") <= 1000 and len(line) < 20_000


def test_an_interrupt_after_the_run_completed_says_so(capsys, tmp_path, monkeypatch):
    """Ctrl-C while the summary prints: the run is complete and charged; the line says so."""
    out = tmp_path / "out"
    capsys.readouterr()
    stdout_write = sys.stdout.write

    def interrupted(text):
        stdout_write(text)
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.stdout, "write", interrupted)
    code = main(["run", "bounded-mean", "-o", str(out)])
    monkeypatch.undo()
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("privreg:")]
    assert code == 130 and len(lines) == 1, err
    assert lines[0].startswith("privreg: interrupted: the run is complete; releases charged: 2"), lines
    assert _ledger_rows(out) == 2


@pytest.mark.parametrize("value", ["127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:-1", "127.0.0.1:0007101"])
def test_a_peer_port_out_of_range_is_refused(capsys, party_dir, value):
    config = party_dir / "P1.toml"
    text = config.read_text(encoding="utf-8")
    start = text.index("[peers]\n") + len("[peers]\n")
    name, _, rest = text[start:].partition(" = ")
    config.write_text(text[:start] + f'{name} = "{value}"\n' + rest.partition("\n")[2], encoding="utf-8")
    line = refused(capsys, "party", "run", str(config))
    assert f"[peers] {name}" in line and "1..65535" in line
