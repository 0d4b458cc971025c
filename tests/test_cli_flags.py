"""CLI errors name a workflow's flags, not its Python parameters (issue #29, item 5)."""

from __future__ import annotations

import pytest

from privreg.cli.flags import as_flags
from privreg.cli.main import main

NAMES = ["k", "h", "epsilon", "count_fraction", "max_keys", "keys"]


@pytest.mark.parametrize(
    "message, expected",
    [
        ("parameter count_fraction must be >= 0; got 2", "--count-fraction must be >= 0; got 2"),
        ("count_fraction must lie in [0, 1)", "--count-fraction must lie in [0, 1)"),
        ("h = 3 exceeds the 2 subspaces", "--h 3 exceeds the 2 subspaces"),
        ("parameter max_keys must be >= 1", "--max-keys must be >= 1"),  # not --max---keys
        ("k-anonymity and the keys of a kd-tree", "k-anonymity and the keys of a kd-tree"),  # words stay
        ("epsilon too small; pass a larger epsilon", "epsilon too small; pass a larger epsilon"),
    ],
)
def test_as_flags(message, expected):
    assert as_flags(message, NAMES) == expected


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["outlier-subspaces", "--count-fraction", "2"], "--count-fraction"),
        (["ngrams", "--max-keys", "-1"], "--max-keys"),
        (["outlier-count", "--k", "0"], "--k"),
    ],
)
def test_run_errors_name_the_flag(capsys, tmp_path, argv, flag):
    assert main(["run", *argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert flag in err and "_" not in err.split("error:", 1)[1].split(";")[0], err
