"""privreg audit: totals under every accountant, remaining budget, and flags."""

import json
import math
import re
import sqlite3

import pytest

from privreg.budget.ledger import Ledger
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.budget.verify import format_report, plot_report, verify_ledger
from privreg.cli.main import main
from privreg.core import ApproxDP, Charge, Gaussian, Laplace, PureDP

META = {
    "format": 1,
    "budget": {"epsilon": 1.0, "delta": 1e-6},
    "accountants": ["basic"],
    "event_delta": None,
    "neighbouring": "add_remove",
}


def write(path, events, randomness=None):
    """Rows written straight to the ledger, bypassing any budget check (as a buggy or
    malicious writer would)."""
    ledger = Ledger(path, meta=META)
    with ledger.transaction():
        for i, e in enumerate(events):
            ledger.append(
                Charge(
                    timestamp=1.7e9 + i,
                    mechanism="m",
                    parameters={},
                    event=e,
                    label=f"r{i + 1}",
                    randomness=randomness or {"reproducible": False},
                )
            )
    ledger.close()


def test_totals_remaining_and_no_flags_for_a_clean_ledger(tmp_path):
    with BudgetSession(budget=PrivacyBudget(epsilon=2.0, delta=1e-6), ledger=tmp_path / "l.sqlite") as s:
        for _ in range(3):
            s.charge(Laplace(scale=4.0), mechanism="laplace", parameters={})
    report = verify_ledger(tmp_path / "l.sqlite")
    assert report.flags == () and report.integrity == ()
    assert report.cumulative["basic"] == pytest.approx([0.25, 0.5, 0.75])
    assert report.cumulative["gdp"] == [None, None, None]
    assert report.spent <= 0.75 and report.remaining == pytest.approx(2.0 - report.spent)
    assert report.spent == min(s[-1] for s in report.cumulative.values() if s[-1] is not None)
    text = format_report(report)
    assert "remaining" in text and "flags: none" in text
    assert "gdp     unsupported (cannot account for 'laplace'" in text


def test_overspending_is_flagged_from_the_first_offending_release(tmp_path):
    write(tmp_path / "l.sqlite", [PureDP(epsilon=0.6), PureDP(epsilon=0.6), PureDP(epsilon=0.1)])
    report = verify_ledger(tmp_path / "l.sqlite")
    flagged = [f for f in report.flags if "should have refused" in f]
    assert len(flagged) == 2 and flagged[0].startswith("release #2 (r2)")
    assert report.remaining < 0


def test_test_only_randomness_is_flagged(tmp_path):
    write(tmp_path / "l.sqlite", [PureDP(epsilon=0.1)], randomness={"reproducible": True, "seed": 3})
    (flag,) = verify_ledger(tmp_path / "l.sqlite").flags
    assert "reproducible test-only randomness" in flag


def test_cli_audit_exit_codes_json_and_tampering(tmp_path, capsys):
    path = tmp_path / "l.sqlite"
    write(path, [PureDP(epsilon=0.2), Gaussian(sigma=20.0)])
    assert main(["audit", str(path)]) == 0
    capsys.readouterr()
    assert main(["audit", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["budget"] == {"epsilon": 1.0, "delta": 1e-6}
    assert len(data["releases"]) == 2 and data["flags"] == []
    assert data["cumulative_epsilon"]["basic"] == [0.2, None]
    db = sqlite3.connect(path)
    db.execute("UPDATE charges SET label = 'innocent' WHERE seq = 1")
    db.commit()
    db.close()
    assert main(["audit", str(path)]) == 3
    out = capsys.readouterr().out
    assert "hash chain: row 1: contents do not match its hash (edited)" in out


INF = re.compile(r"\binf\b")


def test_an_unsupported_event_reads_unsupported_everywhere(tmp_path, capsys):
    """Every filter of the rule meets an event it cannot price: the filter table, the
    non-adaptive table, spent and remaining, the flags, the JSON and 'ledger show' all
    say unsupported (JSON: null and the reason), never inf."""
    path = tmp_path / "l.sqlite"
    write(path, [Laplace(scale=4.0), Gaussian(sigma=5.0), ApproxDP(epsilon=0.1, delta=1e-7)])
    report = verify_ledger(path)
    assert report.spent is None and report.remaining is None and report.best[-1] is None
    assert report.unsupported["rule"]["basic"].startswith("cannot account for 'gaussian'")
    assert report.unsupported["rule"]["rdp"].startswith("cannot account for 'approx_dp'")
    assert report.nonadaptive["zcdp"] is None and "approx_dp" in report.unsupported["nonadaptive"]["zcdp"]
    text = format_report(report)
    assert not INF.search(text), text
    assert text.count("unsupported (cannot account for") == 3 + 6  # 3 filters, 6 accountants (not pld)
    assert "spent (under the rule): unsupported   remaining: unsupported" in text
    assert "release #3 (r3): every filter of the rule is unsupported" in text
    assert main(["audit", str(path), "--json"]) == 3
    out = capsys.readouterr().out
    data = json.loads(out)
    assert not INF.search(out)
    assert data["spent_epsilon"] is None and data["remaining_epsilon"] is None
    assert data["cumulative_epsilon"]["basic"] == [0.25, None, None]
    assert data["unsupported"]["rule"] == report.unsupported["rule"]
    why = "cannot account for 'laplace': no handler and no lower() guarantee"
    assert data["unsupported"]["nonadaptive"]["gdp"] == why
    assert main(["ledger", "show", str(path)]) == 3
    out = capsys.readouterr().out
    assert "spent:     epsilon unsupported" in out and "remaining: epsilon unsupported" in out


def test_an_infinite_bound_reads_inf_with_its_sign(tmp_path, capsys):
    """A filter that supports every event but whose delta share is used up: inf spent,
    -inf remaining (not unsupported)."""
    path = tmp_path / "l.sqlite"
    write(path, [ApproxDP(epsilon=0.1, delta=5e-7)])  # basic's share is delta / 3
    report = verify_ledger(path)
    assert report.spent == math.inf and report.remaining == -math.inf and "basic" not in report.unsupported["rule"]
    assert "spent (under the rule): inf   remaining: -inf" in format_report(report)
    main(["audit", str(path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["spent_epsilon"] == "inf" and data["remaining_epsilon"] == "-inf"


def test_cli_audit_of_a_missing_file_is_one_line(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "nope.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_plot_draws_every_supporting_accountant(tmp_path):
    pytest.importorskip("matplotlib")
    write(tmp_path / "l.sqlite", [Laplace(scale=10.0)] * 5)
    out = plot_report(verify_ledger(tmp_path / "l.sqlite"), tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_empty_ledger(tmp_path):
    BudgetSession(budget=PrivacyBudget(epsilon=1.0), ledger=tmp_path / "l.sqlite").close()
    report = verify_ledger(tmp_path / "l.sqlite")
    assert report.rows == () and report.spent == 0.0 and report.remaining == 1.0
    assert math.isfinite(report.remaining)


def test_ledger_replays_into_any_accountant(tmp_path):
    from privreg.accountant import make_accountant
    from privreg.core import UnsupportedEventError

    write(tmp_path / "l.sqlite", [Gaussian(sigma=4.0), Gaussian(sigma=4.0), Laplace(scale=10.0)])
    ledger = Ledger(tmp_path / "l.sqlite", create=False)
    pld = ledger.replay(make_accountant("pld"))
    direct = make_accountant("pld").compose(Gaussian(sigma=4.0), count=2).compose(Laplace(scale=10.0))
    # the replay composes the Gaussians one call each (two grids convolved), the direct
    # accountant merges them into one Gaussian (one grid): both upper bounds, 7e-9 apart
    assert pld.epsilon(1e-6) == pytest.approx(direct.epsilon(1e-6), rel=1e-7)
    with pytest.raises(UnsupportedEventError, match="gaussian"):
        ledger.replay(make_accountant("basic"))
