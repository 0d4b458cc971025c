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

A release that raises *after* its charge on one neighbour and not on the other, or with
a different error on each, is a violation too, with no sampling needed: the error is an
output that depends on the value (an observer of it learns which side of a threshold the
input is on, an infinite privacy loss). The audit then reports
``epsilon_lower_bound = inf`` with ``failure`` naming the error and the neighbour it
occurred on. The same error (class and message) on both neighbours tells them apart no
better than chance: no violation, and nothing to audit
(:class:`~privreg.audit.sampling.AuditInconclusive`, a PrivregError). An input refused
*before* the charge (validation) is bad input and raises, and so does a sample count
beyond the machine's memory (:func:`~privreg.audit.sampling.max_samples`).

Every result states its power (:mod:`privreg.audit.power`): the smallest overrun of the
claim it detects with 90% probability at its sample size.
:func:`audit_extreme_neighbours` moves an item's declared neighbours to extreme magnitudes
(:mod:`privreg.audit.extreme`) and audits each moved pair.

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
from privreg.audit.extreme import extreme_neighbours, show_input
from privreg.audit.pool import Layout, to_pool
from privreg.audit.power import Power, power_of
from privreg.audit.sampling import (
    AuditInconclusive,
    ChargedFailure,
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
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.randomizer import Randomizer
from privreg.core.randomness import RandomSource, resolve_random

__all__ = [
    "APPROX_AUDIT_DELTA",
    "AuditResult",
    "ExtremeAudit",
    "audit_extreme_neighbours",
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
    ``neighbours`` renders the two inputs. ``failure`` is empty, or says which release
    raised which error after its charge (then the lower bound is ``inf``: a violation).
    ``passed`` is True when there is no failure and the lower bound does not exceed
    ``claimed_epsilon``. ``power`` states what the sample size can see: the smallest
    overrun of the claim detected with 90% probability (:mod:`privreg.audit.power`; None
    when the claim is not a finite epsilon).
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
    neighbours: tuple[str, str] = ("", "")
    failure: str = ""
    power: Power | None = None

    @property
    def passed(self) -> bool:
        """No violation found: no release failed after its charge, and the lower bound is
        at most the claimed epsilon."""
        return not self.failure and self.epsilon_lower_bound <= self.claimed_epsilon


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


def _audit(
    first: Any,
    second: Any,
    *,
    samples: int,
    claim: Claim,
    alpha: float,
    direction: np.ndarray | None,
    subject: str,
    neighbours: tuple[str, str] = ("", ""),
) -> AuditResult:
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
        neighbours=neighbours,
        power=_power(samples, alpha, claim),
    )


def _power(samples: int, alpha: float, claim: Claim) -> Power | None:
    if not math.isfinite(claim.epsilon) or claim.epsilon <= 0:
        return None
    return power_of(samples, alpha=alpha, claimed_epsilon=claim.epsilon, claimed_delta=claim.delta)


def _draw_both(
    draw: Any, first: Any, second: Any, *, samples: int, subject: str, progress: ProgressCallback | None
) -> tuple[Any, Any, dict[str, BaseException]]:
    """Outputs on both neighbours (first, then second, as before) and the errors raised
    after a charge, by side; ``progress`` hears of each side's ``samples`` outputs."""
    outputs, failures = {}, {}
    with PhaseProgress(progress, f"audit {subject}", total=2 * samples, unit="output") as shown:
        for side, value in (("first", first), ("second", second)):
            try:
                outputs[side] = draw(value)
            except ChargedFailure as exc:
                failures[side] = exc.error
            shown.advance(samples)
    return outputs.get("first"), outputs.get("second"), failures


def _refuse_alike(failures: dict[str, BaseException], subject: str) -> None:
    """Both neighbours raised the same class with the same message after the charge: no
    evidence of a violation (the error does not depend on which neighbour), and nothing to
    audit. Raises :class:`AuditInconclusive`."""
    if len(failures) < 2:
        return
    first, second = failures["first"], failures["second"]
    if type(first) is type(second) and str(first) == str(second):
        raise AuditInconclusive(
            f"{subject}: the release failed alike on both neighbours after its charge "
            f"({type(first).__name__}: {str(first)[:200]}); the failure does not depend on the "
            f"neighbour, so it is no violation, and no output could be drawn to audit"
        )


def _failure_result(
    failures: dict[str, BaseException],
    *,
    samples: int,
    claim: Claim,
    alpha: float,
    subject: str,
    neighbours: tuple[str, str],
) -> AuditResult:
    """A release failed after its charge on one neighbour only, or with a different error on
    each: a violation (the error is a value-dependent output)."""
    sides = " and ".join(f"the {side} neighbour ({neighbours[side == 'second']})" for side in failures)
    errors = sorted({f"{type(e).__name__}: {e}" for e in failures.values()})
    only = "" if len(failures) == 2 else f"; the {'second' if 'first' in failures else 'first'} released normally"
    failure = (
        f"the release raised {' / '.join(errors)} after its charge on {sides}{only}. An observer "
        f"of the error learns which side of a threshold the value is on (epsilon = inf): validate "
        f"against public constraints before the charge, and compute in a range that cannot fail"
    )
    first_side = next(iter(failures))
    return AuditResult(
        subject=subject,
        epsilon_lower_bound=math.inf,
        claimed_epsilon=claim.epsilon,
        claimed_delta=claim.delta,
        claim_accountant=claim.accountant,
        alpha=alpha,
        samples=samples,
        event=(
            f"release raises after its charge on the {' and '.join(failures)} "
            f"neighbour{'s' if len(failures) == 2 else ''}"
        ),
        larger_on=first_side,
        count_first=0,
        count_second=0,
        estimation_samples=samples - samples // 2,
        selection_count_first=0,
        selection_count_second=0,
        selection_bound=math.inf,
        candidates=0,
        neighbours=neighbours,
        failure=failure,
    )


def audit_mechanism(
    mechanism: Mechanism,
    *,
    neighbours: tuple[Any, Any],
    samples: int = 100_000,
    alpha: float = 1e-6,
    claimed_delta: float = 0.0,
    rng: RandomSource | None = None,
    progress: ProgressCallback | None = None,
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
    ``progress`` (a :data:`~privreg.core.progress.ProgressCallback`) counts the outputs
    drawn; it changes no result.
    """
    if not isinstance(mechanism, Mechanism):
        raise PrivregTypeError(f"mechanism must be a privreg Mechanism; got {mechanism!r}")
    first, second = check_neighbours(neighbours)
    samples = check_samples(samples)
    alpha = check_alpha(alpha)
    delta = v.check_delta("claimed_delta", claimed_delta)
    rng = resolve_random(rng)
    progress = check_progress("progress", progress)
    claim = claim_for(mechanism.privacy_event(), delta=delta)
    return _audit_mechanism(
        mechanism, first, second, samples=samples, alpha=alpha, claim=claim, rng=rng, progress=progress
    )


def _audit_mechanism(
    mechanism: Mechanism,
    first: Any,
    second: Any,
    *,
    samples: int,
    alpha: float,
    claim: Claim,
    rng: RandomSource,
    progress: ProgressCallback | None,
) -> AuditResult:
    subject = mechanism.name or type(mechanism).__name__
    shown = (show_input(first), show_input(second))
    out_a, out_b, failures = _draw_both(
        lambda value: draw_mechanism(mechanism, value, samples=samples, rng=rng),
        first,
        second,
        samples=samples,
        subject=subject,
        progress=progress,
    )
    if failures:
        _refuse_alike(failures, subject)
        return _failure_result(failures, samples=samples, claim=claim, alpha=alpha, subject=subject, neighbours=shown)
    return _audit(
        out_a,
        out_b,
        samples=samples,
        claim=claim,
        alpha=alpha,
        direction=direction_of(first, second),
        subject=subject,
        neighbours=shown,
    )


def audit_randomizer(
    randomizer: Randomizer,
    *,
    neighbours: tuple[Any, Any],
    samples: int = 100_000,
    alpha: float = 1e-6,
    rng: RandomSource | None = None,
    progress: ProgressCallback | None = None,
) -> AuditResult:
    """Audit a local randomizer on two single-user inputs (e.g. ``(np.array([0]),
    np.array([1]))``): ``samples`` users holding each input are randomized (charged to a
    throw-away EventLog) and the claim ``epsilon0`` (pure, delta 0) is tested.

    Guarantee: if the randomizer is ``epsilon``-LDP,
    ``P(result.epsilon_lower_bound > epsilon) <= alpha`` (see the module docstring).
    ``progress``: as in :func:`audit_mechanism`.
    """
    if not isinstance(randomizer, Randomizer):
        raise PrivregTypeError(f"randomizer must be a privreg Randomizer; got {randomizer!r}")
    first, second = check_neighbours(neighbours)
    samples = check_samples(samples)
    alpha = check_alpha(alpha)
    rng = resolve_random(rng)
    progress = check_progress("progress", progress)
    claim = Claim(epsilon=float(randomizer.epsilon0), delta=0.0, accountant="epsilon0")
    subject = randomizer.name or type(randomizer).__name__
    shown = (show_input(first), show_input(second))
    out_a, out_b, failures = _draw_both(
        lambda value: draw_randomizer(randomizer, value, samples=samples, rng=rng),
        first,
        second,
        samples=samples,
        subject=subject,
        progress=progress,
    )
    if failures:
        _refuse_alike(failures, subject)
        return _failure_result(failures, samples=samples, claim=claim, alpha=alpha, subject=subject, neighbours=shown)
    return _audit(
        out_a, out_b, samples=samples, claim=claim, alpha=alpha, direction=None, subject=subject, neighbours=shown
    )


def _auditable(item: Any) -> RegistryItem:
    if not isinstance(item, RegistryItem):
        raise PrivregTypeError(f"item must be a RegistryItem; got {item!r}")
    if item.kind not in (ItemKind.MECHANISM, ItemKind.RANDOMIZER):
        raise PrivregTypeError(f"{item.name!r} is a {item.kind_name}; only mechanisms and randomizers can be audited")
    _declared_neighbours(item)
    return item


def _declared_neighbours(item: RegistryItem) -> tuple[Any, Any]:
    if item.example.neighbours is None:
        raise PrivregValueError(
            f"{item.kind_name} {item.name!r} declares no example neighbours; set "
            f"Example(neighbours=(first, second)) in its RegistryItem"
        )
    return item.example.neighbours


def _item_claim(item: RegistryItem, built: Any, claimed_delta: float | None) -> Claim:
    """The claim :func:`audit_item` tests (see there)."""
    if item.kind is ItemKind.RANDOMIZER:
        if claimed_delta not in (None, 0, 0.0):
            raise PrivregValueError("randomizers make pure (delta = 0) claims; leave claimed_delta unset")
        return Claim(epsilon=float(built.epsilon0), delta=0.0, accountant="epsilon0")
    if claimed_delta is None:
        pure = claim_for(built.privacy_event(), delta=0.0)
        if math.isfinite(pure.epsilon):
            return pure
        claimed_delta = APPROX_AUDIT_DELTA
    return claim_for(built.privacy_event(), delta=v.check_delta("claimed_delta", claimed_delta))


def audit_item(
    item: RegistryItem,
    *,
    samples: int = 100_000,
    alpha: float = 1e-6,
    claimed_delta: float | None = None,
    rng: RandomSource | None = None,
    neighbours: tuple[Any, Any] | None = None,
    progress: ProgressCallback | None = None,
) -> AuditResult:
    """Audit a registered mechanism or randomizer on its example: build it from
    ``item.example.params`` and draw on ``item.example.neighbours`` (or on ``neighbours``,
    a pair you give).

    ``claimed_delta`` (mechanisms only): ``None`` audits the pure-DP claim (delta 0) when
    the mechanism's event has a finite one, and otherwise the claim at
    :data:`APPROX_AUDIT_DELTA`. Same guarantee as :func:`audit_mechanism`; ``progress``
    counts the outputs drawn.
    """
    item = _auditable(item)
    pair = check_neighbours(item.example.neighbours if neighbours is None else neighbours)
    samples, alpha = check_samples(samples), check_alpha(alpha)
    progress = check_progress("progress", progress)
    built = item.create(item.example.params)
    claim = _item_claim(item, built, claimed_delta)
    rng = resolve_random(rng)
    if item.kind is ItemKind.RANDOMIZER:
        return audit_randomizer(built, neighbours=pair, samples=samples, alpha=alpha, rng=rng, progress=progress)
    return _audit_mechanism(built, *pair, samples=samples, alpha=alpha, claim=claim, rng=rng, progress=progress)


@attrs.frozen(kw_only=True)
class ExtremeAudit:
    """The audits of an item on its neighbours moved to extreme magnitudes
    (:func:`privreg.audit.extreme.extreme_neighbours`). ``results``: one audit per pair the
    item accepted; ``refused``: ``(first, second, error)`` for pairs refused before the
    charge (validation against public constraints: allowed, nothing was released);
    ``alike``: pairs whose releases both failed after the charge with the same error (no
    evidence either way: :class:`~privreg.audit.sampling.AuditInconclusive`).
    ``passed``: every audited pair passed."""

    subject: str
    results: tuple[AuditResult, ...]
    refused: tuple[tuple[str, str, str], ...]
    alike: tuple[tuple[str, str, str], ...] = ()

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[AuditResult, ...]:
        return tuple(r for r in self.results if not r.passed)


def audit_extreme_neighbours(
    item: RegistryItem,
    *,
    samples: int = 1000,
    alpha: float = 1e-6,
    claimed_delta: float | None = None,
    rng: RandomSource | None = None,
    progress: ProgressCallback | None = None,
) -> ExtremeAudit:
    """Audit ``item`` (as :func:`audit_item`, same claim) on each pair of
    :func:`~privreg.audit.extreme.extreme_neighbours` of its declared neighbours: where
    float and int64 arithmetic break (2**53, 2**63, 2**64, 1e300, 1e308, -1e308). A
    release that raises after its charge on either side is a violation; a pair refused
    before the charge is listed in ``refused``. Each audit errs with probability at most
    ``alpha`` (false alarms over the k pairs: at most k alpha). ``progress`` counts the
    pairs done."""
    item = _auditable(item)
    samples, alpha = check_samples(samples), check_alpha(alpha)
    progress = check_progress("progress", progress)
    built = item.create(item.example.params)
    claim = _item_claim(item, built, claimed_delta)
    rng = resolve_random(rng)
    results, refused, alike = [], [], []
    pairs = extreme_neighbours(*_declared_neighbours(item))
    with PhaseProgress(progress, f"extreme neighbours of {item.name}", total=len(pairs), unit="pair") as shown:
        for first, second in pairs:
            # an error after the charge never reaches the handler below: _draw_both reports it as a violation
            try:
                if item.kind is ItemKind.RANDOMIZER:
                    result = audit_randomizer(built, neighbours=(first, second), samples=samples, alpha=alpha, rng=rng)
                else:
                    result = _audit_mechanism(
                        built, first, second, samples=samples, alpha=alpha, claim=claim, rng=rng, progress=None
                    )
            except AuditInconclusive as exc:
                alike.append((show_input(first), show_input(second), str(exc)))
                continue
            except Exception as exc:  # noqa: BLE001 -- any error before the charge is a refusal to report
                refused.append((show_input(first), show_input(second), f"{type(exc).__name__}: {exc}"))
                continue
            finally:
                shown.advance()
            results.append(result)
    return ExtremeAudit(subject=item.name, results=tuple(results), refused=tuple(refused), alike=tuple(alike))
