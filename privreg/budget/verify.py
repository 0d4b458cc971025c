"""Verification of a privacy ledger (``privreg ledger verify``; ``privreg audit LEDGER`` is
an alias): what was released, under which rule the session was kept,
what it cost, what remains, and anything wrong (broken hash chain, a release the rule
should have refused -- even where a non-adaptive bound such as PLD would allow it --,
non-finite totals, test-only noise)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from privreg.accountant import make_accountant
from privreg.accountant.blocks import unsupported_reason
from privreg.accountant.plans import DEFAULT_ACCOUNTANTS, accountant_options, plan_bound
from privreg.budget.filters import make_filter, price_to_json
from privreg.budget.ledger import Checkpoint, LedgerIntegrityError, LedgerRow, format_head, parse_head
from privreg.budget.run_log import COMPLETE, RunEnd, read_ends
from privreg.budget.session import DEFAULT_FILTERS, filter_citations, rule_text
from privreg.budget.store import open_readonly
from privreg.core import validation as v
from privreg.core.errors import PrivregError, UnsupportedEventError
from privreg.core.events import (
    ZCDP,
    ApproxDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Laplace,
    LocalDP,
    PrivacyEvent,
    PureDP,
    SelfComposed,
    Shuffled,
    event_from_dict,
)
from privreg.core.files import atomic_write

__all__ = [
    "AuditReport",
    "audit_ledger",
    "verify_ledger",
    "stated_text",
    "release_table",
    "format_report",
    "plot_report",
    "PLOT_FORMATS",
    "RUN_KEY",
    "run_summaries",
]

#: The parameter under which ``privreg run`` records, in each charge, the run that made it:
#: ``{"id", "workflow", "started", "output"}`` (the audit lists the runs of a ledger).
RUN_KEY = "privreg.run"
#: The non-adaptive totals (information only) are computed for ledgers up to this many rows.
NONADAPTIVE_MAX_ROWS = 5000


def _seq_ranges(seqs: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    parts: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(parts)


def _run_status(run: dict[str, Any], numbers: list[int | None], ends: Mapping[str, RunEnd] | None) -> tuple[str, str]:
    """``(status, note)`` of a run: ``complete``, ``partial`` (killed or failed after some
    releases: its charges are spent budget that no finished run used), ``inconsistent``
    (its end record disagrees with its rows in the chain) or ``unknown`` (recorded before
    runs recorded their ends, or the ends cannot be read)."""
    n = len(numbers)
    if any(x is None for x in numbers):
        return "unknown", "recorded before runs recorded their end"
    if ends is None:
        return "unknown", "its end cannot be read"
    if numbers != list(range(1, n + 1)):
        return "inconsistent", f"its rows are releases {numbers} of the run, not 1-{n}"
    end = ends.get(run["id"])
    if end is None:
        return "partial", "no end recorded: killed, or still running"
    if end.releases != n:
        return "inconsistent", f"its end record says {end.releases} release(s), the chain holds {n}"
    if end.status == COMPLETE:
        return "complete", ""
    return "partial", f"failed after {n} release(s)"


def run_summaries(rows: Sequence[LedgerRow], ends: Mapping[str, RunEnd] | None = None) -> list[dict[str, Any]]:
    """The runs recorded in ``rows`` (under :data:`RUN_KEY`), in the order of their first
    release: id, workflow, started, output, envelope (the epsilon and delta it declared),
    releases and ``seqs`` (their rows, as ranges), and ``status`` with a ``note``: see
    :func:`_run_status`; ``ends`` are the recorded ends of the runs
    (:func:`privreg.budget.run_log.read_ends`; None: unknown)."""
    runs: dict[str, dict[str, Any]] = {}
    numbers: dict[str, list[int | None]] = {}
    for row in rows:
        run = row.charge.parameters.get(RUN_KEY)
        if not isinstance(run, dict):
            continue
        key = str(run.get("id", "?"))
        output = run.get("output", "?")
        entry = runs.setdefault(
            key,
            {
                "id": key,
                "workflow": str(run.get("workflow", "?")),
                "started": str(run.get("started", "?")),
                "output": "-" if output is None else str(output),
                "envelope": run.get("envelope"),
                "releases": [],
            },
        )
        entry["releases"].append(row.seq)
        number = run.get("release")
        numbers.setdefault(key, []).append(number if isinstance(number, int) else None)
    for key, entry in runs.items():
        entry["seqs"] = _seq_ranges(entry["releases"])
        entry["status"], entry["note"] = _run_status(entry, numbers[key], ends)
    return list(runs.values())


@attrs.frozen(kw_only=True)
class AuditReport:
    """Everything ``privreg ledger verify`` prints.

    ``rule`` says which rule kept the session. ``cumulative[name][i]`` is the epsilon after
    release i+1 under filter ``name`` of that rule; ``best[i]`` the smallest of them (a
    plan ledger: the plan's non-adaptive bound). ``nonadaptive`` holds each accountant's
    total over all releases as if they had been fixed in advance -- for information,
    valid only for such a sequence.

    One word for an accountant or filter that cannot price some event: *unsupported*.
    Its value is None (JSON null; from that release on for a filter, and ``best`` once
    every filter of the rule is), printed as ``unsupported (REASON)``, and
    ``unsupported["rule"][name]`` / ``unsupported["nonadaptive"][name]`` hold the reason.
    ``inf`` is only ever an infinite bound (e.g. a delta share used up).
    """

    path: str
    budget_epsilon: float
    budget_delta: float
    neighbouring: str
    rule: str
    rows: tuple[LedgerRow, ...]
    cumulative: dict[str, list[float | None]]
    best: list[float | None]
    nonadaptive: dict[str, float | None]
    integrity: tuple[str, ...]
    flags: tuple[str, ...]
    #: what the server lets happen that the trust model forbids (a budget on PostgreSQL:
    #: :meth:`~privreg.budget.store_postgres.PostgresLedger.deployment_problems`)
    deployment: tuple[str, ...] = ()
    head: str = ""  # "SEQ:HASH" of the last row: keep it elsewhere, pass it as expect_head
    unsupported: dict[str, dict[str, str]] = attrs.field(factory=lambda: {"rule": {}, "nonadaptive": {}})
    #: per release, what each filter charged for it in epsilon (its rise at the filter's
    #: share of delta; None: unsupported), re-derived from the rows before it
    charged: list[dict[str, float | None]] = attrs.field(factory=list)
    #: the first row re-derived (rows before it were trusted through a checkpoint)
    first_verified: int = 1
    #: the recorded ends of the ledger's runs (:mod:`privreg.budget.run_log`); None: unreadable
    run_ends: Mapping[str, RunEnd] | None = None

    def runs(self) -> list[dict[str, Any]]:
        """The runs under this ledger (:func:`run_summaries`), partial ones marked."""
        return run_summaries(self.rows, self.run_ends)

    @property
    def spent(self) -> float | None:
        """Epsilon spent under the rule (None: unsupported)."""
        return self.best[-1] if self.best else 0.0

    @property
    def remaining(self) -> float | None:
        spent = self.spent
        return None if spent is None else self.budget_epsilon - spent

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger": self.path,
            "budget": {"epsilon": self.budget_epsilon, "delta": self.budget_delta},
            "neighbouring": self.neighbouring,
            "rule": self.rule,
            "releases": [
                {
                    "seq": r.seq,
                    "time": r.charge.timestamp,
                    "label": r.charge.label,
                    "mechanism": r.charge.mechanism,
                    "event": r.charge.event.to_dict(),
                    "stated": stated_text(r.charge.stated, r.charge.event),
                    "charged_epsilon": (
                        {k: _finite(x) for k, x in self.charged[i].items()} if i < len(self.charged) else {}
                    ),
                    "total_epsilon": _finite(self.best[i]) if i < len(self.best) else None,
                    "randomness": dict(r.charge.randomness),
                }
                for i, r in enumerate(self.rows)
            ],
            "first_verified": self.first_verified,
            "cumulative_epsilon": {k: [_finite(x) for x in xs] for k, xs in self.cumulative.items()},
            "nonadaptive_epsilon": {k: _finite(x) for k, x in self.nonadaptive.items()},
            "spent_epsilon": _finite(self.spent),
            "remaining_epsilon": _finite(self.remaining),
            "unsupported": {k: dict(reasons) for k, reasons in self.unsupported.items()},
            "runs": self.runs(),
            "integrity_problems": list(self.integrity),
            "deployment_problems": list(self.deployment),
            "flags": list(self.flags),
            "head": self.head,
        }


def _finite(x: float | None) -> float | str | None:
    """JSON has no inf: an infinite bound as the string ``"inf"`` (``"-inf"``); None
    (unsupported) as null."""
    return x if x is None or math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _rule_of(meta: dict[str, Any]) -> dict[str, Any]:
    """The ledger's rule; a format-1 ledger (kept by the old hindsight rule) is re-checked
    under the default filters with its event_delta."""
    if meta.get("format", 1) == 1:
        return {
            "kind": "filters",
            "filters": list(DEFAULT_FILTERS),
            "event_delta": meta.get("event_delta"),
            "legacy": True,
        }
    rule = meta.get("rule")
    if not isinstance(rule, dict) or rule.get("kind") not in ("filters", "plan"):
        raise PrivregError(f"the ledger's rule {rule!r} is not a privreg rule (filters or plan)")
    return dict(rule)


def _nonadaptive(
    events: list[PrivacyEvent], delta: float, neighbouring: str, event_delta: float | None
) -> tuple[dict[str, float | None], dict[str, str]]:
    """Each accountant's total (None: unsupported) and why it is unsupported."""
    out: dict[str, float | None] = {}
    why: dict[str, str] = {}
    block = Composed(events=tuple(events)) if events else None
    for name in DEFAULT_ACCOUNTANTS:
        acc = make_accountant(name, **accountant_options(name, event_delta=event_delta, neighbouring=neighbouring))
        if block is None:
            out[name] = 0.0
            continue
        try:
            out[name] = acc.compose(block).epsilon(delta)
        except UnsupportedEventError as exc:
            out[name], why[name] = None, unsupported_reason(exc, block)
    return out, why


def stated_text(stated: PrivacyEvent | None, event: PrivacyEvent) -> str:
    """The guarantee of a release as the user stated it: ``stated`` if the release gave
    one, else what its event says in the user's terms (epsilon of a Laplace, rho of a
    discrete Gaussian, ...), else the event's kind."""
    for e in (stated, event):
        if isinstance(e, PureDP):
            return f"eps={e.epsilon:.6g}"
        if isinstance(e, ApproxDP):
            return f"(eps={e.epsilon:.6g}, delta={e.delta:.3g})"
        if isinstance(e, ZCDP):
            return f"rho={e.rho:.6g}"
    if isinstance(event, Laplace):
        return f"eps={event.sensitivity / event.scale:.6g}"
    if isinstance(event, (DiscreteLaplace, Exponential)):
        return f"eps={event.epsilon:.6g}"
    if isinstance(event, DiscreteGaussian):
        return f"rho={event.rho:.6g}"
    if isinstance(event, LocalDP):
        return f"local eps0={event.epsilon0:.6g}"
    if isinstance(event, SelfComposed):
        return f"{event.count} x {stated_text(None, event.event)}"
    if isinstance(event, Composed):
        return f"block of {len(event.events)}"
    if isinstance(event, Shuffled):
        return f"{event.num_reports} shuffled reports"
    return event.kind


def _checkpoint_at(checkpoints: Sequence[Checkpoint], since: str | None) -> Checkpoint | None:
    """The newest checkpoint at or before the anchored row ``since`` (SEQ:HASH)."""
    if since is None:
        return None
    seq, _ = parse_head(since, "since")
    if seq is None:
        raise PrivregError(f"since {since!r} must be SEQ:HASH as printed by 'privreg ledger verify' (head: ...)")
    found = [c for c in checkpoints if c.seq <= seq]
    return found[-1] if found else None


def verify_ledger(
    path: str | Path, *, expect_head: str | None = None, key: bytes | None = None, since: str | None = None
) -> AuditReport:
    """Re-derive a ledger's decisions from its rows under the rule that kept it: every
    row's price from the rows before it (flagging a stored price that differs), every
    checkpoint's state, and every release the rule should have refused; also non-finite
    totals, test-only noise and a broken chain. The ledger is opened read-only (nothing in
    it is created or changed, no lock is taken); ``expect_head`` is an earlier report's
    ``head`` (see :meth:`Ledger.verify`), ``key`` a keyed ledger's key.

    ``since``: the head (SEQ:HASH) of an earlier verification you trust. The anchor is
    checked as ``expect_head`` is; then only the rows after the newest checkpoint at or
    before it are re-derived, starting from that checkpoint's state -- incremental, the
    cost of the rows since, not of the whole ledger."""
    ledger = open_readonly(path, key=key)
    try:
        meta = ledger.meta
        try:
            eps_budget, delta = float(meta["budget"]["epsilon"]), float(meta["budget"]["delta"])
            neighbouring = v.check_relation(
                "neighbouring", meta["budget"].get("neighbouring", meta.get("neighbouring", "add_remove"))
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PrivregError(
                f"ledger {str(path)!r}: its budget {meta.get('budget')!r} is not "
                f"{{'epsilon': ..., 'delta': ...}} ({exc!r})"
            ) from exc
        head = format_head(ledger.head())
        checkpoint_problems: list[str] = []
        try:
            checkpoints = ledger.checkpoints()
        except LedgerIntegrityError as exc:
            checkpoints, checkpoint_problems = [], [str(exc)]
        start = _checkpoint_at(checkpoints, since)
        after = start.seq if start else 0
        if since is not None:
            anchored = parse_head(since, "since")[0]
            if anchored is not None and anchored < after:  # cannot happen: the checkpoint is at or before it
                raise PrivregError(f"since {since!r} is before the checkpoint at row {after}")
            problems, raw = ledger.scan(after=after, expect_head=since, name="since")
        else:
            problems, raw = ledger.scan(expect_head=expect_head)
        integrity = tuple(problems) + tuple(checkpoint_problems)
        # what the server lets roles do (PostgreSQL): not the chain's problems, reported apart
        deployment = tuple(getattr(ledger, "deployment_problems", list)())
        try:
            rows = tuple(ledger.decode(raw))
        except LedgerIntegrityError as exc:
            return AuditReport(
                path=str(path),
                budget_epsilon=eps_budget,
                budget_delta=delta,
                neighbouring=neighbouring,
                rule="unknown (the ledger cannot be decoded)",
                rows=(),
                cumulative={},
                best=[],
                nonadaptive={},
                integrity=integrity + (str(exc),),
                flags=(str(exc),) + tuple(f"deployment: {p}" for p in deployment),
                deployment=deployment,
                head=head,
            )
    finally:
        ledger.close()

    rule = _rule_of(meta)
    event_delta = rule.get("event_delta")
    events = [r.charge.event for r in rows]
    flags = [f"hash chain: {p}" for p in integrity] + [f"deployment: {p}" for p in deployment]
    if start is None and len(events) <= NONADAPTIVE_MAX_ROWS:
        nonadaptive, nonadaptive_why = _nonadaptive(events, delta, neighbouring, event_delta)
    else:  # information only, and costly on long ledgers: left out
        nonadaptive, nonadaptive_why = {}, {}
    unsupported: dict[str, dict[str, str]] = {"rule": {}, "nonadaptive": nonadaptive_why}
    cumulative: dict[str, list[float | None]] = {}
    charged: list[dict[str, float | None]] = []
    best: list[float | None]
    first = (start.seq if start else 0) + 1
    if rule["kind"] == "plan":
        plan = [event_from_dict(d) for d in rule["plan"]]
        found, name = plan_bound(plan, delta=delta, neighbouring=neighbouring, event_delta=event_delta)
        bound = None if plan and name == "none" else found
        if bound is None:
            unsupported["rule"]["plan"] = "no non-adaptive accountant supports every event of the plan"
        text = (
            f"declared plan of {len(plan)} release(s), non-adaptive bound epsilon "
            f"{_fmt(bound, unsupported['rule'].get('plan', ''))}"
            + (f" by {name}" if bound is not None else "")
            + " (valid because every release was fixed in advance)"
        )
        best = [bound] * len(rows)
        for i, row in enumerate(rows):
            if i >= len(plan) or row.charge.event != plan[i]:
                flags.append(
                    f"release #{row.seq} ({row.charge.label or row.charge.mechanism}) is not release "
                    f"#{i + 1} of the declared plan: the session should have refused it"
                )
                best[i:] = [math.inf] * (len(rows) - i)
                break
        if rows and bound is None:
            flags.append(f"the declared plan is unsupported ({unsupported['rule']['plan']})")
        elif rows and bound is not None and not bound <= eps_budget:
            flags.append(f"the declared plan costs epsilon {_fmt(bound)} > budget {eps_budget:g}")
    else:
        names = rule["filters"]
        share = delta / len(names)
        filters = [
            make_filter(n, epsilon=eps_budget, delta=share, neighbouring=neighbouring, event_delta=event_delta)
            for n in names
        ]
        if start is not None:
            try:
                for f in filters:
                    f.load_state(start.state[f.name])
            except (KeyError, TypeError, ValueError):
                flags.append(f"checkpoint at row {start.seq} does not hold the rule's filters")
        text = rule_text(names, delta)
        if rule.get("legacy"):
            text += (
                "; this format-1 ledger was kept by the old rule (the best non-adaptive bound in "
                "hindsight), which is not valid under adaptive use: re-checked here"
            )
        by_seq = {c.seq: c for c in checkpoints}
        cumulative = {f.name: [] for f in filters}
        best = []
        for row in rows:
            before = [f.spent() for f in filters]
            derived = [f.price(row.charge.event, row.charge.stated) for f in filters]
            if row.prices:
                for f, p in zip(filters, derived):
                    stored = row.prices.get(f.name)
                    if stored != price_to_json(p):
                        flags.append(
                            f"release #{row.seq} ({row.charge.label or row.charge.mechanism}): the price stored "
                            f"for filter {f.name} differs from the one re-derived from the rows before it: the "
                            f"row was altered after it was charged, or priced by a different rule"
                        )
            step: dict[str, float | None] = {}
            for f, p, b in zip(filters, derived, before):
                f.apply(p)
                a = f.spent()
                cumulative[f.name].append(None if f.dead else a)
                step[f.name] = None if f.dead else (a - b if math.isfinite(a) else math.inf)
            charged.append(step)
            alive = [f.spent() for f in filters if not f.dead]
            best.append(min(alive) if alive else None)
            cp = by_seq.get(row.seq)
            if cp is not None and dict(cp.state) != {f.name: f.state() for f in filters}:
                flags.append(
                    f"checkpoint at row {row.seq}: its state differs from the state re-derived from the rows "
                    f"(the checkpoint or the rows before it were altered)"
                )
        unsupported["rule"] = {f.name: f.dead for f in filters if f.dead}
        for i, row in enumerate(rows):
            now = best[i]
            if now is None or now > eps_budget:
                what = row.charge.label or row.charge.mechanism
                finite = [x for x in nonadaptive.values() if x is not None and math.isfinite(x)]
                pld_note = ""
                if i == len(rows) - 1 and finite and min(finite) <= eps_budget:
                    pld_note = (
                        f" (a non-adaptive bound, {_fmt(min(finite))}, would allow it, but only for a "
                        f"sequence fixed in advance)"
                    )
                if now is None:
                    flags.append(
                        f"release #{row.seq} ({what}): every filter of the rule is unsupported for the "
                        f"releases up to it: the budget should have refused it{pld_note}"
                    )
                elif math.isfinite(now):
                    flags.append(
                        f"release #{row.seq} ({what}) brought epsilon to {now:.6g} > budget "
                        f"{eps_budget:g} under every filter of the rule: the budget should have "
                        f"refused it{pld_note}"
                    )
                else:
                    flags.append(
                        f"release #{row.seq} ({what}): no filter of the rule can vouch for the releases "
                        f"up to it (total inf): the budget should have refused it{pld_note}"
                    )
    for name, total in nonadaptive.items():
        if total is not None and math.isnan(total):
            flags.append(f"accountant {name}: total is NaN")
    for row in rows:
        if row.charge.randomness.get("reproducible"):
            flags.append(
                f"release #{row.seq} ({row.charge.label or row.charge.mechanism}) used "
                f"reproducible test-only randomness: it has no privacy"
            )
    return AuditReport(
        path=str(path),
        budget_epsilon=eps_budget,
        budget_delta=delta,
        neighbouring=neighbouring,
        rule=text,
        rows=rows,
        cumulative=cumulative,
        best=best,
        nonadaptive=nonadaptive,
        integrity=integrity,
        deployment=deployment,
        flags=tuple(flags),
        head=head,
        unsupported=unsupported,
        charged=charged,
        first_verified=first,
        run_ends=read_ends(path),
    )


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _fmt(x: float | None, why: str = "") -> str:
    """An epsilon as printed: ``unsupported (WHY)`` for None, ``inf``/``-inf`` for an
    infinite bound."""
    if x is None:
        return f"unsupported ({why})" if why else "unsupported"
    return f"{x:.6g}"


def _relation_note(event: PrivacyEvent, budget_relation: str) -> str:
    """`` (add/remove)`` when a release's guarantee is for add/remove neighbours under a
    replace-one budget: it is charged by group privacy, twice its epsilon."""
    if budget_relation == "replace_one" and event.neighbouring in (None, "add_remove") and event.kind != "local_dp":
        return " add/remove"
    return ""


def release_table(report: AuditReport) -> str:
    """One line per release in the user's terms: its number, time, name and mechanism, the guarantee
    as stated, what each filter charged for it in epsilon (at its share of the budget's
    delta) and the running total against the budget."""
    if not report.rows:
        return "(no releases)"
    names = list(report.cumulative)
    header = ("#", "time (UTC)", "release", "mechanism", "as stated", *(f"{n} eps" for n in names), "total eps")
    lines = [header]
    for i, r in enumerate(report.rows):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.charge.timestamp))
        step = report.charged[i] if i < len(report.charged) else {}
        total = report.best[i] if i < len(report.best) else None
        lines.append(
            (
                str(r.seq),
                stamp,
                r.charge.label or "-",
                r.charge.mechanism,
                stated_text(r.charge.stated, r.charge.event) + _relation_note(r.charge.event, report.neighbouring),
                *(_fmt(step.get(n)) for n in names),
                f"{_fmt(total)} / {report.budget_epsilon:g}",
            )
        )
    return _table(lines)


def _status_text(run: Mapping[str, Any]) -> str:
    """A run's status as printed: ``partial (failed after 1 release(s))``."""
    return f"{run['status']} ({run['note']})" if run["note"] else str(run["status"])


def format_report(report: AuditReport) -> str:
    """The plain-text audit."""
    out = [
        f"ledger {report.path}: {len(report.rows)} release(s); budget epsilon = "
        f"{report.budget_epsilon:g}, delta = {report.budget_delta:g}, neighbours: {report.neighbouring}",
        f"rule: {report.rule}",
        "",
    ]
    out += [release_table(report), ""]
    runs = report.runs()
    if runs:
        table = [("run", "workflow", "started (UTC)", "releases", "status", "output folder")]
        table += [(r["id"], r["workflow"], r["started"], r["seqs"], _status_text(r), r["output"]) for r in runs]
        partial = sum(1 for r in runs if r["status"] == "partial")
        out += [f"{len(runs)} run(s) under this budget:", _table(table)]
        if partial:
            out += [
                f"{partial} partial run(s): killed or failed after charging; their releases are spent budget "
                f"(counted above) that no finished run used"
            ]
        out += [""]
    if report.cumulative:
        out += ["filters (each proven for fully adaptive use):"]
        out += [f"  {line}" for line in filter_citations(list(report.cumulative))] + [""]
        totals = [("filter", f"epsilon at its share of delta={report.budget_delta:g}")]
        for name, series in report.cumulative.items():
            last = series[-1] if series else 0.0
            totals.append((name, _fmt(last, report.unsupported["rule"].get(name, ""))))
        out += [_table(totals), ""]
    info = [("non-adaptive accountant", f"epsilon at delta={report.budget_delta:g} (valid only if fixed in advance)")]
    for name, total in report.nonadaptive.items():
        info.append((name, _fmt(total, report.unsupported["nonadaptive"].get(name, ""))))
    out += [_table(info), "", f"spent (under the rule): {_fmt(report.spent)}   remaining: {_fmt(report.remaining)}", ""]
    out += ["flags:"] + [f"  ! {f}" for f in report.flags] if report.flags else ["flags: none"]
    if report.head:
        out += ["", f"head: {report.head}  (keep this elsewhere; pass it as --expect-head next time)"]
    return "\n".join(out)


#: The image formats ``plot_report`` writes, by the suffix of its path.
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def plot_report(report: AuditReport, path: str | Path) -> Path:
    """Cumulative epsilon under each filter of the rule against the release number (one
    line per filter, integer ticks) and the budget, as a PNG (or PDF, SVG, JPEG by the
    suffix of ``path``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise PrivregError("plotting needs matplotlib: pip install 'privreg[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4))
    x = [r.seq for r in report.rows]
    for name, series in (report.cumulative or {"rule": list(report.best)}).items():
        pts = [(i, y) for i, y in zip(x, series) if y is not None and math.isfinite(y)]
        if pts:
            ax.plot(*zip(*pts), marker=".", label=name)
        else:  # named in the legend all the same: a filter that could not price these releases
            ax.plot([], [], marker=".", label=f"{name} (unsupported)")
    ax.axhline(report.budget_epsilon, color="black", linestyle="--", label="budget")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("release")
    share = report.budget_delta / max(1, len(report.cumulative))
    ax.set_ylabel(f"cumulative epsilon (each filter at delta {share:.3g})")
    ax.set_title(f"{len(report.rows)} release(s), budget epsilon {report.budget_epsilon:g}")
    ax.legend()
    fig.tight_layout()
    suffix = Path(path).suffix.lower().lstrip(".")
    try:  # written atomically: never a half-written image
        with atomic_write(path, "--plot file", mode="wb") as fh:
            fig.savefig(fh, dpi=120, format=suffix if suffix in PLOT_FORMATS else "png")
    finally:
        plt.close(fig)
    return Path(path)


def report_json(report: AuditReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=True)


#: The former name of :func:`verify_ledger` ("audit" now means the empirical auditor only).
audit_ledger = verify_ledger
