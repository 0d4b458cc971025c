"""Audit of a privacy ledger: what was released, what it cost under every accountant,
what remains, and anything wrong (broken hash chain, overspending, test-only noise)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import attrs

from privreg.accountant import ACCOUNTANTS, make_accountant
from privreg.accountant.budget import accountant_options
from privreg.accountant.ledger import Ledger, LedgerIntegrityError, LedgerRow, format_head
from privreg.core.errors import PrivregError

__all__ = ["AuditReport", "audit_ledger", "format_report", "plot_report"]


@attrs.frozen(kw_only=True)
class AuditReport:
    """Everything ``privreg audit`` prints. ``cumulative[name][i]`` is the epsilon at the
    budget's delta after release i+1 under accountant ``name`` (None once it cannot
    account for some release)."""

    path: str
    budget_epsilon: float
    budget_delta: float
    rows: tuple[LedgerRow, ...]
    cumulative: dict[str, list[float | None]]
    best: list[float]
    integrity: tuple[str, ...]
    flags: tuple[str, ...]
    head: str = ""  # "SEQ:HASH" of the last row: keep it elsewhere, pass it as expect_head

    @property
    def spent(self) -> float:
        return self.best[-1] if self.best else 0.0

    @property
    def remaining(self) -> float:
        return self.budget_epsilon - self.spent

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger": self.path,
            "budget": {"epsilon": self.budget_epsilon, "delta": self.budget_delta},
            "releases": [
                {"seq": r.seq, "time": r.charge.timestamp, "label": r.charge.label,
                 "mechanism": r.charge.mechanism, "event": r.charge.event.to_dict(),
                 "randomness": dict(r.charge.randomness)}
                for r in self.rows
            ],
            "cumulative_epsilon": {k: [_finite(x) for x in xs] for k, xs in self.cumulative.items()},
            "spent_epsilon": _finite(self.spent),
            "remaining_epsilon": _finite(self.remaining),
            "integrity_problems": list(self.integrity),
            "flags": list(self.flags),
            "head": self.head,
        }


def _finite(x: float | None) -> float | None | str:
    return x if x is None or math.isfinite(x) else "inf"


def audit_ledger(path: str | Path, *, expect_head: str | None = None, key: bytes | None = None) -> AuditReport:
    """Re-account a ledger from scratch under every accountant. The ledger is opened
    read-only (nothing in it is created or changed, no lock is taken); ``expect_head`` is
    an earlier report's ``head`` (see :meth:`Ledger.verify`), ``key`` a keyed ledger's key."""
    ledger = Ledger.open_readonly(path, key=key)
    try:
        meta = ledger.meta
        try:
            eps_budget, delta = float(meta["budget"]["epsilon"]), float(meta["budget"]["delta"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PrivregError(f"ledger {str(path)!r}: its budget {meta['budget']!r} is not "
                               f"{{'epsilon': ..., 'delta': ...}} ({exc!r})") from exc
        integrity = tuple(ledger.verify(expect_head=expect_head))
        head = format_head(ledger.head())
        try:
            rows = tuple(ledger.rows(verify=False))
        except LedgerIntegrityError as exc:
            return AuditReport(path=str(path), budget_epsilon=eps_budget, budget_delta=delta, rows=(),
                               cumulative={}, best=[], integrity=integrity + (str(exc),), flags=(str(exc),),
                               head=head)
    finally:
        ledger.close()

    cumulative: dict[str, list[float | None]] = {}
    for name in ACCOUNTANTS:
        acc = make_accountant(name, **accountant_options(
            name, event_delta=meta.get("event_delta"), neighbouring=meta.get("neighbouring", "add_remove")))
        series: list[float | None] = []
        for row in rows:
            if acc is not None and acc.supports(row.charge.event):
                acc.compose(row.charge.event)
                series.append(acc.epsilon(delta))
            else:
                acc = None
                series.append(None)
        cumulative[name] = series
    best = [min((s[i] for s in cumulative.values() if s[i] is not None), default=math.inf)
            for i in range(len(rows))]

    flags = [f"hash chain: {p}" for p in integrity]
    for i, row in enumerate(rows):
        if best[i] > eps_budget:
            flags.append(f"release #{row.seq} ({row.charge.label or row.charge.mechanism}) brought epsilon "
                         f"to {best[i]:.6g} > budget {eps_budget:g}: the budget should have refused it")
        if row.charge.randomness.get("reproducible"):
            flags.append(f"release #{row.seq} ({row.charge.label or row.charge.mechanism}) used "
                         f"reproducible test-only randomness: it has no privacy")
    return AuditReport(path=str(path), budget_epsilon=eps_budget, budget_delta=delta, rows=rows,
                       cumulative=cumulative, best=best, integrity=integrity, flags=tuple(flags), head=head)


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else ("inf" if math.isinf(x) else f"{x:.6g}")


def format_report(report: AuditReport) -> str:
    """The plain-text audit."""
    out = [f"ledger {report.path}: {len(report.rows)} release(s); budget epsilon = "
           f"{report.budget_epsilon:g}, delta = {report.budget_delta:g}", ""]
    releases = [("#", "time (UTC)", "label", "mechanism", "event")]
    for r in report.rows:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.charge.timestamp))
        releases.append((str(r.seq), stamp, r.charge.label or "-", r.charge.mechanism, r.charge.event.to_json()))
    out += [_table(releases) if report.rows else "(no releases)", ""]
    totals = [("accountant", f"epsilon at delta={report.budget_delta:g}")]
    for name, series in report.cumulative.items():
        last = series[-1] if series else 0.0
        totals.append((name, _fmt(last) if last is not None else "unsupported event(s)"))
    out += [_table(totals), "",
            f"spent (best bound): {_fmt(report.spent)}   remaining: {_fmt(report.remaining)}", ""]
    out += ["flags:"] + [f"  ! {f}" for f in report.flags] if report.flags else ["flags: none"]
    if report.head:
        out += ["", f"head: {report.head}  (keep this elsewhere; pass it as --expect-head next time)"]
    return "\n".join(out)


def plot_report(report: AuditReport, path: str | Path) -> Path:
    """Cumulative epsilon per accountant against release index, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PrivregError("plotting needs matplotlib: pip install 'privreg[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4))
    x = list(range(1, len(report.rows) + 1))
    for name, series in report.cumulative.items():
        pts = [(i, y) for i, y in zip(x, series) if y is not None and math.isfinite(y)]
        if pts:
            ax.plot(*zip(*pts), marker=".", label=name)
    ax.axhline(report.budget_epsilon, color="black", linestyle="--", label="budget")
    ax.set_xlabel("release")
    ax.set_ylabel(f"cumulative epsilon at delta={report.budget_delta:g}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def report_json(report: AuditReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=True)
