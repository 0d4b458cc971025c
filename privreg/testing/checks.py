"""The contract checks of :mod:`privreg.testing`, one function per check.

Each check takes a :class:`~privreg.core.items.RegistryItem` and :class:`Settings`,
returns None when the item passes, and raises :class:`ContractError` naming the item, the
check, what went wrong (with the input that shows it) and what to fix.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import attrs
import numpy as np

from privreg.core.charging import Charge, EventLog
from privreg.core.errors import BudgetExceededError, PrivregError, PrivregTypeError
from privreg.core.events import LocalDP, PrivacyEvent, SelfComposed, Shuffled, event_from_json
from privreg.core.items import ItemKind, RegistryItem
from privreg.core.mechanism import Mechanism
from privreg.core.randomizer import Randomizer
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.testing.differential import error_pairs
from privreg.testing.exact import exact_problems, fit_problems, is_declared, law_on
from privreg.testing.inputs import (
    describe_like,
    extreme_inputs,
    fixed_extremes,
    hypothesis_modules,
)
from privreg.testing.spies import CountingRandom, SpyCharger

__all__ = ["CHECKS", "ContractError", "Settings", "applicable_checks", "run_one"]


class ContractError(PrivregError, AssertionError):
    """An item fails a contract check. ``item`` and ``check`` name them; the message says
    what went wrong, on which input, and what to fix."""

    def __init__(self, item: RegistryItem, check: str, problem: str, fix: str) -> None:
        self.item, self.check, self.problem, self.fix = item.name, check, problem, fix
        super().__init__(f"{item.kind_name} {item.name!r} fails the {check!r} check: {problem}\n  Fix: {fix}")


@attrs.frozen(kw_only=True)
class Settings:
    """How hard the checks look. ``rng_seed`` seeds every draw and hypothesis itself;
    ``max_examples`` random inputs per item in the extreme-input check (after the fixed
    extremes); ``audit_samples`` outputs per neighbour in the audit of the declared
    neighbours, ``extreme_samples`` in each audit of extreme neighbours; ``alpha`` the
    false-alarm probability of each audit and of the exact check's law test;
    ``law_samples`` outputs per declared neighbour in that test."""

    rng_seed: int = attrs.field(default=0)
    max_examples: int = attrs.field(default=20)
    audit_samples: int = attrs.field(default=2000)
    extreme_samples: int = attrs.field(default=1000)
    alpha: float = attrs.field(default=1e-6)
    law_samples: int = attrs.field(default=4000)

    @rng_seed.validator
    def _seed(self, attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PrivregTypeError(f"rng_seed must be an int >= 0; got {value!r}")

    @max_examples.validator
    def _examples(self, attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PrivregTypeError(f"max_examples must be an int >= 0 (0: fixed extremes only); got {value!r}")

    def rng(self, offset: int = 0) -> InsecureReproducibleRandom:
        return InsecureReproducibleRandom(seed=self.rng_seed + offset)


def _fail(item: RegistryItem, check: str, problem: str, fix: str) -> None:
    raise ContractError(item, check, problem, fix)


def _show(value: Any, limit: int = 120) -> str:
    from privreg.audit.extreme import show_input

    return show_input(value, limit)


def _neighbours(item: RegistryItem) -> tuple[Any, Any]:
    # RegistryItem enforces it for these kinds
    return cast("tuple[Any, Any]", item.example.neighbours)


def _release(obj: Any, value: Any, *, charger: Any, rng: Any, many: int = 0) -> Any:
    """Release (mechanism) or randomize (randomizer) ``value``; ``many``: release_many."""
    if isinstance(obj, Randomizer):
        return obj.randomize(value, charger=charger, rng=rng).reports
    if many:
        return obj.release_many(value, many, charger=charger, rng=rng).output
    return obj.release(value, charger=charger, rng=rng).output


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# --- documented ---------------------------------------------------------------------------


def check_documented(item: RegistryItem, s: Settings) -> None:
    name = "documented"
    if not item.summary or "\n" in item.summary:
        _fail(item, name, "its summary is empty or spans lines", "give RegistryItem(summary=...) one line")
    c = item.citation
    if not (c.authors and c.title and c.year >= 1900):
        _fail(item, name, "its citation is incomplete", "give Citation(authors=..., title=..., year=...)")
    undocumented = [p.name for p in item.params if not p.doc]
    if undocumented:
        _fail(item, name, f"parameters {undocumented} have no doc", "give each Param a doc")
    if not item.description:
        _fail(
            item,
            name,
            "its factory has no docstring",
            "state the guarantee (privacy, security, units) in the factory's docstring",
        )
    if not item.plugin:
        _fail(
            item,
            name,
            "it was not registered through a plugin (item.plugin is empty)",
            "load it with privreg.load_registry(plugins={'name': hooks}) and check the loaded item",
        )


# --- charge before draw ---------------------------------------------------------------------


def check_charge_before_draw(item: RegistryItem, s: Settings) -> None:
    name = "charge-before-draw"
    obj = item.create(item.example.params)
    x, y = _neighbours(item)
    never_early = (
        "charge before any draw: validate in validate_input(s), then let the base class charge; "
        "draw noise only in _sample/_sample_many/_randomize, never in validate_input or the "
        "constructor"
    )
    if isinstance(obj, Mechanism):
        event = obj.privacy_event()
        rng = CountingRandom(s.rng_seed)
        spy = SpyCharger(rng)
        release = obj.release(x, charger=spy, rng=rng, label="privreg.testing")
        if spy.draws_at_charge != [0]:
            _fail(
                item,
                name,
                f"release({_show(x)}) drew {spy.draws_at_charge[0] if spy.draws_at_charge else rng.draws} "
                f"time(s) from rng before it was charged (charges seen: {len(spy.draws_at_charge)})",
                never_early,
            )
        if spy.events != (event,) or release.event != event:
            _fail(
                item,
                name,
                f"release charged {spy.events}, returned {release.event}; expected exactly privacy_event() = {event}",
                "charge privacy_event() once per release (the base class does: do not override release)",
            )
        (charge,) = spy.charges
        if charge.label != "privreg.testing" or charge.randomness.get("reproducible") is not True:
            _fail(
                item,
                name,
                "the charge lost the label or the randomness description",
                "pass label and rng.describe() through to charger.charge (the base class does)",
            )
        rng = CountingRandom(s.rng_seed)
        spy = SpyCharger(rng)
        many = obj.release_many(x, 20, charger=spy, rng=rng)
        if spy.draws_at_charge != [0] or spy.events != (SelfComposed(event=event, count=20),):
            _fail(
                item,
                name,
                f"release_many(x, 20) charged {spy.events} after {spy.draws_at_charge} draw(s); "
                f"expected one SelfComposed(event, 20) before any draw",
                "let the base class's release_many charge; override only _sample_many",
            )
        if len(many.output) != 20:
            _fail(
                item,
                name,
                f"release_many(x, 20) returned {len(many.output)} outputs",
                "return one output per repetition along the first axis from _sample_many",
            )
        call: Callable[..., Any] = obj.release
        invalid: Any = np.array([np.nan])
    elif isinstance(obj, Randomizer):
        population = np.concatenate([np.asarray(x)] * 200 + [np.asarray(y)] * 200)
        rng = CountingRandom(s.rng_seed)
        spy = SpyCharger(rng)
        out = obj.randomize(population, charger=spy, rng=rng)
        if spy.draws_at_charge != [0]:
            _fail(item, name, f"randomize drew from rng before it was charged ({spy.draws_at_charge})", never_early)
        if len(out.reports) != len(population):
            _fail(
                item,
                name,
                f"randomize returned {len(out.reports)} reports for {len(population)} users",
                "return one report per user from _randomize",
            )
        local = LocalDP(epsilon0=obj.epsilon0, randomizer=obj.name or type(obj).__name__)
        if out.event != local or spy.events != (local,):
            _fail(
                item,
                name,
                f"randomize charged {spy.events}, expected {local}",
                "charge through Randomizer.charge_reports (randomize does)",
            )
        shuffled = obj.randomize(population, charger=spy, rng=rng, shuffle=True)
        expected = Shuffled(event=local, num_reports=len(population))
        if shuffled.event != expected or spy.events[-1] != expected:
            _fail(
                item,
                name,
                f"a shuffled randomize charged {spy.events[-1]}, expected {expected}",
                "do not override randomize; shuffling is charged as Shuffled(LocalDP, n)",
            )
        call, invalid = obj.randomize, np.array([np.nan])
    else:  # pragma: no cover - applicable_checks excludes other kinds
        return
    rng = CountingRandom(s.rng_seed)
    refusing = SpyCharger(rng, refuse=True)
    try:
        call(x, charger=refusing, rng=rng)
    except BudgetExceededError:
        pass  # the refusal the check expects
    else:
        _fail(
            item,
            name,
            "a charger that refuses did not stop the release",
            "let the charger's exception propagate; never catch BudgetExceededError",
        )
    if rng.draws:
        _fail(item, name, f"a refused release still drew {rng.draws} time(s) from rng", never_early)
    log = EventLog()
    try:
        call(invalid, charger=log)
    except PrivregError:
        pass  # refused with a privreg error, as it should be
    except Exception as exc:  # noqa: BLE001 -- the contract reports whatever a plugin raises
        _fail(
            item,
            name,
            f"invalid input {_show(invalid)} raised {_error_text(exc)}, not a PrivregError",
            "refuse invalid input in validate_input(s) with a PrivregValueError/PrivregTypeError",
        )
    else:
        _fail(
            item,
            name,
            f"invalid input {_show(invalid)} was released",
            "refuse NaN and inputs outside the domain in validate_input(s)",
        )
    if log.charges:
        _fail(
            item,
            name,
            f"invalid input {_show(invalid)} was charged before it was refused",
            "validate before the charge (validate_input(s) runs before charger.charge)",
        )
    try:
        call(x)  # type: ignore[call-arg]
    except TypeError:
        pass  # charger is required, as it should be
    else:
        _fail(
            item,
            name,
            "a release without a charger went through",
            "keep charger a required keyword argument (do not override release/randomize)",
        )
    try:
        call(x, charger=object())
    except PrivregTypeError:
        pass  # a non-charger is refused, as it should be
    else:
        _fail(item, name, "charger=object() was accepted", "check the charger (the base class does)")


# --- reproducible -------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return isinstance(a, Mapping) and isinstance(b, Mapping) and list(a.items()) == list(b.items())
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return repr(a) == repr(b)


def _key(output: Any) -> str:
    if isinstance(output, Mapping):
        return repr(sorted((repr(k), repr(v)) for k, v in output.items()))
    try:
        return np.asarray(output, dtype=np.float64).tobytes().hex()
    except (TypeError, ValueError):
        return repr(output)


def check_reproducible(item: RegistryItem, s: Settings) -> None:
    name = "reproducible"
    obj = item.create(item.example.params)
    x, y = _neighbours(item)
    fix = "draw every random bit from the rng argument (never numpy's or random's global state, never secrets)"
    if isinstance(obj, Mechanism):
        same = [obj.release(x, charger=EventLog(), rng=s.rng(5)).output for _ in range(2)]
        if not _same(*same):
            _fail(
                item,
                name,
                f"two releases of {_show(x)} with the same seed differ: {_show(same[0])} and {_show(same[1])}",
                fix,
            )
        distinct = {
            _key(o) for value in (x, y) for o in obj.release_many(value, 50, charger=EventLog(), rng=s.rng(6)).output
        }
        if len(distinct) < 3:  # independent repetitions on both neighbours: more than two outputs
            _fail(
                item,
                name,
                f"release_many(x, 50) on both declared neighbours returned only {len(distinct)} distinct output(s)",
                "draw independent noise for every repetition in _sample_many",
            )
    else:
        population = np.concatenate([np.asarray(x)] * 50)
        same = [obj.randomize(population, charger=EventLog(), rng=s.rng(5)).reports for _ in range(2)]
        if not _same(*same):
            _fail(item, name, "two randomizations with the same seed differ", fix)
        if obj.has_estimator:
            est = obj.estimate(same[0])
            if est.counts.shape != est.variance.shape or not (np.asarray(est.variance) >= 0).all():
                _fail(
                    item,
                    name,
                    "estimate() returned counts and variances of different shapes or a negative variance",
                    "return one count and one variance >= 0 per item",
                )


# --- events round-trip through JSON ---------------------------------------------------------


def _round_trip(item: RegistryItem, name: str, event: PrivacyEvent) -> None:
    fix = (
        "make the event a frozen attrs class decorated with privreg.core.event_type(KIND), with "
        "JSON-safe fields, returned from privreg_register_event_types"
    )
    if not isinstance(event, PrivacyEvent):
        _fail(item, name, f"its event {event!r} is not a PrivacyEvent", fix)
    try:
        back = event_from_json(event.to_json())
    except Exception as exc:  # noqa: BLE001 -- the contract reports whatever a plugin raises
        _fail(item, name, f"{event!r} does not survive to_json/event_from_json: {_error_text(exc)}", fix)
    if back != event:
        _fail(item, name, f"{event!r} comes back from JSON as {back!r}", fix)


def _charges_round_trip(item: RegistryItem, name: str, log: EventLog) -> None:
    for charge in log.charges:
        try:
            text = json.dumps(charge.to_dict(), sort_keys=True, allow_nan=False)
            back = Charge.from_dict(json.loads(text))
        except Exception as exc:  # noqa: BLE001 -- the contract reports whatever a plugin raises
            _fail(
                item,
                name,
                f"its ledger entry does not serialise to strict JSON: {_error_text(exc)}",
                "make parameters() return JSON-safe, finite values (no NaN, inf, objects)",
            )
        if back.event != charge.event or back.mechanism != charge.mechanism:
            _fail(item, name, "its ledger entry changes through JSON", "make parameters() JSON-safe")


def check_event_json(item: RegistryItem, s: Settings) -> None:
    name = "event-json"
    obj = item.create(item.example.params)
    x, _ = _neighbours(item)
    log = EventLog()
    if isinstance(obj, Mechanism):
        event = obj.privacy_event()
        if event != obj.privacy_event():
            _fail(
                item,
                name,
                "privacy_event() changes between calls",
                "compute the event from the configuration only (it is charged before the data is seen)",
            )
        _round_trip(item, name, event)
        _round_trip(item, name, obj.release(x, charger=log, rng=s.rng()).event)
        _round_trip(item, name, obj.release_many(x, 3, charger=log, rng=s.rng()).event)
    else:
        population = np.concatenate([np.asarray(x)] * 10)
        _round_trip(item, name, obj.randomize(population, charger=log, rng=s.rng()).event)
        _round_trip(item, name, obj.randomize(population, charger=log, rng=s.rng(), shuffle=True).event)
    _charges_round_trip(item, name, log)


# --- no raise after the charge --------------------------------------------------------------

_AFTER_CHARGE_FIX = (
    "validate the input against public constraints in validate_input(s), before the charge (refuse "
    "integers beyond int64, values beyond the range your arithmetic handles), and compute on data in a "
    "range proven not to overflow (clamp to a public range that keeps the sensitivity, or use Python "
    "integers): after the charge, a release must not fail or wrap around for any input that passed "
    "validation"
)


def _noise_spread(obj: Any, like: Any, s: Settings) -> float | None:
    """max |output - input| over 32 seeded releases of ``like``, when outputs have the
    input's numeric shape (None otherwise: no wrap-around check)."""
    if isinstance(obj, Randomizer) or describe_like(like) not in ("float", "int"):
        return None
    try:
        outs = np.asarray(obj.release_many(like, 32, charger=EventLog(), rng=s.rng(11)).output, dtype=np.float64)
    except Exception:  # noqa: BLE001 -- no spread, no wrap-around check; other checks report the error
        return None
    base = np.asarray(like, dtype=np.float64)
    if outs.shape[1:] != base.shape:
        return None
    return float(np.max(np.abs(outs - base)))


def _wrapped(value: Any, output: Any, spread: float) -> bool:
    """True when a coordinate far beyond the noise (|x| > 1000 * spread + 1000) comes back
    with the opposite sign: the arithmetic wrapped around."""
    try:
        x = np.asarray([float(v) for v in np.asarray(value, dtype=object).ravel()], dtype=np.float64)
        out = np.asarray(output, dtype=np.float64).ravel()
    except (TypeError, ValueError, OverflowError):
        return False
    if x.shape != out.shape:
        return False
    far = np.abs(x) > 1000 * spread + 1000
    return bool(np.any(far & (np.sign(out) != np.sign(x))))


def check_no_raise_after_charge(item: RegistryItem, s: Settings) -> None:
    name = "no-raise-after-charge"
    obj = item.create(item.example.params)
    x, y = _neighbours(item)
    population = isinstance(obj, Randomizer)
    spread = _noise_spread(obj, x, s)
    problems: list[str] = []

    def attempt(value: Any) -> None:
        for many in (0,) if population else (0, 2):
            spy = SpyCharger()
            try:
                out = _release(obj, value, charger=spy, rng=s.rng(3), many=many)
            except Exception as exc:  # noqa: BLE001 -- the contract reports whatever a plugin raises
                if spy.charges:
                    call = "randomize" if population else ("release_many(..., 2)" if many else "release")
                    problems.append(f"{call}({_show(value)}) raised {_error_text(exc)[:160]} after the charge")
                return
            if not many and spread is not None and _wrapped(value, out, spread):
                problems.append(
                    f"release({_show(value)}) returned {_show(out)}: the opposite sign, far beyond "
                    f"the noise (the arithmetic wrapped around)"
                )

    attempt(x)
    attempt(y)
    if describe_like(x) is not None:  # other inputs: only the declared neighbours can be tried
        for value in fixed_extremes(x, y, population=population):
            attempt(value)
        if s.max_examples:
            hypothesis, _ = hypothesis_modules()

            @hypothesis.settings(
                max_examples=s.max_examples,
                derandomize=True,
                database=None,
                deadline=None,
                phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate),
                suppress_health_check=list(hypothesis.HealthCheck),
                print_blob=False,
            )
            @hypothesis.seed(s.rng_seed)
            @hypothesis.given(extreme_inputs(x, population=population))
            def explore(value: Any) -> None:
                attempt(value)

            explore()
    if problems:
        unique = list(dict.fromkeys(problems))
        shown = "; ".join(unique[:3]) + (f"; and {len(unique) - 3} more" if len(unique) > 3 else "")
        _fail(
            item,
            name,
            f"{len(unique)} extreme input(s) fail after the charge (an error, or an output "
            f"wrapped around to the opposite sign), while the declared neighbour {_show(x)} "
            f"releases normally: the failure tells an observer which side of a threshold the value "
            f"is on. {shown}",
            _AFTER_CHARGE_FIX,
        )


# --- canonical order ------------------------------------------------------------------------


def _extra_keys(keys: list[Any], count: int) -> list[Any]:
    if all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys):
        top = max([int(k) for k in keys], default=0)
        return [top + 1 + i for i in range(count)]
    return [f"privreg-testing-key-{i}" for i in range(count)]


def _monotone_in(order: list[Any], values: Any, *, strict: bool = True) -> bool:
    """True when ``order`` lists keys by increasing or decreasing ``values`` (a mapping)."""
    if not isinstance(values, Mapping):
        return False
    try:
        seq = [float(values[k]) for k in order]
    except (KeyError, TypeError, ValueError):
        return False
    if strict:
        return all(a < b for a, b in itertools.pairwise(seq)) or all(a > b for a, b in itertools.pairwise(seq))
    return all(a <= b for a, b in itertools.pairwise(seq)) or all(a >= b for a, b in itertools.pairwise(seq))


def check_canonical_order(item: RegistryItem, s: Settings) -> None:
    """Applies to mechanisms whose input is a mapping (keys are the caller's; neither their
    order nor their true values may order the output). Keys get *distinct* values one apart
    (ties would hide an order by value with ties broken by key), large enough to be
    released, assigned in increasing, decreasing and shuffled order; each assignment is
    released in several shuffled input orders, all with the same seed. Outputs holding the
    same keys must list them in the same order, unless the order follows the released
    values (post-processing) or neither the input's order nor the true values (a
    permutation drawn from the rng after value-dependent draws)."""
    name = "canonical-order"
    obj = item.create(item.example.params)
    x, y = _neighbours(item)
    base = {**x, **y}
    keys = list(base) + _extra_keys(list(base), max(0, 6 - len(base)))
    numbers = [abs(float(v)) for v in base.values() if isinstance(v, (int, float, np.integer, np.floating))]
    top = max(numbers, default=1.0) or 1.0
    integer = isinstance(next(iter(base.values())), (int, np.integer))
    fix = (
        "return collections in a canonical order: sorted by key (e.g. dict(sorted(...))), or a permutation "
        "drawn from the secure rng; never the caller's order, which can follow the data (e.g. a Counter built "
        "user by user), and never an order by the true values (not even with ties broken by key)"
    )
    order_rng = np.random.default_rng(s.rng_seed)
    ranks = [list(range(len(keys))), list(range(len(keys)))[::-1], order_rng.permutation(len(keys)).tolist()]
    perms = [keys, keys[::-1]] + [[keys[i] for i in order_rng.permutation(len(keys))] for _ in range(3)]
    for factor in (1000.0, 10.0, 1.0):
        seen: dict[frozenset, tuple[list[Any], dict[Any, Any], list[Any], int, Any]] = {}
        comparable = False
        for a, rank in enumerate(ranks):
            # distinct by 1, within the noise: an order by noisy value often differs from the true one
            values = {k: (int(top * factor) + r if integer else top * factor + r) for k, r in zip(keys, rank)}
            for perm in perms:
                inp = {k: values[k] for k in perm}
                try:
                    out = obj.release(inp, charger=EventLog(), rng=s.rng(7)).output
                except PrivregError:
                    break
                if not isinstance(out, (Mapping, list, tuple)):
                    return  # not a collection: nothing to order
                order = list(out)
                if len(order) < 2:
                    continue
                try:
                    group = frozenset(order)
                except TypeError:
                    return
                if group not in seen:
                    seen[group] = (perm, values, order, a, out)
                    continue
                comparable = True
                first_in, first_values, first_out, first_a, first_released = seen[group]
                if first_out == order:
                    continue
                if first_a == a:
                    _fail(
                        item,
                        name,
                        f"the same keys come back in different orders when only the input's key order changes "
                        f"(same values, same seed): input order {first_in[:6]} gives {first_out[:6]}, input "
                        f"order {perm[:6]} gives {order[:6]}",
                        fix,
                    )
                # an order by the released values is post-processing; one by the true values is not
                by_truth = _monotone_in(first_out, first_values) and _monotone_in(order, values)
                explained = _monotone_in(first_out, first_released, strict=False) and _monotone_in(
                    order, out, strict=False
                )
                if by_truth and not explained:
                    _fail(
                        item,
                        name,
                        f"the output lists its keys by their true values, not by the released ones: with values "
                        f"{ {k: first_values[k] for k in first_out[:6]} } the output order is {first_out[:6]}, "
                        f"with values { {k: values[k] for k in order[:6]} } it is {order[:6]} (same seed; values "
                        f"distinct, so ties broken by key cannot hide it). The order tells an observer which "
                        f"key is larger, beyond the noise",
                        fix,
                    )
        if comparable:
            return
    _fail(
        item,
        name,
        f"no two releases of the keys {keys[:6]} (values up to {top * 1000 * len(keys):g}) in permuted orders "
        f"returned the same key set, so the order could not be compared",
        "give Example(neighbours=...) values for which the keys are released with high probability",
    )


# --- data-free error messages, by difference -------------------------------------------


def _outcome(obj: Any, value: Any, s: Settings) -> tuple[str, str] | None:
    """``(exception class, message)`` when releasing ``value`` raises before the charge;
    None when it releases or fails after the charge (another check's business)."""
    spy = SpyCharger()
    try:
        _release(obj, value, charger=spy, rng=s.rng(9))
    except Exception as exc:  # noqa: BLE001 -- the contract inspects whatever a plugin raises
        if spy.charges:
            return None
        return type(exc).__name__, str(exc)
    return None


_LEAKS = {
    "value": "the offending value (its repr, float.hex or order of magnitude)",
    "count": "how many entries break the rule",
    "position": "where the offending entry is (its index or key)",
    "context": "the other, valid entries (e.g. a max, min or sum of the input)",
}


def check_data_free_errors(item: RegistryItem, s: Settings) -> None:
    """Pairs of invalid inputs that differ in one thing only
    (:func:`privreg.testing.differential.error_pairs`): when both are refused, the
    exception class and message must be identical."""
    name = "data-free-errors"
    obj = item.create(item.example.params)
    x, y = _neighbours(item)
    for pair in error_pairs(x, y, population=isinstance(obj, Randomizer)):
        a, b = _outcome(obj, pair.first, s), _outcome(obj, pair.second, s)
        if a is None or b is None or a == b:
            continue
        _fail(
            item,
            name,
            f"two inputs that break the same rule ({pair.rule}) and differ only in {_LEAKS[pair.differs]} "
            f"get different errors: {_show(pair.first)} raised {a[0]}: {a[1][:200]!r}, while "
            f"{_show(pair.second)} raised {b[0]}: {b[1][:200]!r}. A message is an output: it tells the two "
            f"apart, uncharged",
            "make the message a function of the rule only: name the argument, the rule and the fix (e.g. "
            "'inputs has entries outside [0, k); encode categories as 0..k-1'), never the value (repr, "
            "float.hex, magnitude), how many entries fail, their index or key, or other entries (max, min, sum)",
        )


# --- the exact privacy loss of a declared law ----------------------------------------------


def check_exact(item: RegistryItem, s: Settings) -> None:
    """Items that declare ``output_law``: the law matches the item's outputs, and its exact
    privacy loss on the declared and extreme neighbours is within the claim
    (:mod:`privreg.testing.exact`). Items declaring no law pass with nothing checked
    (the audit is then the only evidence)."""
    name = "exact"
    obj = item.create(item.example.params)
    if not is_declared(obj):
        return
    x, y = _neighbours(item)
    try:
        laws = [(x, law_on(obj, x)), (y, law_on(obj, y))]
    except PrivregError as exc:
        _fail(
            item,
            name,
            f"output_law() failed on the declared neighbours: {_error_text(exc)}",
            "return the law of release(value) for every valid value, or None",
        )
    declared = [(value, law) for value, law in laws if law is not None]
    if len(declared) == 2:
        problems = fit_problems(obj, declared, samples=s.law_samples, alpha=s.alpha, rng_for=lambda k: s.rng(31 + k))
        if problems:
            _fail(
                item,
                name,
                f"its outputs do not follow the law it declares ({len(problems)} event(s), false alarm <= "
                f"{s.alpha:g}): {problems[0]}",
                "make output_law() return the law the sampler actually draws from (the realised scale and "
                "probabilities), or fix the sampler to draw from the declared law",
            )
    problems, _, worst = exact_problems(item, obj, x, y)
    if problems:
        shown = "; ".join(problems[:2]) + (f"; and {len(problems) - 2} more" if len(problems) > 2 else "")
        _fail(
            item,
            name,
            f"{len(problems)} claim(s) broken exactly (no sampling error): {shown}",
            f"add the noise the charged event needs: the exact epsilon is {worst:.3g}x the claim, so scale the "
            f"noise up by that factor (Laplace: scale = sensitivity / epsilon), or use output probabilities whose "
            f"ratio between neighbours is at most e^epsilon (k-ary randomized response: keep with probability "
            f"e^eps / (e^eps + k - 1)); or charge an event that claims no less than the exact loss",
        )


# --- the declared neighbour relation ---------------------------------------------------------


def event_relations(event: PrivacyEvent) -> set[str]:
    """The neighbour relations ``event``'s guarantee holds for: its own when it names one,
    else those of the events it wraps, else add/remove (the library's default)."""
    own = getattr(event, "neighbouring", None)
    if own is not None:
        return {own}
    inner: list[PrivacyEvent] = []
    for field in attrs.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, PrivacyEvent):
            inner.append(value)
        elif isinstance(value, tuple) and value and all(isinstance(e, PrivacyEvent) for e in value):
            inner.extend(value)
    if not inner:
        return {"add_remove"}
    return set().union(*(event_relations(e) for e in inner))


def check_neighbouring(item: RegistryItem, s: Settings) -> None:
    """The item's declared ``neighbouring`` is the relation of every event it charges."""
    name = "neighbouring"
    obj = item.create(item.example.params)
    if isinstance(obj, Randomizer):
        events = [obj.privacy_event(), obj.privacy_event(num_reports=10, shuffled=True)]
    else:
        events = [obj.privacy_event()]
    for event in events:
        held = event_relations(event)
        if held != {item.neighbouring}:
            _fail(
                item,
                name,
                f"it declares neighbouring={item.neighbouring!r}, but charges {event!r}, whose guarantee holds "
                f"for {sorted(held)}: budgets and 'privreg describe' would state the wrong relation",
                f"declare RegistryItem(neighbouring={sorted(held)[0]!r}) (or charge an event proven for "
                f"{item.neighbouring!r}: set the event's neighbouring field)",
            )


# --- the empirical audit --------------------------------------------------------------------


def check_audit(item: RegistryItem, s: Settings) -> None:
    from privreg.audit import audit_extreme_neighbours, audit_item
    from privreg.audit.sampling import AuditInconclusive

    name = "audit"
    fix_noise = (
        "the noise is too small for the charged event, leaks through floating point, or the event "
        "under-claims: draw integer noise on a grid (privreg.noise) calibrated to the event charged"
    )
    try:
        result = audit_item(item, samples=s.audit_samples, alpha=s.alpha, rng=s.rng(13))
    except AuditInconclusive as exc:
        _fail(item, name, f"on its declared neighbours: {exc}", _AFTER_CHARGE_FIX)
    power = f"; this audit {result.power.describe()}" if result.power is not None else ""
    if not math.isfinite(result.claimed_epsilon) and not result.failure:
        _fail(
            item,
            name,
            f"its privacy event claims no finite epsilon at the audited delta {result.claimed_delta:g}",
            "charge an event some default accountant prices (see privreg.audit.claims)",
        )
    if not result.passed:
        _fail(
            item,
            name,
            f"on its declared neighbours {result.neighbours[0]} and {result.neighbours[1]}: "
            + (
                result.failure
                or f"empirical lower bound {result.epsilon_lower_bound:.3g} > claimed "
                f"{result.claimed_epsilon:.3g} (event {result.event}; false alarm <= {s.alpha:g}{power})"
            ),
            _AFTER_CHARGE_FIX if result.failure else fix_noise,
        )
    extreme = audit_extreme_neighbours(item, samples=s.extreme_samples, alpha=s.alpha, rng=s.rng(17))
    if extreme.failures:
        bad = extreme.failures[0]
        _fail(
            item,
            name,
            f"{len(extreme.failures)} of {len(extreme.results)} extreme neighbour pair(s) fail, e.g. "
            f"{bad.neighbours[0]} and {bad.neighbours[1]}: "
            + (
                bad.failure
                or f"empirical lower bound {bad.epsilon_lower_bound:.3g} > claimed "
                f"{bad.claimed_epsilon:.3g} (event {bad.event})"
            ),
            _AFTER_CHARGE_FIX,
        )


# --- other kinds ----------------------------------------------------------------------------


def check_sensitivity(item: RegistryItem, s: Settings) -> None:
    from privreg.core.sensitivity import Sensitivity

    sens = item.create(item.example.params)
    if not isinstance(sens, Sensitivity):
        _fail(
            item,
            "sensitivity",
            f"its factory built {type(sens).__name__}, not a Sensitivity",
            "subclass privreg.Sensitivity",
        )
    if not sens.data_dependent and not (np.isfinite(sens.bound()) and sens.bound() > 0):
        _fail(item, "sensitivity", f"its data-independent bound is {sens.bound()!r}", "return a finite bound > 0")


def check_workflow(item: RegistryItem, s: Settings) -> None:
    from privreg.core.workflow import WorkflowContext, WorkflowResult

    name = "workflow"
    with tempfile.TemporaryDirectory(prefix="privreg-testing-") as tmp:
        out_dir = Path(tmp)
        log = EventLog()
        ctx = WorkflowContext(charger=log, rng=s.rng(1), output_dir=out_dir)
        result = item.run(ctx, item.example.params)
        if not isinstance(result, WorkflowResult) or not result.summary:
            _fail(item, name, "it returned no WorkflowResult with a summary", "return WorkflowResult(summary=...)")
        charges = log.charges
        if item.charges and not charges:
            _fail(item, name, "it released without charging", "release through mechanisms with context.charger")
        if not item.charges and charges:
            _fail(item, name, "it is declared charges=False but charged", "declare charges=True")
        for charge in charges:
            _round_trip(item, name, charge.event)
        for path in result.outputs.values():
            if not (Path(path).is_file() and out_dir in Path(path).parents):
                _fail(
                    item,
                    name,
                    f"output {path} is not a file in the output folder",
                    "write outputs with context.output_path(name)",
                )


def check_protocol(item: RegistryItem, s: Settings) -> None:
    from privreg.core.protocol import Protocol

    name = "protocol"
    proto = item.create(item.example.params)
    if not isinstance(proto, Protocol) or not proto.caveats.strip():
        _fail(item, name, "it is not a Protocol with caveats", "subclass Protocol and state its caveats")
    try:
        proto.checked_party_names(list(proto.parties()))
    except PrivregError as exc:
        _fail(
            item,
            name,
            f"its parties do not pass the runtime's check ({exc})",
            "give every party a unique name and say what each learns",
        )
    if not all(text.strip() for text in proto.learns().values()):
        _fail(item, name, "learns() has an empty entry", "say what each party learns")


#: Every check, in the order they run, with the kinds it applies to.
CHECKS: dict[str, tuple[Callable[[RegistryItem, Settings], None], tuple[ItemKind, ...]]] = {
    "documented": (check_documented, tuple(ItemKind)),
    "neighbouring": (check_neighbouring, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "charge-before-draw": (check_charge_before_draw, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "reproducible": (check_reproducible, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "event-json": (check_event_json, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "no-raise-after-charge": (check_no_raise_after_charge, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "canonical-order": (check_canonical_order, (ItemKind.MECHANISM,)),
    "data-free-errors": (check_data_free_errors, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "exact": (check_exact, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "audit": (check_audit, (ItemKind.MECHANISM, ItemKind.RANDOMIZER)),
    "sensitivity": (check_sensitivity, (ItemKind.SENSITIVITY,)),
    "workflow": (check_workflow, (ItemKind.WORKFLOW,)),
    "protocol": (check_protocol, (ItemKind.PROTOCOL,)),
}


def applicable_checks(item: RegistryItem) -> list[str]:
    """The checks that apply to ``item``: by kind; ``canonical-order`` only for mechanisms
    whose declared neighbours are mappings (keys in the caller's order)."""
    out = []
    for check, (_, kinds) in CHECKS.items():
        if item.kind not in kinds:
            continue
        if check == "canonical-order" and not isinstance((item.example.neighbours or (None,))[0], Mapping):
            continue
        out.append(check)
    return out


def run_one(item: RegistryItem, check: str, settings: Settings) -> None:
    """Run one check (raises :class:`ContractError` on failure)."""
    if not isinstance(item, RegistryItem):
        raise PrivregTypeError(f"item must be a RegistryItem; got {item!r}")
    if check not in CHECKS:
        from privreg.core.errors import PrivregValueError

        raise PrivregValueError(f"check must be one of {list(CHECKS)}; got {check!r}")
    if check not in applicable_checks(item):
        from privreg.core.errors import PrivregValueError

        raise PrivregValueError(
            f"check {check!r} does not apply to {item.kind_name} {item.name!r}; its checks are "
            f"{applicable_checks(item)}"
        )
    CHECKS[check][0](item, settings)
