"""DPNE and the DPSU baselines, end to end on an :class:`~privreg.plugins.ngrams.engines.NgramEngine`.

Kim, Gopi, Kulkarni, Yekhanin (2021), "Differentially Private n-gram Extraction", NeurIPS:

* ``dpne``: Algorithm 1 (``variant="explicit"``: the histogram over all of V_k, zero
  weights included) or Algorithm 2 of Appendix A (``variant="scalable"``: V_k implicit,
  ``B_k ~ Binomial(|V_k| - |supp H_k|, Phi(-rho_k/sigma_k))`` spurious k-grams drawn
  uniformly from V_k minus the support). Pruning ``"both"`` (Algorithm 1) or ``"single"``
  (Section 3.1.1); rho_k = sigma_k PhiInv(1 - eta min(1, |S_{k-1}|/|V_k|)).
* ``dpsu-all``, ``dpsu-even``, ``dpsu-single``: the baselines of Section 3.1.2 / Table 3.

Privacy: the whole plan is charged to ``charger`` as one block *before* any noise is
drawn: ``Composed`` of the events of :mod:`privreg.plugins.ngrams.noise_plan` (Theorem 2.1:
one Gaussian per length, plus ApproxDP(0, delta/2) for the DPSU threshold). Every sigma_k
is fixed by the parameters before the first release (rho_k, which depends on released
sets, does not affect privacy), so the block is one mechanism with fixed parameters and
its tight non-adaptive bound holds; the whole run is (epsilon, delta)-DP for
add/remove-one-user neighbours, verified by the accountant named in the plan. A run that
stops early (V_k empty) has paid for the whole plan.

The scalable variant has Algorithm 1's output distribution when |V_k| is exact
(``valid_count="exact"``, the default, computed from the released sets in O(|S_{k-1}|));
with ``valid_count="estimate"`` (the paper's EstimateValidKgrams, Algorithm 3) rho_k and
the Binomial's n use a sampled estimate, as in the paper, and Theorem 2.1's proof no longer
covers the spurious part exactly (the estimate may be off by its sampling error).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from scipy import special

from privreg.analysis.selection import selection_key
from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.events import Composed
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.randomness import RandomSource, resolve_random
from privreg.noise.gaussian_tail import gaussian_tail_binomial, gaussian_tail_coins
from privreg.plugins.ngrams.engines import NgramEngine
from privreg.plugins.ngrams.levels import (
    PRUNINGS,
    Level,
    estimate_valid_count,
    sample_spurious,
    valid_count,
    valid_keys,
)
from privreg.plugins.ngrams.noise_plan import (
    METHODS,
    NoisePlan,
    plan_dpne,
    plan_dpsu_all,
    plan_dpsu_even,
    plan_dpsu_single,
)
from privreg.timing import PhaseTimer

__all__ = ["extract_ngrams", "ExtractionResult", "LengthReport", "VARIANTS", "VALID_COUNTS", "spurious_bound"]

VARIANTS = ("scalable", "explicit")
VALID_COUNTS = ("exact", "estimate")


@attrs.frozen(kw_only=True)
class LengthReport:
    """Public facts about one length: how many k-grams were released, the noise and
    threshold used and |V_k| (or its estimate), all functions of released data only."""

    k: int
    released: int
    sigma: float
    rho: float
    valid: int | None
    seconds: float


@attrs.frozen(kw_only=True)
class ExtractionResult:
    """The released n-grams per length (``ngrams[k]``: sorted strings), per-length reports
    and the noise plan that was charged."""

    method: str
    ngrams: dict[int, list[str]]
    lengths: dict[int, LengthReport]
    plan: NoisePlan
    tokens: int
    charged: int

    @property
    def counts(self) -> dict[int, int]:
        return {k: len(v) for k, v in self.ngrams.items()}


def spurious_bound(*, eta: float, prev_size: int, valid: int) -> float:
    """Paper 002, Proposition 2.2 with rho_k of Section 2: the expected number of
    spurious k-grams is at most ``|V_k| Q(rho_k/sigma_k) = eta min(|S_{k-1}|, |V_k|)``."""
    return eta * min(prev_size, valid)


def _rho_k(sigma: float, eta: float, prev_size: int, valid: int) -> float:
    """rho_k = sigma_k PhiInv(1 - eta min(1, |S_{k-1}|/|V_k|)), nudged up by 1e-12 relative
    so that float rounding can only lower the spurious rate."""
    q = eta * min(1.0, prev_size / valid)
    rho = -sigma * float(special.ndtri(q))
    return rho + abs(rho) * 1e-12 + 1e-300


def _charge_plan(charger: Charger, plan: NoisePlan, rng: RandomSource) -> None:
    """Charge every release of ``plan`` as one block, before any noise is drawn."""
    events = plan.events
    event = events[0] if len(events) == 1 else Composed(events=events)
    charger.charge(
        event,
        mechanism=f"ngrams:{plan.method}",
        parameters={
            "releases": [
                {"lengths": list(r.lengths), "sigma": r.sigma, "rho": r.rho, "max_keys": r.max_keys, "label": r.label}
                for r in plan.releases
            ],
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "applied_epsilon": plan.applied_epsilon,
            "verified_by": plan.verified_by,
        },
        label=f"{plan.method}: {len(events)} release(s), charged as one block",
        randomness=rng.describe(),
    )


def _progress(progress: ProgressCallback | bool | None) -> tuple[ProgressCallback | None, Any]:
    """``(callback, reporter to close)``: ``progress`` itself, or for the deprecated
    ``True`` the console reporter that :mod:`privreg.progress` chooses."""
    if progress is False or progress is None:
        return None, None
    if progress is not True:
        return check_progress("progress", progress), None
    warnings.warn(
        "extract_ngrams(progress=True) is deprecated: pass a progress callback, e.g. "
        "privreg.progress.console_reporter()",
        DeprecationWarning,
        stacklevel=3,
    )
    from privreg.progress import console_reporter

    reporter = console_reporter()
    return reporter, reporter


def extract_ngrams(
    engine: NgramEngine,
    *,
    charger: Charger,
    epsilon: float,
    delta: float,
    max_n: int,
    max_keys: int | tuple[int, ...] = 300,
    method: str = "dpne",
    schedule: str = "equal",
    decay: float | None = None,
    eta: float = 0.01,
    pruning: str = "both",
    variant: str = "scalable",
    valid_count_mode: str = "exact",
    sample_rate: float | None = None,
    length: int | None = None,
    explicit_limit: int = 20_000_000,
    rng: RandomSource | None = None,
    echo: Callable[[str], None] | None = None,
    progress: ProgressCallback | bool | None = None,
) -> ExtractionResult:
    """Extract n-grams of lengths 1..max_n with ``method`` (see the module docstring).

    ``progress``: a :data:`~privreg.core.progress.ProgressCallback` told of each release
    done (phase ``"n-gram extraction"``); it changes no result. ``True`` (deprecated) shows
    them on stderr (:func:`privreg.progress.console_reporter`).

    ``max_keys``: Delta_k, one int for every length or one per length (Delta_1..Delta_T).
    ``length``: the single length of ``dpsu-single``. The whole plan is charged to
    ``charger`` as one block before any noise is drawn; a refused charge
    (BudgetExceededError) stops the run before anything is released.
    """
    if not isinstance(engine, NgramEngine):
        raise PrivregTypeError(f"engine must be an NgramEngine; got {type(engine).__name__}")
    if method not in METHODS:
        raise PrivregValueError(f"method must be one of {METHODS}; got {method!r}")
    if variant not in VARIANTS:
        raise PrivregValueError(f"variant must be one of {VARIANTS}; got {variant!r}")
    if valid_count_mode not in VALID_COUNTS:
        raise PrivregValueError(f"valid_count_mode must be one of {VALID_COUNTS}; got {valid_count_mode!r}")
    if pruning not in PRUNINGS:
        raise PrivregValueError(f"pruning must be one of {PRUNINGS}; got {pruning!r}")
    callback, reporter = _progress(progress)  # before the charge: nothing may raise after it
    max_n = v.check_count("max_n", max_n)
    eta = v.check_probability("eta", eta, open_low=True, open_high=True)
    # a bool is an int here, so that check_count rejects it with the parameter's name
    keys = (max_keys,) * max_n if isinstance(max_keys, (int, np.integer)) else tuple(max_keys)
    rng = resolve_random(rng)
    say = echo or (lambda message: None)

    if method == "dpne":
        plan = plan_dpne(epsilon=epsilon, delta=delta, max_n=max_n, max_keys=keys, schedule=schedule, decay=decay)
    elif method == "dpsu-all":
        plan = plan_dpsu_all(epsilon=epsilon, delta=delta, max_n=max_n, max_keys=keys)
    elif method == "dpsu-even":
        plan = plan_dpsu_even(epsilon=epsilon, delta=delta, max_n=max_n, max_keys=keys)
    else:
        if length is None:
            raise PrivregValueError("method='dpsu-single' needs length=k (the one n-gram length to extract)")
        length = v.check_count("length", length)
        if length > max_n:
            raise PrivregValueError(f"length={length} exceeds max_n={max_n}")
        plan = plan_dpsu_single(epsilon=epsilon, delta=delta, length=length, max_keys=keys[length - 1])
    say(
        f"ngrams: {method}, epsilon={plan.epsilon:g}, delta={plan.delta:g}; noise verified by the "
        f"{plan.verified_by} accountant (epsilon {plan.verified_epsilon:.9g})"
    )
    _charge_plan(charger, plan, rng)
    secret = selection_key(rng)  # the key of every per-user choice of kept keys in this run
    try:
        bar = PhaseProgress(callback, "n-gram extraction", total=len(plan.releases), unit="release")
        if method == "dpne":
            ngrams, reports = _dpne(
                engine,
                plan,
                charger=charger,
                rng=rng,
                eta=eta,
                pruning=pruning,
                variant=variant,
                mode=valid_count_mode,
                sample_rate=sample_rate,
                explicit_limit=explicit_limit,
                secret=secret,
                say=say,
                bar=bar,
            )
        else:
            ngrams, reports = _dpsu(engine, plan, charger=charger, rng=rng, secret=secret, say=say, bar=bar)
        bar.finish()  # DPNE may stop early, when nothing is left to release
    finally:
        if reporter is not None:
            reporter.close()
    charged = len(plan.releases)  # the whole plan, charged as one block before any release
    return ExtractionResult(
        method=method, ngrams=ngrams, lengths=reports, plan=plan, tokens=engine.tokens_total, charged=charged
    )


def _dpne(
    engine: NgramEngine,
    plan: NoisePlan,
    *,
    charger: Charger,
    rng: RandomSource,
    eta: float,
    pruning: str,
    variant: str,
    mode: str,
    sample_rate: float | None,
    explicit_limit: int,
    secret: bytes,
    say: Callable[[str], None],
    bar: PhaseProgress,
) -> tuple[dict[int, list[str]], dict[int, LengthReport]]:
    ngrams: dict[int, list[str]] = {}
    reports: dict[int, LengthReport] = {}
    timer = PhaseTimer()  # wall seconds per length, for the reports
    # length 1: DPSU with the weighted Gaussian policy (Algorithm 6)
    r1 = plan.releases[0]
    rho1 = r1.fixed_rho
    hist = engine.unigram_histogram(max_keys=r1.max_keys, secret=secret)
    keep = gaussian_tail_coins(hist.counts, scale=hist.scale, rho=rho1, sigma=r1.sigma, rng=rng)
    s1 = np.asarray(hist.keys[keep], dtype=object)
    engine.set_unigrams(s1)
    level = Level.unigrams(int(s1.size))
    strings = [s1.astype(str)]
    ngrams[1] = strings[0].tolist()
    reports[1] = LengthReport(
        k=1, released=int(s1.size), sigma=r1.sigma, rho=float(rho1), valid=None, seconds=timer.lap("1")[0]
    )
    say(f"  1-grams: {s1.size:,} released (DPSU, sigma_1={r1.sigma:.4g}, rho_1={rho1:.4g})")
    bar.advance()
    for release in plan.releases[1:]:
        k = release.lengths[0]
        timer.mark()
        exact = valid_count(level, pruning=pruning)
        valid = exact if mode == "exact" else estimate_valid_count(level, pruning=pruning, rate=sample_rate, rng=rng)
        if level.size == 0 or valid == 0:
            say(f"  {k}-grams: V_{k} is empty; stopping (nothing left to release)")
            break
        rho = _rho_k(release.sigma, eta, level.size, valid)
        hist = engine.kgram_histogram(k, pruning=pruning, max_keys=release.max_keys, secret=secret)
        if variant == "explicit":
            domain = valid_keys(level, pruning=pruning, limit=explicit_limit)
            counts = np.zeros(domain.size, dtype=np.int64)
            j = np.searchsorted(domain, hist.keys)
            if hist.keys.size and (j.max() >= domain.size or not np.array_equal(domain[j], hist.keys)):
                raise PrivregValueError("internal error: a pruned k-gram is not in V_k")  # pragma: no cover
            counts[j] = hist.counts
            keep = gaussian_tail_coins(counts, scale=hist.scale, rho=rho, sigma=release.sigma, rng=rng)
            new_keys = domain[keep]
        else:
            keep = gaussian_tail_coins(hist.counts, scale=hist.scale, rho=rho, sigma=release.sigma, rng=rng)
            n_zero = max(valid - int(hist.keys.size), 0)
            b = gaussian_tail_binomial(n_zero, rho=rho, sigma=release.sigma, rng=rng)
            b = min(b, exact - int(hist.keys.size))  # an estimate may exceed what V_k holds
            spurious = sample_spurious(b, level, pruning=pruning, exclude=hist.keys, rng=rng)
            new_keys = np.concatenate([hist.keys[keep], spurious])  # disjoint; Level.build sorts
        level = Level.build(new_keys, level)
        engine.set_level(level)
        strings.append(level.strings(strings, strings[0]))
        ngrams[k] = strings[-1].tolist()
        reports[k] = LengthReport(
            k=k, released=level.size, sigma=release.sigma, rho=rho, valid=valid, seconds=timer.lap(str(k))[0]
        )
        say(
            f"  {k}-grams: {level.size:,} released (|V_{k}| {'=' if mode == 'exact' else '~'} {valid:,}, "
            f"sigma_{k}={release.sigma:.4g}, rho_{k}={rho:.4g}) [{reports[k].seconds:.2f} s]"
        )
        bar.advance()
    return ngrams, reports


def _dpsu(
    engine: NgramEngine,
    plan: NoisePlan,
    *,
    charger: Charger,
    rng: RandomSource,
    secret: bytes,
    say: Callable[[str], None],
    bar: PhaseProgress,
) -> tuple[dict[int, list[str]], dict[int, LengthReport]]:
    ngrams: dict[int, list[str]] = {}
    reports: dict[int, LengthReport] = {}
    timer = PhaseTimer()  # wall seconds per release, for the reports
    for release in plan.releases:
        rho = release.fixed_rho
        timer.mark()
        hist = engine.raw_histogram(release.lengths, max_keys=release.max_keys, secret=secret)
        keep = gaussian_tail_coins(hist.counts, scale=hist.scale, rho=float(rho), sigma=release.sigma, rng=rng)
        labels = engine.labels(hist.keys[keep])
        by_len: dict[int, list[str]] = {k: [] for k in release.lengths}
        for s in labels:
            by_len.setdefault(len(s.split(" ")), []).append(s)
        seconds = timer.lap(str(release.lengths))[0]
        for k in release.lengths:
            ngrams[k] = sorted(by_len.get(k, []))
            reports[k] = LengthReport(
                k=k, released=len(ngrams[k]), sigma=release.sigma, rho=float(rho), valid=None, seconds=seconds
            )
        say(
            f"  {release.label}: {sum(len(by_len.get(k, [])) for k in release.lengths):,} released "
            f"(sigma={release.sigma:.4g}, rho={rho:.4g}) [{seconds:.2f} s]"
        )
        bar.advance()
    return ngrams, reports


def table3(rows: dict[str, dict[int, int]], max_n: int, *, total: bool = True) -> str:
    """A table in the shape of paper 002's Table 3: one row per method, one column per
    length 1..max_n, and the total (omitted for DPSU-single, as in the paper)."""
    head = ["method"] + [str(k) for k in range(1, max_n + 1)] + (["total"] if total else [])
    lines = [head]
    for name, counts in rows.items():
        cells = [f"{counts.get(k, 0):,}" if k in counts else "-" for k in range(1, max_n + 1)]
        tot = "-" if name.lower().startswith("dpsu-single") else f"{sum(counts.values()):,}"
        lines.append([name] + cells + ([tot] if total else []))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in lines
    )
