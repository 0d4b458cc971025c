"""privreg.readers: CSV with or without a header row, JSONL, Parquet and mail archives,
and the workflows that read files through it (issue #21, "Data in")."""

from __future__ import annotations

import builtins
import bz2
import gzip
import io
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

from privreg.cli.main import main
from privreg.core import InsecureReproducibleRandom, PrivregValueError, WorkflowContext
from privreg.core.cost import Limits, ResourceLimitError, use_limits
from privreg.core.registry import load_registry
from privreg.datasets import ADULT_COLUMNS, load_adult
from privreg.plugins.ngrams import hooks as ngrams_hooks
from privreg.plugins.ngrams.backends import Tokenizer
from privreg.plugins.ngrams.spamassassin import ham_records
from privreg.plugins.outliers.datasets import read_csv_points
from privreg.plugins.spam.corpus import read_corpus
from privreg.readers import (
    MAIL_COLUMNS,
    PARQUET_INSTALL,
    csv_names,
    detect_format,
    mail_chunks,
    mail_messages,
    numeric_column,
    read_chunks,
    read_table,
)

# the first lines of UCI Adult's adult.data, as the file writes them: no header row,
# ", " between cells, a blank line at the end
ADULT_LINES = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, "
    "United-States, <=50K",
    "50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, "
    "13, United-States, <=50K",
    "38, Private, 215646, HS-grad, 9, Divorced, Handlers-cleaners, Not-in-family, White, Male, 0, 0, 40, "
    "United-States, <=50K",
    "53, Private, 234721, 11th, 7, Married-civ-spouse, Handlers-cleaners, Husband, Black, Male, 0, 0, 40, "
    "United-States, <=50K",
    "28, Private, 338409, Bachelors, 13, Married-civ-spouse, Prof-specialty, Wife, Black, Female, 0, 0, 40, Cuba, "
    "<=50K",
]
AGES = [39.0, 50.0, 38.0, 53.0, 28.0]


@pytest.fixture
def adult_data(tmp_path):
    path = tmp_path / "adult.data"
    path.write_text("\n".join(ADULT_LINES) + "\n\n", encoding="utf-8")
    return path


# --- CSV ----------------------------------------------------------------------------------


def test_csv_with_a_header_row(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('x,y,z\n1,a,\n2,"b, c"\n\n3,d,5,,\n', encoding="utf-8")
    assert csv_names(path) == ["x", "y", "z"]
    table = read_table(path)
    # empty and short-row cells are missing; blank lines skipped; trailing empty cells allowed
    assert table == {"x": ["1", "2", "3"], "y": ["a", "b, c", "d"], "z": [None, None, "5"]}
    assert read_table(path, ["z", "x"]) == {"z": [None, None, "5"], "x": ["1", "2", "3"]}
    assert numeric_column(table["x"], "x", "a.csv").tolist() == [1.0, 2.0, 3.0]
    assert np.isnan(numeric_column(table["z"], "z", "a.csv")).tolist() == [True, True, False]
    with pytest.raises(PrivregValueError, match=re.escape("column 'y' of a.csv is not numeric")) as err:
        numeric_column(table["y"], "y", "a.csv")
    assert "b, c" not in str(err.value)


def test_csv_chunks_stream_and_do_not_change_the_cells(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("v\n" + "".join(f"{i}\n" for i in range(25)) + "1,SECRET-CELL\n", encoding="utf-8")
    chunks = read_chunks(path, rows=10)
    first = next(chunks)  # streamed: the bad row near the end is not read yet
    assert first == {"v": [str(i) for i in range(10)]}
    with pytest.raises(PrivregValueError, match="more cells than the 1 of its header row") as err:
        list(chunks)
    shown = str(err.value).replace(str(path), "<path>")  # the temp path may hold "26" (pytest-526)
    assert "SECRET" not in shown and "26" not in shown  # never the row or its number
    good = tmp_path / "good.csv"
    good.write_text("v,w\n" + "".join(f"{i},{i * 2}\n" for i in range(25)), encoding="utf-8")
    for rows in (1, 7, 100):
        merged: dict[str, list] = {}
        for chunk in read_chunks(good, rows=rows):
            assert len(chunk["v"]) <= rows
            for k, cells in chunk.items():
                merged.setdefault(k, []).extend(cells)
        assert merged == read_table(good)


def test_headerless_adult_with_columns(adult_data):
    table = read_table(adult_data, ["age", "hours-per-week", "income"], format="csv", columns=ADULT_COLUMNS)
    assert numeric_column(table["age"], "age", "adult").tolist() == AGES
    assert table["hours-per-week"] == [" 40", " 13", " 40", " 40", " 40"]  # cells as written
    assert [c.strip() for c in table["income"]] == ["<=50K"] * 5
    assert load_adult(adult_data)["age"].tolist() == AGES  # the dataset loader reads the same file
    points, names = read_csv_points(adult_data, ["age", "education-num"], column_names=ADULT_COLUMNS)
    assert names == ("age", "education-num") and points[:, 0].tolist() == AGES


def test_headerless_file_read_without_columns_is_not_quoted(adult_data):
    with pytest.raises(PrivregValueError, match="column 'age' is not among") as err:
        read_table(adult_data, ["age"], default_format="csv")
    msg = str(err.value)
    assert "no header row" in msg and "columns=" in msg
    assert "State-gov" not in msg and "77516" not in msg  # the first row is a record: never quoted
    # a first row with repeated cells (0, 0) is not quoted either
    with pytest.raises(PrivregValueError, match="more than once, holds numbers") as err:
        read_table(_write(adult_data.parent / "two.csv", "0,0\n1,2\n"))
    assert "'0'" not in str(err.value)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_header_rule_errors_name_the_columns(tmp_path):
    path = _write(tmp_path / "h.csv", "age,hours\n30,40\n")
    with pytest.raises(PrivregValueError, match=re.escape("column 'income' is not among the 2 column(s)")) as err:
        read_table(path, ["income"])
    assert "'age'" not in str(err.value)  # a CSV header is never quoted: it may be a record
    with pytest.raises(PrivregValueError, match="starts with a header row"):
        read_table(path, columns=["age", "hours"])  # --columns on a file that has a header
    with pytest.raises(PrivregValueError, match="more than once"):
        read_table(path, columns=["a", "a"])
    with pytest.raises(PrivregValueError, match="more cells than the 1 of the names of columns="):
        read_table(_write(tmp_path / "r.csv", "1,2\n"), columns=["a"])
    with pytest.raises(PrivregValueError, match="is empty"):
        read_table(_write(tmp_path / "e.csv", ""))
    for body in ("caf\xe9,x\n1,2\n", "a,b\n1,caf\xe9\n"):  # not UTF-8, in the header or a record
        (tmp_path / "latin1.csv").write_bytes(body.encode("latin-1"))
        with pytest.raises(PrivregValueError, match=re.escape("latin1.csv' is not UTF-8")) as err:
            read_table(tmp_path / "latin1.csv")
        assert "caf" not in str(err.value).replace(str(tmp_path), "")
    with pytest.raises(PrivregValueError, match=r"'.*nope\.csv' is not a file"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(PrivregValueError, match="jsonl, whose columns are named in the file"):
        read_table(_write(tmp_path / "j.jsonl", '{"a": 1}\n'), columns=["a"])


def test_formats_come_from_format_suffix_or_default():
    assert detect_format("x.csv") == "csv" and detect_format("x.jsonl.gz") == "jsonl"
    assert detect_format("x.pq") == "parquet" and detect_format("corpus.tar.gz") == "mail"
    assert detect_format("x.tgz") == "mail" and detect_format("adult.data", default="csv") == "csv"
    assert detect_format("x.csv", "jsonl") == "jsonl"
    with pytest.raises(PrivregValueError, match="suffix"):
        detect_format("adult.data")  # no guess without a default
    with pytest.raises(PrivregValueError, match="mail file by its suffix"):
        detect_format("c.tar.gz", formats=("csv", "jsonl"), default="csv")


def test_compression_is_read_from_the_content(tmp_path):
    text = "BZh,x\n1,2\n"  # starts like bzip2, but is text
    assert read_table(_write(tmp_path / "b.csv", text)) == {"BZh": ["1"], "x": ["2"]}
    (tmp_path / "c.csv").write_bytes(gzip.compress(b"a\n1\n"))  # gzip without a .gz suffix
    assert read_table(tmp_path / "c.csv") == {"a": ["1"]}
    (tmp_path / "d.csv.bz2").write_bytes(bz2.compress(b"a\n2\n"))
    assert read_table(tmp_path / "d.csv.bz2") == {"a": ["2"]}
    (tmp_path / "bomb.csv.gz").write_bytes(gzip.compress(b"a\n" + b"1\n" * (1 << 20)))
    with use_limits(Limits(max_input_gib=0.001)), pytest.raises(ResourceLimitError, match="--max-input-gib"):
        read_table(tmp_path / "bomb.csv.gz")
    whole = gzip.compress(("a\n" + "".join(f"{i * 7919 % 10007}\n" for i in range(20000))).encode())
    (tmp_path / "broken.csv.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(PrivregValueError, match=re.escape("broken.csv.gz")):
        read_table(tmp_path / "broken.csv.gz")


# --- JSONL and Parquet -------------------------------------------------------------------


def test_jsonl_values_missing_keys_and_bad_lines(tmp_path):
    path = _write(
        tmp_path / "r.jsonl",
        '{"u": 1, "t": "a"}\n{"u": null, "t": 2.5}\n\n{"t": true}\n{"u": "x", "t": NaN}\n',
    )
    assert read_table(path, ["u", "t"]) == {"u": ["1", None, None, "x"], "t": ["a", "2.5", "True", None]}
    assert read_table(path) == {"u": ["1", None, None, "x"], "t": ["a", "2.5", "True", None]}  # first line's keys
    with pytest.raises(PrivregValueError, match=re.escape("column 'v' is not in")) as err:
        read_table(path, ["v"])
    assert "['t', 'u']" in str(err.value)
    bad = _write(tmp_path / "bad.jsonl", '{"u": "a"}\n["SECRET"]\n')
    with pytest.raises(PrivregValueError, match="not a JSON object") as err:
        read_table(bad, ["u"])
    assert "SECRET" not in str(err.value) and "line 2" not in str(err.value)
    with pytest.raises(PrivregValueError, match="column 'u' holds a JSON array"):
        read_table(_write(tmp_path / "arr.jsonl", '{"u": ["SECRET"]}\n'), ["u"])
    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert read_table(gz, ["u", "t"]) == read_table(path, ["u", "t"])


def test_parquet_and_its_missing_extra(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "r.parquet"
    pd.DataFrame({"age": [39.0, None, 0.1], "name": ["a", "b", None]}).to_parquet(path, index=False)
    assert read_table(path) == {"age": ["39", None, "0.1"], "name": ["a", "b", None]}
    assert numeric_column(read_table(path, ["age"])["age"], "age", "p")[2] == 0.1  # shortest round trip
    with pytest.raises(PrivregValueError, match=re.escape("column 'x' is not in")) as err:
        read_table(path, ["x"])
    assert "['age', 'name']" in str(err.value)
    with pytest.raises(PrivregValueError, match="not a Parquet file"):
        read_table(_write(tmp_path / "fake.parquet", "a,b\n"))
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(PrivregValueError, match=re.escape(PARQUET_INSTALL)):
        read_table(path)
    assert PARQUET_INSTALL == "pip install 'privreg[parquet]'"


# --- mail archives ------------------------------------------------------------------------


def _message(sender: str, body: str) -> bytes:
    return f"From: Some One <{sender}>\nSubject: hi\nContent-Type: text/plain\n\n{body}\n".encode()


def _tarball(path: Path, files: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_mail_archives_as_messages_and_as_a_table(tmp_path):
    body = "hello there\n> quoted SECRET-QUOTE\nsee http://example.com/x now\n-- \nsig SECRET-SIG"
    files = {
        "c/easy-ham-1/1.txt": _message("alice@example.com", body),
        "c/spam-2/2.txt": _message("bob@example.org", "buy now"),
        "c/other/3.txt": _message("carol@example.net", "ignored"),
        "c/hard-ham-1/4.txt": b"Subject: no sender\n\nbody only",
    }
    for mode, name in (("w:gz", "m.tar.gz"), ("w:bz2", "m.tar.bz2"), ("w:xz", "m.tar.xz"), ("w", "m.tar")):
        path = _tarball(tmp_path / name, files, mode)
        got = [(m.name, m.folder) for m in mail_messages(path)]
        assert got == [
            ("c/easy-ham-1/1.txt", "easy-ham-1"),
            ("c/spam-2/2.txt", "spam-2"),
            ("c/hard-ham-1/4.txt", "hard-ham-1"),
        ]
    path = tmp_path / "m.tar.gz"
    assert [len(m.raw) for m in mail_messages(path, max_bytes=5)] == [5, 5, 5]
    (table,) = list(mail_chunks(path))
    assert tuple(table) == MAIL_COLUMNS
    assert table["label"] == ["ham", "spam", "ham"] and table["folder"] == ["easy-ham-1", "spam-2", "hard-ham-1"]
    assert table["text"][0] == "hello there see now"  # quote, URL and signature dropped
    assert table["user_id"][0].startswith("sender-") and "alice" not in table["user_id"][0]
    assert table["user_id"][2] is None  # no From: address
    with pytest.raises(PrivregValueError, match="not a readable tar archive"):
        list(mail_messages(_write(tmp_path / "x.tar.gz", "not a tar")))
    with pytest.raises(PrivregValueError, match=re.escape("column 'sender' is not in")):
        mail_chunks(path, ["sender"])


def test_spam_and_ngrams_read_the_same_tarball(tmp_path):
    files = {f"corpus/easy-ham-1/{i}.txt": _message(f"u{i % 3}@example.com", f"word{i} common") for i in range(6)}
    files["corpus/spam-1/9.txt"] = _message("spammer@example.com", "offer")
    path = _tarball(tmp_path / "corpus.tar.gz", files)
    msgs = read_corpus(path)
    assert len(msgs) == 7 and sorted(m.label for m in msgs) == [-1] * 6 + [1]
    rows = list(ham_records(path))
    assert len(rows) == 6 and {r["user_id"] for r in rows} == set(table_users(path))


def table_users(path: Path) -> list[str]:
    (table,) = list(mail_chunks(path, ["user_id", "label"]))
    return [u for u, lab in zip(table["user_id"], table["label"]) if lab == "ham" and u]


def test_ngrams_workflow_reads_a_spamassassin_tarball(tmp_path):
    """The ngrams workflow reads the tarball spam-filter reads (format from the suffix):
    ham messages only, one user per sender, bodies as the mail reader cleans them."""
    files = {}
    for i in range(40):
        files[f"spamassassin/easy-ham-2/{i:03}.txt"] = _message(
            f"user{i % 20}@example.com", f"the quick brown fox {i}\n> quoted words\n-- \nsignature"
        )
    files["spamassassin/spam-1/900.txt"] = _message("x@spam.example", "spamword " * 50)
    path = _tarball(tmp_path / "spamassassin.tar.gz", files)
    item = load_registry(plugins={"ngrams": ngrams_hooks}, autoload=False).get("ngrams")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path / "out")
    res = item.run(ctx, {"input": path, "max_n": 2, "max_keys": 10, "curator": True})
    tokenizer = Tokenizer()
    expected = sum(len(tokenizer.tokens(f"the quick brown fox {i}")) for i in range(40))
    assert res.metrics["tokens"] == expected  # no spam, no quoted lines, no signatures
    assert len(ctx.charger.charges) == 1
    with pytest.raises(PrivregValueError, match="columns"):
        item.run(WorkflowContext(), {"input": path, "columns": "a,b"})


# --- the workflows' --columns ------------------------------------------------------------


def test_ngrams_reads_a_headerless_csv_with_columns(tmp_path):
    rows = [f"u{i % 7},alpha beta gamma {i}" for i in range(30)]
    bare = _write(tmp_path / "bare.csv", "\n".join(rows) + "\n")
    named = _write(tmp_path / "named.csv", "user_id,text\n" + "\n".join(rows) + "\n")
    item = load_registry(plugins={"ngrams": ngrams_hooks}, autoload=False).get("ngrams")
    params = {"max_n": 2, "max_keys": 10, "curator": True}
    a = item.run(
        WorkflowContext(rng=InsecureReproducibleRandom(seed=2)), {"input": bare, "columns": "user_id,text", **params}
    )
    b = item.run(WorkflowContext(rng=InsecureReproducibleRandom(seed=2)), {"input": named, **params})
    assert a.metrics["tokens"] == b.metrics["tokens"] == 30 * 4 and a.metrics["counts"] == b.metrics["counts"]
    with pytest.raises(PrivregValueError, match="applies only to --backend local"):
        item.run(WorkflowContext(), {"input": bare, "columns": "user_id,text", "backend": "spark"})


def test_cli_bounded_mean_reads_a_headerless_csv_with_columns(capsys, tmp_path, adult_data):
    header = tmp_path / "with_header.csv"
    header.write_text(",".join(ADULT_COLUMNS) + "\n" + adult_data.read_text(encoding="utf-8"), encoding="utf-8")
    common = ["--column", "age", "--lower", "17", "--upper", "90", "--insecure-seed", "5"]
    cols = ",".join(ADULT_COLUMNS)
    assert (
        main(["run", "bounded-mean", "--input", str(adult_data), "--columns", cols, *common, "-o", str(tmp_path / "a")])
        == 0
    )
    assert main(["run", "bounded-mean", "--input", str(header), *common, "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    a = json.loads((tmp_path / "a" / "result.json").read_text())
    b = json.loads((tmp_path / "b" / "result.json").read_text())
    assert a == b  # same seed, same values read: the same release
    assert json.loads((tmp_path / "a" / "run.json").read_text())["parameters"]["columns"] == cols
    # without --columns the header-less file is refused, and its first row is not quoted
    assert main(["run", "bounded-mean", "--input", str(adult_data), *common, "-o", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--columns" in err and "State-gov" not in err
    # --columns on a file with a header row is refused, not read as a record
    assert (
        main(["run", "bounded-mean", "--input", str(header), "--columns", cols, *common, "-o", str(tmp_path / "d")])
        == 2
    )
    assert "starts with a header row" in capsys.readouterr().err


def test_cli_outliers_name_headerless_columns_with_column_names(capsys, tmp_path, adult_data):
    cols = ",".join(ADULT_COLUMNS)
    out = tmp_path / "o"
    code = main(
        [
            "run",
            "outlier-count",
            "--input",
            str(adult_data),
            "--column-names",
            cols,
            "--columns",
            "age,hours-per-week",
            "--insecure-seed",
            "1",
            "-o",
            str(out),
        ]
    )
    capsys.readouterr()
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert result["records"] == 5 and result["columns"] == ["age", "hours-per-week"]


def test_a_csv_header_is_never_quoted_and_a_byte_order_mark_is_not_a_name(tmp_path):
    """A header-less file read without --columns: its first record must not appear in
    the error, whatever it holds; a spreadsheet's BOM is not part of the first name."""
    secret = _write(tmp_path / "s.csv", "Alice Smith,alice@example.com,HIV positive\nBob,b@x.org,none\n")
    with pytest.raises(PrivregValueError) as err:
        read_table(secret, ["age"])
    assert "Alice" not in str(err.value) and "HIV" not in str(err.value) and "--columns" in str(err.value)
    dup = _write(tmp_path / "d.csv", "yes,yes\n1,2\n")
    with pytest.raises(PrivregValueError, match="names a column more than once") as err:
        read_table(dup)
    assert "yes" not in str(err.value)
    bom = tmp_path / "b.csv"
    bom.write_bytes("\ufeffage,hours\n30,40\n".encode())
    assert read_table(bom, ["age"])["age"] == ["30"]
    jl = tmp_path / "b.jsonl"
    jl.write_bytes('\ufeff{"age": "30"}\n'.encode())
    assert read_table(jl, ["age"])["age"] == ["30"]


def test_an_unterminated_csv_quote_is_refused_not_read_to_the_end(tmp_path):
    """Lenient CSV would read everything after a stray quote as one cell (rows lost in
    silence); the error names the file and the rule, never the cells."""
    bad = _write(tmp_path / "q.csv", 'age,hours\n30,40\n"31 secret,41\n32,42\n')
    with pytest.raises(PrivregValueError, match=r"not a readable CSV file .*unexpected end of data") as err:
        read_table(bad, ["age", "hours"])
    assert "secret" not in str(err.value) and "q.csv" in str(err.value)
    ok = _write(tmp_path / "ok.csv", 'age,hours\n"30",40\n"3""1",41\n')
    assert read_table(ok, ["age", "hours"])["age"] == ["30", '3"1']


def test_a_jsonl_value_split_over_two_lines_is_refused(tmp_path):
    """Neither line is an object; parsed together as one array they would be."""
    glued = _write(tmp_path / "g.jsonl", '{"age": ["30"\n"40"]}\n')
    with pytest.raises(PrivregValueError, match="not a JSON object"):
        read_table(glued, ["age"])
