"""Empirical privacy auditing: a statistically valid lower bound on a mechanism's epsilon.

Method (Ding, Wang, Wang, Zhang, Kifer 2018, "Detecting Violations of Differential
Privacy", CCS; Jagielski, Ullman, Oprea 2020, "Auditing Differentially Private Machine
Learning: How Private is Private SGD?", NeurIPS; see also Gilbert and McMillan 2018,
"Property Testing for Differential Privacy", for what sampling can and cannot certify):

1. Draw ``samples`` outputs on each of two neighbouring inputs and split each side into
   a *selection* half and an independent *estimation* half.
2. On the selection halves only, search many candidate events -- threshold tails at
   quantiles, each value of a discrete output, and the floating-point grid classes of
   Mironov 2012 ("On Significance of the Least Significant Bits for Differential
   Privacy", CCS: sign, binary exponent, trailing mantissa zero bits, multiples of
   powers of two, and their conjunctions) -- and keep the single event ``E`` and the
   direction that maximise the Clopper-Pearson epsilon lower bound on those halves.
3. On the estimation halves, count ``E`` on each side and report
   ``epsilon_lb = log((CP_lower(p_hi) - delta) / CP_upper(p_lo))`` with each one-sided
   bound at level ``alpha / 2`` (0 when not positive).

Guarantee: ``E`` is a function of the selection halves, which are independent of the
estimation halves, so conditionally on ``E`` the two estimation counts are independent
binomials and the two Clopper-Pearson bounds hold together with probability at least
``1 - alpha``. If the mechanism is ``(epsilon, delta)``-DP for the two inputs, then
``P_hi(E) <= exp(epsilon) P_lo(E) + delta``, hence

    P(epsilon_lb > epsilon) <= alpha

for every mechanism, every pair of inputs and every sample size: the false-alarm rate
of one audit of a correct mechanism is at most ``alpha`` (``k`` audits: at most
``k * alpha``). This assumes the randomness source produces independent draws (true of
the OS CSPRNG; a seeded :class:`~privreg.core.randomness.InsecureReproducibleRandom`
is a pseudo-random stand-in, used to make tests deterministic).

Passing is *not* a proof of privacy: the search only covers the events above, and
violations of probability below about ``1 / samples`` cannot be seen (Gilbert and
McMillan 2018). A lower bound above the claim, on the other hand, is evidence of a bug
(in the mechanism, its sampler or its privacy accounting) at confidence ``1 - alpha``.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from privreg.audit.claims import Claim, claim_for
from privreg.audit.events import choose_event
from privreg.audit.extract import build_features
from privreg.audit.pool import Layout, to_pool
from privreg.audit.sampling import (
    check_alpha,
    check_neighbours,
    check_samples,
    direction_of,
    draw_mechanism,
    draw_randomizer,
)
from privreg.audit.stats import epsilon_lower_bound
from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.items import ItemKind, RegistryItem
from privreg.core.mechanism import Mechanism
from privreg.core.randomizer import Randomizer
from privreg.core.randomness import RandomSource, resolve_random

__all__ = [
    "APPROX_AUDIT_DELTA",
    "AuditResult",
    "audit_item",
    "audit_mechanism",
    "audit_randomizer",
    "audit_samples",
]

#: The delta at which :func:`audit_item` audits mechanisms that have no finite pure-DP
#: epsilon (e.g. Gaussian noise): one point ``(epsilon(delta), delta)`` of their privacy
#: profile, large enough that events of probability ~delta are measurable with 1e5 samples.
APPROX_AUDIT_DELTA = 1e-2


@attrs.frozen(kw_only=True)
class AuditResult:
    """The outcome of one audit.

    ``epsilon_lower_bound`` exceeds the true epsilon with probability at most ``alpha``
    (0.0 when no event gives a positive bound). ``event`` describes the one event tested
    on the estimation halves; ``larger_on`` names the neighbour (``"first"`` or
    ``"second"``) on which it was more likely, and ``count_first`` / ``count_second`` are
    its counts among the ``estimation_samples`` outputs of each side. ``selection_bound``
    is the (optimistic, because it chose the event) bound on the selection halves.
    ``passed`` is True when the lower bound does not exceed ``claimed_epsilon``.
    """

    subject: str
    epsilon_lower_bound: float
    claimed_epsilon: float
    claimed_delta: float
    claim_accountant: str
    alpha: float
    samples: int
    event: str
    larger_on: str
    count_first: int
    count_second: int
    estimation_samples: int
    selection_count_first: int
    selection_count_second: int
    selection_bound: float
    candidates: int

    @property
    def passed(self) -> bool:
        """No violation found: the lower bound is at most the claimed epsilon."""
        return self.epsilon_lower_bound <= self.claimed_epsilon


def _claim(claimed_epsilon: Any, claimed_delta: Any) -> Claim:
    eps = v.check_epsilon("claimed_epsilon", claimed_epsilon) if claimed_epsilon != math.inf else math.inf
    return Claim(epsilon=eps, delta=v.check_delta("claimed_delta", claimed_delta), accountant="given")


def audit_samples(
    first: Any,
    second: Any,
    *,
    claimed_epsilon: float,
    claimed_delta: float = 0.0,
    alpha: float = 1e-6,
    direction: np.ndarray | None = None,
    subject: str = "",
) -> AuditResult:
    """Audit outputs already drawn: ``first`` and ``second`` hold the same number (at
    least 1000) of independent outputs on two neighbouring inputs, first axis the
    repetition. ``direction`` (optional) is ``second input - first input`` for vector
    queries. Same method and guarantee as :func:`audit_mechanism`."""
    alpha = check_alpha(alpha)
    claim = _claim(claimed_epsilon, claimed_delta)
    if not (hasattr(first, "__len__") and hasattr(second, "__len__")):
        raise PrivregTypeError("first and second must be sequences or arrays of outputs")
    n = len(first)
    if len(second) != n:
        raise PrivregValueError(f"first and second must hold as many outputs; got {n} and {len(second)}")
    check_samples(n)
    return _audit(first, second, samples=n, claim=claim, alpha=alpha, direction=direction, subject=subject)


def _audit(first: Any, second: Any, *, samples: int, claim: Claim, alpha: float,
           direction: np.ndarray | None, subject: str) -> AuditResult:
    layout = Layout(samples_first=samples, samples_second=samples)
    pool = to_pool(first, second, layout=layout)
    features = build_features(pool, layout=layout, direction=direction)
    choice = choose_event(features, layout, alpha=alpha, delta=claim.delta)
    n_est = samples - samples // 2
    count_a = count_b = 0
    bound = 0.0
    if choice.event is not None:
        mask = choice.event.mask()
        count_a, count_b = int(mask[layout.est_first].sum()), int(mask[layout.est_second].sum())
        hi, lo = (count_a, count_b) if choice.larger_on == "first" else (count_b, count_a)
        raw = float(epsilon_lower_bound(hi, n_est, lo, n_est, alpha=alpha, delta=claim.delta))
        bound = max(0.0, raw)
    return AuditResult(
        subject=subject,
        epsilon_lower_bound=bound,
        claimed_epsilon=claim.epsilon,
        claimed_delta=claim.delta,
        claim_accountant=claim.accountant,
        alpha=alpha,
        samples=samples,
        event=choice.event.describe() if choice.event is not None else "(no event)",
        larger_on=choice.larger_on,
        count_first=count_a,
        count_second=count_b,
        estimation_samples=n_est,
        selection_count_first=choice.selection_first,
        selection_count_second=choice.selection_second,
        selection_bound=choice.selection_bound,
        candidates=choice.candidates,
    )


def audit_mechanism(
    mechanism: Mechanism,
    *,
    neighbours: tuple[Any, Any],
    samples: int = 100_000,
    alpha: float = 1e-6,
    claimed_delta: float = 0.0,
    rng: RandomSource | None = None,
) -> AuditResult:
    """Audit a central mechanism on two query answers of neighbouring datasets.

    ``neighbours``: ``(first, second)`` query answers at the worst-case distance (the
    declared sensitivity). ``samples`` outputs are drawn on each side with
    :meth:`Mechanism.release_many`, charged to a throw-away EventLog (the neighbours are
    synthetic). The claim tested is the smallest epsilon at ``claimed_delta`` that any
    default accountant gives ``mechanism.privacy_event()`` (what a budget session
    charges); ``inf`` if there is none at that delta, and then the audit passes.

    Guarantee: if the mechanism is ``(epsilon, claimed_delta)``-DP for these inputs,
    ``P(result.epsilon_lower_bound > epsilon) <= alpha`` (see the module docstring).
    """
    if not isinstance(mechanism, Mechanism):
        raise PrivregTypeError(f"mechanism must be a privreg Mechanism; got {mechanism!r}")
    first, second = check_neighbours(neighbours)
    samples = check_samples(samples)
    alpha = check_alpha(alpha)
    delta = v.check_delta("claimed_delta", claimed_delta)
    rng = resolve_random(rng)
    claim = claim_for(mechanism.privacy_event(), delta=delta)
    out_a = draw_mechanism(mechanism, first, samples=samples, rng=rng)
    out_b = draw_mechanism(mechanism, second, samples=samples, rng=rng)
    return _audit(out_a, out_b, samples=samples, claim=claim, alpha=alpha,
                  direction=direction_of(first, second),
                  subject=mechanism.name or type(mechanism).__name__)


def audit_randomizer(
    randomizer: Randomizer,
    *,
    neighbours: tuple[Any, Any],
    samples: int = 100_000,
    alpha: float = 1e-6,
    rng: RandomSource | None = None,
) -> AuditResult:
    """Audit a local randomizer on two single-user inputs (e.g. ``(np.array([0]),
    np.array([1]))``): ``samples`` users holding each input are randomized (charged to a
    throw-away EventLog) and the claim ``epsilon0`` (pure, delta 0) is tested.

    Guarantee: if the randomizer is ``epsilon``-LDP,
    ``P(result.epsilon_lower_bound > epsilon) <= alpha`` (see the module docstring).
    """
    if not isinstance(randomizer, Randomizer):
        raise PrivregTypeError(f"randomizer must be a privreg Randomizer; got {randomizer!r}")
    first, second = check_neighbours(neighbours)
    samples = check_samples(samples)
    alpha = check_alpha(alpha)
    rng = resolve_random(rng)
    claim = Claim(epsilon=float(randomizer.epsilon0), delta=0.0, accountant="epsilon0")
    out_a = draw_randomizer(randomizer, first, samples=samples, rng=rng)
    out_b = draw_randomizer(randomizer, second, samples=samples, rng=rng)
    return _audit(out_a, out_b, samples=samples, claim=claim, alpha=alpha, direction=None,
                  subject=randomizer.name or type(randomizer).__name__)


def audit_item(
    item: RegistryItem,
    *,
    samples: int = 100_000,
    alpha: float = 1e-6,
    claimed_delta: float | None = None,
    rng: RandomSource | None = None,
) -> AuditResult:
    """Audit a registered mechanism or randomizer on its example: build it from
    ``item.example.params`` and draw on ``item.example.neighbours``.

    ``claimed_delta`` (mechanisms only): ``None`` audits the pure-DP claim (delta 0) when
    the mechanism's event has a finite one, and otherwise the claim at
    :data:`APPROX_AUDIT_DELTA`. Same guarantee as :func:`audit_mechanism`.
    """
    if not isinstance(item, RegistryItem):
        raise PrivregTypeError(f"item must be a RegistryItem; got {item!r}")
    if item.kind not in (ItemKind.MECHANISM, ItemKind.RANDOMIZER):
        raise PrivregTypeError(
            f"{item.name!r} is a {item.kind.value}; only mechanisms and randomizers can be audited"
        )
    if item.example.neighbours is None:
        raise PrivregValueError(
            f"{item.kind.value} {item.name!r} declares no example neighbours; set "
            f"Example(neighbours=(first, second)) in its RegistryItem"
        )
    built = item.create(item.example.params)
    if item.kind is ItemKind.RANDOMIZER:
        if claimed_delta not in (None, 0, 0.0):
            raise PrivregValueError("randomizers make pure (delta = 0) claims; leave claimed_delta unset")
        return audit_randomizer(built, neighbours=item.example.neighbours, samples=samples,
                                alpha=alpha, rng=rng)
    if claimed_delta is None:
        pure = claim_for(built.privacy_event(), delta=0.0)
        claimed_delta = 0.0 if math.isfinite(pure.epsilon) else APPROX_AUDIT_DELTA
    return audit_mechanism(built, neighbours=item.example.neighbours, samples=samples, alpha=alpha,
                           claimed_delta=claimed_delta, rng=rng)
