"""The ``exact`` check: a declared output law, tested against the item's outputs, then its
exact privacy loss on the declared and the extreme neighbours compared with the claim.

1. **The law is the item's.** ``law_samples`` outputs on each declared neighbour are
   compared with the declared law on a fixed family of events (tails at the declared
   quantiles, the most likely outcomes, the outcomes the law does not list). For each
   event of declared probability ``pi`` and count ``K``, the exact two-sided
   Clopper-Pearson interval at level ``alpha / (2 * events)`` must contain ``pi``
   (Clopper-Pearson 1934): if the law is right, the check fails with probability at most
   ``alpha`` (union bound over events and neighbours).
2. **The exact loss.** The hockey-stick divergence between the laws on two neighbours
   (:mod:`privreg.audit.exact`) at each claimed ``(epsilon, delta)``: the pure claim when
   the event has one, otherwise the stated guarantee and the claims at the delta the
   event states (an ``ApproxDP``'s, or the sum over a ``Composed``'s ``ApproxDP`` parts)
   and at delta 1e-2 and 1e-5. A lower bound above ``delta`` (relative slack 1e-6,
   absolute 1e-15) is a violation -- deterministic, whatever the seed, with no sampling error.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from privreg.audit.claims import Claim, claim_for
from privreg.audit.exact import exact_loss
from privreg.audit.extreme import extreme_neighbours, show_input
from privreg.audit.stats import clopper_pearson_lower, clopper_pearson_upper
from privreg.core.charging import EventLog
from privreg.core.errors import PrivregError
from privreg.core.events import ApproxDP, Composed
from privreg.core.items import RegistryItem
from privreg.core.laws import (
    DensityLaw,
    DiscreteGaussianLaw,
    DiscreteLaw,
    OutputLaw,
    ProductLaw,
    aligned_factors,
    check_law,
)
from privreg.core.mechanism import Mechanism
from privreg.core.randomizer import Randomizer

__all__ = ["EXACT_DELTAS", "claims_of", "fit_problems", "law_on"]

#: The deltas at which an item without a pure claim is checked (with its stated guarantee).
EXACT_DELTAS = (1e-2, 1e-5)
#: Quantile tails and point masses tested per coordinate.
_TAILS = 12
_POINTS = 6
#: Coordinates of a product law tested (those that differ between the neighbours first).
_MAX_FACTORS = 8
#: Discrete Gaussian laws with at most this many outcomes are tested outcome by outcome.
_LISTED = 400_001


def law_on(obj: Any, value: Any) -> OutputLaw | None:
    """The law ``obj`` declares on ``value`` (validated as a release would); None when it
    declares none. A PrivregError from validation propagates (the input is refused)."""
    if isinstance(obj, Randomizer):
        rows = obj.validate_inputs(np.asarray(value).reshape(1, *np.asarray(value).shape[1:]))
        return check_law(obj.output_law(rows[0]), type(obj).__name__)
    return check_law(obj.output_law(obj.validate_input(value)), type(obj).__name__)


def claims_of(obj: Any) -> list[Claim]:
    """What ``obj`` claims for one release: ``epsilon0`` for a randomizer; the pure claim
    of a mechanism's event when it has one, otherwise its stated guarantee and the claims
    at the delta the event states and at :data:`EXACT_DELTAS`."""
    if isinstance(obj, Randomizer):
        return [Claim(epsilon=float(obj.epsilon0), delta=0.0, accountant="epsilon0")]
    event = obj.privacy_event()
    pure = claim_for(event, delta=0.0)
    if math.isfinite(pure.epsilon):
        return [pure]
    out = []
    stated = obj.stated_guarantee()
    if stated is not None and hasattr(stated, "epsilon") and hasattr(stated, "delta"):
        out.append(Claim(epsilon=float(stated.epsilon), delta=float(stated.delta), accountant="stated"))
    charged = _charged_delta(event)
    for delta in ((charged,) if charged > 0 else ()) + EXACT_DELTAS:
        claim = claim_for(event, delta=delta)
        if math.isfinite(claim.epsilon):
            out.append(claim)
    return out


def _charged_delta(event: Any) -> float:
    """The delta an event states: an ``ApproxDP``'s, summed over the parts of a
    ``Composed`` (the thresholding mechanisms' ``ApproxDP(0, delta)``); 0 otherwise."""
    if isinstance(event, ApproxDP):
        return float(event.delta)
    if isinstance(event, Composed):
        return sum(_charged_delta(part) for part in event.events)
    return 0.0


def _draw(obj: Any, value: Any, n: int, rng: Any) -> Any:
    if isinstance(obj, Randomizer):
        arr = np.asarray(value)
        users = np.repeat(arr.reshape(1, *arr.shape[1:]) if arr.ndim else arr.reshape(1), n, axis=0)
        return obj.randomize(users, charger=EventLog(), rng=rng).reports
    return obj.release_many(value, n, charger=EventLog(), rng=rng).output


def _at_most(cut: Any, codes: np.ndarray) -> np.ndarray:
    return np.asarray(codes <= cut)


def _equal(code: Any, codes: np.ndarray) -> np.ndarray:
    return np.asarray(codes == code)


def _no_value(codes: np.ndarray) -> np.ndarray:
    return np.isnan(np.asarray(codes, dtype=np.float64))


def _events(
    law: DiscreteLaw | DensityLaw | DiscreteGaussianLaw,
) -> list[tuple[str, Callable[[np.ndarray], np.ndarray], float, float]]:
    """(description, indicator of codes, declared probability low, high)."""
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray], float, float]] = []
    if isinstance(law, DiscreteGaussianLaw):
        window = law.window(_LISTED) if law.sigma < 1e4 else None
        if window is not None:
            return _events(window)
        from scipy import special

        for j in range(1, _TAILS + 1):
            step = math.floor(law.sigma * float(special.ndtri(j / (_TAILS + 1))))
            mass = law.mass(-math.inf, step)
            err = law.mass_error
            out.append(
                (f"code <= {step}", functools.partial(_at_most, step), max(0.0, mass - err), min(1.0, mass + err))
            )
        return out
    if isinstance(law, DensityLaw):
        for j in range(1, _TAILS + 1):
            q = j / (_TAILS + 1)
            cut = float(law.distribution.ppf(q))
            out.append((f"output <= {cut:.6g}", functools.partial(_at_most, cut), q, q))
        return out
    if law.none_log_pmf > -math.inf:
        p_none = math.exp(law.none_log_pmf)
        out.append(("no value", _no_value, p_none, p_none))
    if law.support.size == 0:
        return out
    order = np.argsort(law.support, kind="stable")
    codes = law.support[order]
    cdf = np.cumsum(law.probabilities[order])
    seen = set()
    for j in range(1, _TAILS + 1):
        i = int(np.searchsorted(cdf, j / (_TAILS + 1)))
        i = min(i, codes.size - 1)
        if i in seen:
            continue
        seen.add(i)
        cut = codes[i]
        # unlisted outcomes below the cut carry between 0 and the whole tail
        out.append((f"code <= {cut}", functools.partial(_at_most, cut), float(cdf[i]), float(cdf[i]) + law.tail))
    top = np.argsort(-law.probabilities, kind="stable")[:_POINTS]
    for i in top.tolist():
        code = law.support[i]
        p = float(law.probabilities[i])
        out.append((f"code == {code}", functools.partial(_equal, code), p, p))
    listed = np.sort(law.support)

    def unlisted(c: np.ndarray) -> np.ndarray:
        pos = np.clip(np.searchsorted(listed, c), 0, listed.size - 1)
        return (listed[pos] != c) & ~_no_value(c)

    out.append(("an outcome the law does not list", unlisted, 0.0, law.tail))
    return out


def _columns(
    law: OutputLaw, outputs: Any, differing: list[int]
) -> list[tuple[str, DiscreteLaw | DensityLaw | DiscreteGaussianLaw, np.ndarray]]:
    if isinstance(law, ProductLaw):
        codes = np.asarray(law.encode(outputs))
        picked = (differing + [j for j in range(len(law.factors)) if j not in differing])[:_MAX_FACTORS]
        names = law.labels if law.labels is not None else range(len(law.factors))
        return [(f"coordinate {list(names)[j]!r}", law.factors[j], codes[:, j]) for j in picked]
    return [("output", law, np.asarray(law.encode(outputs)).reshape(-1))]


def _differing(law: ProductLaw, other: ProductLaw) -> list[int]:
    """Indices of ``law``'s factors that differ from ``other``'s (aligned by label)."""
    pairs = aligned_factors(law, other) or []
    changed = {name for name, fa, fb in pairs if not _same_factor(fa, fb)}
    names = law.labels if law.labels is not None else range(len(law.factors))
    return [j for j, name in enumerate(names) if name in changed]


def fit_problems(
    obj: Any, laws: list[tuple[Any, OutputLaw]], *, samples: int, alpha: float, rng_for: Callable[[int], Any]
) -> list[str]:
    """For each ``(input, law)``, ``samples`` outputs of ``obj`` tested against ``law``
    (module docstring); the events whose declared probability falls outside the exact
    Clopper-Pearson interval, described. False alarm at most ``alpha`` over all."""
    differing: list[list[int]] = [[] for _ in laws]
    if len(laws) == 2:
        a, b = laws[0][1], laws[1][1]
        if isinstance(a, ProductLaw) and isinstance(b, ProductLaw):
            differing = [_differing(a, b), _differing(b, a)]
    plans = []
    for k, (value, law) in enumerate(laws):
        outputs = _draw(obj, value, samples, rng_for(k))
        for where, factor, codes in _columns(law, outputs, differing[k]):
            plans.append((value, where, codes, _events(factor)))
    total = sum(len(events) for *_, events in plans)
    level = alpha / (2 * max(total, 1))
    problems = []
    for value, where, codes, events in plans:
        n = codes.size
        for text, indicator, p_low, p_high in events:
            count = int(np.count_nonzero(indicator(codes)))
            lo = float(clopper_pearson_lower(count, n, level))
            hi = float(clopper_pearson_upper(count, n, level))
            if p_high < lo or p_low > hi:
                declared = f"{p_low:.4g}" if p_low == p_high else f"[{p_low:.4g}, {p_high:.4g}]"
                problems.append(
                    f"on {show_input(value)}, {where}: P({text}) is {declared} by the declared law, but "
                    f"{count} of {n} outputs fall there (exact interval [{lo:.4g}, {hi:.4g}] at level {level:.2g})"
                )
    return problems


def _same_factor(a: Any, b: Any) -> bool:
    if isinstance(a, DiscreteLaw) and isinstance(b, DiscreteLaw):
        return (
            a.offset == b.offset
            and a.none_log_pmf == b.none_log_pmf
            and np.array_equal(a.support, b.support)
            and np.array_equal(a.log_pmf, b.log_pmf)
        )
    return a is b


def exact_problems(item: RegistryItem, obj: Any, x: Any, y: Any) -> tuple[list[str], int, float]:
    """The claims broken by the exact loss on the declared and extreme neighbours:
    ``(problems, pairs checked, largest exact epsilon / claimed epsilon)``."""
    claims = claims_of(obj)
    pairs = [(x, y), *extreme_neighbours(x, y)]
    problems, checked, worst = [], 0, 0.0
    for first, second in pairs:
        try:
            law_a, law_b = law_on(obj, first), law_on(obj, second)
        except PrivregError:
            continue  # refused before the charge: nothing is released
        if law_a is None or law_b is None:
            continue
        checked += 1
        for claim in claims:
            loss = exact_loss(law_a, law_b, epsilon=claim.epsilon)
            if loss.delta_low > claim.delta * (1 + 1e-6) + 1e-15:
                worst = max(worst, loss.loss_low / claim.epsilon)
                problems.append(
                    f"on {show_input(first)} and {show_input(second)} the exact privacy loss breaks the claim "
                    f"epsilon {claim.epsilon:.6g} at delta {claim.delta:g} ({claim.accountant}): the "
                    f"hockey-stick divergence at e^{claim.epsilon:.6g} is {loss.delta_low:.4g} > {claim.delta:g}, "
                    f"and the largest privacy loss is {loss.loss_low:.4g}"
                )
    return problems, checked, worst


def is_declared(obj: Any) -> bool:
    """Whether ``obj``'s class overrides ``output_law``."""
    base = Randomizer if isinstance(obj, Randomizer) else Mechanism
    return type(obj).output_law is not base.output_law
