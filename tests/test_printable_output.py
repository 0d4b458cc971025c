"""What privreg prints and writes holds no raw control character (C0, DEL, C1) other
than a newline: released strings are escaped visibly (``\\x07``)."""

from __future__ import annotations

import json
import re

import pytest

import privreg
from privreg.cli.main import main
from privreg.core import InsecureReproducibleRandom, WorkflowContext, WorkflowResult
from privreg.core.text import escape_controls

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
TEXT = {".txt", ".csv", ".json", ".jsonl"}
BINARY = {".sqlite", ".sqlite-lock", ".npz"}
# a word of string.printable's control characters (tab, newline, CR, VT, FF), escaped
ESCAPED_WORD = re.compile(r"\\x(09|0a|0b|0c|0d)")

# small configurations; the oov-discovery one keeps many noisy prefixes (max_prefixes
# large against the population), among them words holding control characters
SMALL = {
    "bounded-mean": {},
    "ngrams": {},
    "oov-discovery": {
        "users_per_layer": 300,
        "depth": 8,
        "passes": 1,
        "vocabulary": 500,
        "known_words": 20,
        "max_prefixes": 1000,
        "days": 10,
        "show": 1000,
    },
    "outlier-count": {},
    "outlier-subspaces": {},
    "pprl": {},
    "spam-filter": {},
}


def _text_files(folder):
    """The text of each file the run wrote (CSV rows end with CRLF: read as newlines)."""
    assert {p.suffix for p in folder.iterdir()} <= {*TEXT, *BINARY}
    out = {}
    for path in sorted(p for p in folder.iterdir() if p.suffix in TEXT):
        text = path.read_text(encoding="utf-8")
        out[path.name] = text.replace("\r\n", "\n") if path.suffix == ".csv" else text
    assert out
    return out


def test_every_workflow_has_a_small_configuration():
    assert set(SMALL) == {w.name for w in privreg.load_registry().items("workflow")}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_summary_and_output_files_hold_no_control_characters(name, tmp_path):
    item = privreg.load_registry().get(name)
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=3), output_dir=tmp_path)
    result = item.run(ctx, {**item.example.params, **SMALL[name]})
    assert not CONTROL.findall(result.summary)
    for file, text in _text_files(tmp_path).items():
        assert not CONTROL.findall(text), file
    if name == "oov-discovery":  # the configuration does release such words, escaped
        words = (tmp_path / "heavy_hitters.txt").read_text(encoding="utf-8").splitlines()
        escaped = [w for w in words if ESCAPED_WORD.search(w)]
        assert escaped and all(w in result.summary for w in escaped)


def test_released_ngrams_with_control_characters_are_escaped(tmp_path):
    """A token pattern that matches control characters (here \\S+): the released n-grams
    are written one a line, escaped, and the summary shows them escaped too."""
    path = tmp_path / "records.jsonl"
    row = "bell\x07ring now\x1b[31m red\\x07"
    path.write_text("".join(json.dumps({"user_id": f"u{i}", "text": row}) + "\n" for i in range(300)))
    item = privreg.load_registry().get("ngrams")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path / "out")
    params = {"input": path, "token_pattern": r"\S+", "max_n": 2, "epsilon": 4.0, "delta": 1e-6, "max_keys": 5}
    result = item.run(ctx, params)
    assert (tmp_path / "out" / "ngrams-2.txt").read_text() == "bell\\x07ring now\\x1b[31m\nnow\\x1b[31m red\\\\x07\n"
    assert "bell\\x07ring now\\x1b[31m" in result.summary and not CONTROL.findall(result.summary)


def test_the_command_line_prints_and_writes_no_control_characters(capsys, tmp_path):
    item = privreg.load_registry().get("oov-discovery")
    argv = []
    for k, v in {**item.example.params, **SMALL["oov-discovery"]}.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    assert main(["run", "oov-discovery", "--insecure-seed", "3", "-o", str(tmp_path), *argv]) == 0
    out, err = capsys.readouterr()
    assert ESCAPED_WORD.search(out) and not CONTROL.findall(out) and not CONTROL.findall(err)
    assert not any(CONTROL.findall(text) for text in _text_files(tmp_path).values())
    json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))


def test_a_workflow_result_summary_is_escaped():
    assert WorkflowResult(summary="a\x1b[31mb\nc\x85").summary == "a\\x1b[31mb\nc\\x85"


def test_escape_controls_is_visible_and_reversible():
    text = "a\x07b\tc\nd\x7f\x85\u200b\\x07 \u00e9"
    assert escape_controls(text) == "a\\x07b\\x09c\nd\\x7f\\x85\u200b\\x07 \u00e9"
    full = escape_controls(text, keep="", backslash=True)
    assert full == "a\\x07b\\x09c\\x0ad\\x7f\\x85\u200b\\\\x07 \u00e9"
    assert full.encode("latin-1", "backslashreplace").decode("unicode_escape") == text
    assert not CONTROL.search(escape_controls("".join(map(chr, range(0xA0))), keep=""))
