"""privreg.testing catches the subtle bugs of issue #30: deliberately broken third-party
items, registered through a plugin as an author would, each fail with a message naming
the fix, and their correct twins pass.

* the exact check: Laplace at 0.8 of its scale (discrete, and continuous with a density
  law), k-ary randomized response computed with k - 2 for k - 1, and a law that is not
  the sampler's;
* errors compared by difference: float.hex(value), the number of bad entries, the first
  bad index, the order of magnitude, "got max 3", the key;
* the order check with distinct values: keys ordered by true count, ties broken by key;
* the neighbour-relation check.

Every draw is seeded and the exact verdicts involve no sampling. The law test and the
audits run at alpha 1e-6: a correct item is flagged with probability at most 1e-6 each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from scipy import stats

import privreg
from privreg import Mechanism, PrivacyEvent, PrivregValueError, Randomizer, RandomSource
from privreg.core.events import DiscreteLaplace
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Citation, Example, Param, RegistryItem
from privreg.core.laws import DensityLaw
from privreg.mechanisms.laws import categorical_law, two_sided_geometric_law
from privreg.noise.fast import discrete_laplace_many
from privreg.testing import ContractError, check_item, run_check

CITE = Citation(authors="Dwork, McSherry, Nissim, Smith", title="Calibrating noise to sensitivity", year=2006)
EPS = (Param(name="epsilon", type=float, doc="privacy parameter", minimum=0, exclusive_minimum=True),)
MAX = 2**62

# ---------------------------------------------------------------------------------------
# Scalar counts with two-sided geometric noise. Correct: scale 1/epsilon; broken: 0.8 of it.
# ---------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class GeometricCount(Mechanism):
    """A count with two-sided geometric noise of scale ``shrink / epsilon``, charged as
    ``DiscreteLaplace(1 / epsilon, 1)``: epsilon-DP for counts when ``shrink`` is 1."""

    name: ClassVar[str] = "geometric-count"
    shrink: ClassVar[Fraction] = Fraction(1)
    epsilon: float = 1.0

    @property
    def scale(self) -> Fraction:
        return self.shrink / Fraction(self.epsilon)

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def validate_input(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not -MAX <= value <= MAX:
            raise PrivregValueError("value must be an integer count in [-2**62, 2**62]")
        return int(value)

    def _sample(self, value: int, rng: RandomSource, data: Any) -> int:
        return value + int(discrete_laplace_many(self.scale, 1, rng)[0])

    def _sample_many(self, value: int, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        return value + discrete_laplace_many(self.scale, count, rng)

    def output_law(self, value: int) -> Any:
        return two_sided_geometric_law(self.scale, value)


@attrs.frozen(kw_only=True)
class ShrunkCount(GeometricCount):
    """BROKEN: noise at 0.8 of the scale its event claims (true epsilon 1.25 epsilon); its
    law is its sampler's, so the exact check sees the overrun."""

    name: ClassVar[str] = "shrunk-count"
    shrink: ClassVar[Fraction] = Fraction(4, 5)


@attrs.frozen(kw_only=True)
class MisdeclaredCount(ShrunkCount):
    """BROKEN twice: noise at 0.8 of the scale, and a law declared at the full scale."""

    name: ClassVar[str] = "misdeclared-count"

    def output_law(self, value: int) -> Any:
        return two_sided_geometric_law(1 / Fraction(self.epsilon), value)


# ---------------------------------------------------------------------------------------
# Continuous Laplace from a density (floating point: a toy, for the density law only).
# ---------------------------------------------------------------------------------------


def _uniform(rng: RandomSource, count: int) -> np.ndarray:
    return (np.array([rng.randbits(53) for _ in range(count)], dtype=np.float64) + 0.5) / 2.0**53


@attrs.frozen(kw_only=True)
class FloatLaplace(Mechanism):
    """Laplace noise of scale ``shrink / epsilon`` on a real query of sensitivity 1, by
    inversion of uniform draws; declares the continuous Laplace density. Not private in
    floating point (Mironov 2012: the audit flags it), but its declared law is exact."""

    name: ClassVar[str] = "float-laplace"
    shrink: ClassVar[float] = 1.0
    epsilon: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def validate_input(self, value: Any) -> float:
        arr = np.asarray(value, dtype=np.float64)
        x = float(arr) if arr.ndim == 0 else math.nan
        if not math.isfinite(x) or abs(x) > 1e6:
            raise PrivregValueError("value must be a finite number in [-1e6, 1e6]")
        return x

    def _sample_many(self, value: float, count: int, rng: RandomSource, data: Any) -> np.ndarray:
        u = _uniform(rng, count) - 0.5
        return value - self.shrink / self.epsilon * np.sign(u) * np.log1p(-2 * np.abs(u))

    def _sample(self, value: float, rng: RandomSource, data: Any) -> float:
        return float(self._sample_many(value, 1, rng, data)[0])

    def output_law(self, value: float) -> Any:
        return DensityLaw(distribution=stats.laplace(loc=value, scale=self.shrink / self.epsilon))


@attrs.frozen(kw_only=True)
class ShrunkFloatLaplace(FloatLaplace):
    """BROKEN: continuous Laplace at 0.8 of its scale."""

    name: ClassVar[str] = "shrunk-float-laplace"
    shrink: ClassVar[float] = 0.8


# ---------------------------------------------------------------------------------------
# k-ary randomized response. Correct: keep w.p. e^eps / (e^eps + k - 1); broken: k - 2.
# ---------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PlainRR(Randomizer):
    """k-ary randomized response keeping the input w.p. ``e^eps / (e^eps + k - 1 - off)``:
    epsilon-LDP when ``off`` is 0."""

    name: ClassVar[str] = "plain-rr"
    off: ClassVar[int] = 0
    epsilon: float = 1.0
    k: int = 4

    @property
    def epsilon0(self) -> float:
        return self.epsilon

    @property
    def keep(self) -> float:
        e = math.exp(self.epsilon)
        return e / (e + self.k - 1 - self.off)

    def validate_inputs(self, inputs: Any) -> np.ndarray:
        arr = np.asarray(inputs)
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() >= self.k)):
            raise PrivregValueError("inputs must be a 1-d array of category codes in [0, k)")
        return arr.astype(np.int64)

    def _randomize(self, inputs: np.ndarray, rng: RandomSource) -> np.ndarray:
        threshold = int(self.keep * 2**53)
        out = inputs.copy()
        for i in range(inputs.size):
            if rng.randbits(53) >= threshold:
                other = rng.randbelow(self.k - 1)
                out[i] = other + (other >= inputs[i])
        return out

    def output_law(self, value: Any) -> Any:
        threshold = int(self.keep * 2**53)
        p = threshold / 2**53
        probs = np.full(self.k, (1 - p) / (self.k - 1))
        probs[int(value)] = p
        return categorical_law(probs)


@attrs.frozen(kw_only=True)
class LooseRR(PlainRR):
    """BROKEN: keeps with e^eps / (e^eps + k - 2) (true epsilon eps + log((k-1)/(k-2)))."""

    name: ClassVar[str] = "loose-rr"
    off: ClassVar[int] = 1


@attrs.frozen(kw_only=True)
class AddRemoveRR(PlainRR):
    """BROKEN: registered as add/remove (see the plugin), charges LocalDP (replace-one)."""

    name: ClassVar[str] = "add-remove-rr"


# ---------------------------------------------------------------------------------------
# Vectors of counts whose error messages leak in another form.
# ---------------------------------------------------------------------------------------


def _bad(arr: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(arr) | (arr < 0) | (arr > MAX) | (arr != np.round(arr))


@attrs.frozen(kw_only=True)
class CountVector(Mechanism):
    """Three counts with two-sided geometric noise of scale 1/epsilon (L1 sensitivity 1);
    one message for every invalid input."""

    name: ClassVar[str] = "count-vector"
    epsilon: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        return PrivregValueError("value must hold 3 integer counts in [0, 2**62]; some entries do not")

    def validate_input(self, value: Any) -> np.ndarray:
        try:
            arr = np.array([float(v) for v in np.asarray(value, dtype=object).ravel()])
        except (TypeError, ValueError, OverflowError):
            raise PrivregValueError("value must hold 3 integer counts in [0, 2**62]; some entries do not") from None
        if arr.size != 3:
            raise PrivregValueError("value must hold 3 integer counts in [0, 2**62]; some entries do not")
        bad = _bad(arr)
        if bad.any():
            raise self.refuse(arr, bad)
        return arr.astype(np.int64)

    def _sample(self, value: np.ndarray, rng: RandomSource, data: Any) -> np.ndarray:
        return value + discrete_laplace_many(1 / Fraction(self.epsilon), 3, rng)


@attrs.frozen(kw_only=True)
class HexLeak(CountVector):
    """BROKEN: quotes the offending value as float.hex (no decimal digits to search for)."""

    name: ClassVar[str] = "hex-leak"

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        return PrivregValueError(f"value holds an invalid count ({float(arr[bad][0]).hex()}); fix it")


@attrs.frozen(kw_only=True)
class CountLeak(CountVector):
    """BROKEN: says how many entries are invalid."""

    name: ClassVar[str] = "count-leak"

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        return PrivregValueError(f"value has {int(bad.sum())} invalid count(s); fix them")


@attrs.frozen(kw_only=True)
class IndexLeak(CountVector):
    """BROKEN: names the first invalid entry's index."""

    name: ClassVar[str] = "index-leak"

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        return PrivregValueError(f"value[{int(np.flatnonzero(bad)[0])}] is not a count in [0, 2**62]")


@attrs.frozen(kw_only=True)
class MagnitudeLeak(CountVector):
    """BROKEN: states the order of magnitude of the offending value."""

    name: ClassVar[str] = "magnitude-leak"

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        v = abs(float(arr[bad][0]))
        order = "not a number" if not math.isfinite(v) else f"of order 1e{int(math.floor(math.log10(v or 1)))}"
        return PrivregValueError(f"value holds a count {order} outside [0, 2**62]")


@attrs.frozen(kw_only=True)
class MaxLeak(CountVector):
    """BROKEN: "got max 3" -- quotes counts.max() of the whole input."""

    name: ClassVar[str] = "max-leak"

    def refuse(self, arr: np.ndarray, bad: np.ndarray) -> Exception:
        return PrivregValueError(f"value must hold counts in [0, 2**62]; got max {np.nanmax(arr[~bad]):g}")


# ---------------------------------------------------------------------------------------
# Counts per key, released in an order.
# ---------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class KeyCounts(Mechanism):
    """Noisy counts per key (scale 1/epsilon, one user changes one count by 1), keys sorted."""

    name: ClassVar[str] = "key-counts"
    epsilon: float = 1.0

    def privacy_event(self) -> PrivacyEvent:
        return DiscreteLaplace(scale=1 / self.epsilon, sensitivity=1)

    def validate_input(self, value: Any) -> dict[Any, int]:
        if not isinstance(value, Mapping) or not all(
            isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= MAX for c in value.values()
        ):
            raise PrivregValueError("value must map keys to integer counts in [0, 2**62]; some do not")
        return {k: int(c) for k, c in value.items()}

    def order(self, value: dict[Any, int]) -> list[Any]:
        return sorted(value)

    def _sample(self, value: dict[Any, int], rng: RandomSource, data: Any) -> dict[Any, int]:
        keys = self.order(value)
        noise = discrete_laplace_many(1 / Fraction(self.epsilon), len(keys), rng)
        return {k: value[k] + int(z) for k, z in zip(keys, noise)}


@attrs.frozen(kw_only=True)
class ByCountThenKey(KeyCounts):
    """BROKEN: keys ordered by true count (largest first), ties broken by key -- with tied
    counts the order is the keys' own, so a check with equal counts cannot see it."""

    name: ClassVar[str] = "by-count-then-key"

    def order(self, value: dict[Any, int]) -> list[Any]:
        return sorted(value, key=lambda k: (-value[k], k))


@attrs.frozen(kw_only=True)
class ByNoisyCount(KeyCounts):
    """Correct: keys ordered by their *released* counts (post-processing of the output)."""

    name: ClassVar[str] = "by-noisy-count"

    def _sample(self, value: dict[Any, int], rng: RandomSource, data: Any) -> dict[Any, int]:
        noisy = super()._sample(value, rng, data)
        return dict(sorted(noisy.items(), key=lambda kv: (-kv[1], kv[0])))


@attrs.frozen(kw_only=True)
class KeyLeak(KeyCounts):
    """BROKEN: names the key whose count is invalid."""

    name: ClassVar[str] = "key-leak"

    def validate_input(self, value: Any) -> dict[Any, int]:
        for k, c in dict(value).items():
            if not (isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= MAX):
                raise PrivregValueError(f"the count of key {k!r} must be an integer in [0, 2**62]")
        return super().validate_input(value)


# ---------------------------------------------------------------------------------------
# The plugin.
# ---------------------------------------------------------------------------------------


def _factory(cls: type) -> Any:
    def make(*, epsilon: float) -> Any:
        return cls(epsilon=epsilon)

    make.__doc__ = cls.__doc__
    return make


def _item(cls: type, neighbours: Any, kind: str = "mechanism", **extra: Any) -> RegistryItem:
    return RegistryItem(
        name=cls.name,
        kind=kind,
        summary="a test item of privreg.testing (issue #30)",
        citation=CITE,
        factory=_factory(cls),
        params=EPS,
        example=Example(params={"epsilon": 1.0}, neighbours=neighbours),
        **extra,
    )


class _Plugin:
    @hookimpl
    def privreg_register_mechanisms(self):  # type: ignore[no-untyped-def]
        vector = (np.array([3, 5, 2]), np.array([4, 5, 2]))
        keyed = ({"a": 10, "b": 3}, {"a": 11, "b": 3})
        return [
            _item(GeometricCount, (5, 6)),
            _item(ShrunkCount, (5, 6)),
            _item(MisdeclaredCount, (5, 6)),
            _item(FloatLaplace, (0.0, 1.0)),
            _item(ShrunkFloatLaplace, (0.0, 1.0)),
            *(_item(cls, vector) for cls in (CountVector, HexLeak, CountLeak, IndexLeak, MagnitudeLeak, MaxLeak)),
            *(_item(cls, keyed) for cls in (KeyCounts, ByCountThenKey, ByNoisyCount, KeyLeak)),
        ]

    @hookimpl
    def privreg_register_randomizers(self):  # type: ignore[no-untyped-def]
        single = (np.array([0]), np.array([1]))
        return [
            _item(PlainRR, single, kind="randomizer", neighbouring="replace_one"),
            _item(LooseRR, single, kind="randomizer", neighbouring="replace_one"),
            _item(AddRemoveRR, single, kind="randomizer"),
        ]


@pytest.fixture(scope="module")
def registry() -> Any:
    return privreg.load_registry(plugins={"subtle": _Plugin()}, autoload=False)


def _fails(item: RegistryItem, check: str, **kw: Any) -> ContractError:
    with pytest.raises(ContractError) as info:
        run_check(item, check, **kw)
    err = info.value
    assert err.check == check and err.item == item.name and "Fix: " in str(err)
    return err


# ---------------------------------------------------------------------------------------
# The correct twins pass every check.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["geometric-count", "plain-rr", "count-vector", "key-counts"], ids=str)
def test_the_correct_twins_pass_every_check(registry, name):
    report = check_item(registry.get(name))
    assert report.passed, report.failures
    assert "exact" in report.checks and "neighbouring" in report.checks
    assert "detects with 90% probability an overrun of" in report.power


# ---------------------------------------------------------------------------------------
# Exact mode.
# ---------------------------------------------------------------------------------------


def test_laplace_at_0_8_of_its_scale_fails_exact(registry):
    """The true epsilon is 1.25: the exact loss says so, with no sampling."""
    err = _fails(registry.get("shrunk-count"), "exact")
    assert "largest privacy loss is 1.25" in err.problem and "no sampling error" in err.problem
    assert "1.25x the claim" in err.fix and "scale = sensitivity / epsilon" in err.fix
    # the default profile's audit cannot see it: the power it states says why
    run_check(registry.get("shrunk-count"), "audit")


def test_continuous_laplace_at_0_8_of_its_scale_fails_exact(registry):
    err = _fails(registry.get("shrunk-float-laplace"), "exact")
    assert "largest privacy loss is 1.25" in err.problem and "1.25x the claim" in err.fix
    run_check(registry.get("float-laplace"), "exact")  # its law is exact; only floating point leaks
    assert "leaks through floating point" in _fails(registry.get("float-laplace"), "audit").fix


def test_k_minus_2_randomized_response_fails_exact(registry):
    """keep = e / (e + 2) for k = 4: the likelihood ratio is e * 3/2, epsilon 1 + log 1.5."""
    err = _fails(registry.get("loose-rr"), "exact")
    assert f"largest privacy loss is {1 + math.log(1.5):.4g}" in err.problem
    assert "e^eps / (e^eps + k - 1)" in err.fix


def test_a_law_that_is_not_the_samplers_fails_exact(registry):
    """Declared at the claimed scale, drawn at 0.8 of it: the law test sees the difference."""
    err = _fails(registry.get("misdeclared-count"), "exact")
    assert "do not follow the law it declares" in err.problem and "false alarm <= 1e-06" in err.problem
    assert "the law the sampler actually draws from" in err.fix


def test_the_exact_verdict_does_not_depend_on_the_seed(registry):
    for seed in (0, 1, 2):
        err = _fails(registry.get("shrunk-count"), "exact", rng_seed=seed)
        assert "largest privacy loss is 1.25" in err.problem


def test_the_thorough_profile_audit_sees_a_25_percent_overrun_without_a_law(registry):
    """Without the exact check, the thorough audit (100,000 samples per neighbour) flags
    the 0.8-scale count; false alarm of the audit <= 1e-6."""
    err = _fails(registry.get("shrunk-count"), "audit", profile="thorough")
    assert "empirical lower bound" in err.problem and "detects with 90% probability" in err.problem


# ---------------------------------------------------------------------------------------
# Errors compared by difference.
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,differs",
    [
        ("hex-leak", "the offending value (its repr, float.hex or order of magnitude)"),
        ("magnitude-leak", "the offending value (its repr, float.hex or order of magnitude)"),
        ("count-leak", "how many entries break the rule"),
        ("index-leak", "where the offending entry is (its index or key)"),
        ("max-leak", "the other, valid entries (e.g. a max, min or sum of the input)"),
        ("key-leak", "where the offending entry is (its index or key)"),
    ],
)
def test_messages_that_leak_in_another_form_fail_data_free_errors(registry, name, differs):
    err = _fails(registry.get(name), "data-free-errors")
    assert f"differ only in {differs}" in err.problem
    assert "never the value (repr, float.hex, magnitude), how many entries fail, their index or key" in err.fix


def test_hex_leak_is_caught_without_a_sentinel(registry):
    err = _fails(registry.get("hex-leak"), "data-free-errors")
    assert "0x1." in err.problem  # the message quoted float.hex: no decimal digits to search for


# ---------------------------------------------------------------------------------------
# Order by true count with ties broken by key.
# ---------------------------------------------------------------------------------------


def test_order_by_true_count_with_ties_broken_by_key_fails_canonical_order(registry):
    err = _fails(registry.get("by-count-then-key"), "canonical-order")
    assert "lists its keys by their true values" in err.problem and "ties broken by key" in err.problem
    assert "never an order by the true values" in err.fix


def test_order_by_released_count_passes_canonical_order(registry):
    """Sorting by the noisy counts is post-processing: no false alarm."""
    run_check(registry.get("by-noisy-count"), "canonical-order")


# ---------------------------------------------------------------------------------------
# The declared neighbour relation.
# ---------------------------------------------------------------------------------------


def test_a_randomizer_declared_add_remove_fails_neighbouring(registry):
    err = _fails(registry.get("add-remove-rr"), "neighbouring")
    assert "declares neighbouring='add_remove'" in err.problem and "LocalDP" in err.problem
    assert "neighbouring='replace_one'" in err.fix


def test_built_in_randomized_response_declares_replace_one():
    item = privreg.load_registry().get("randomized-response")
    assert item.neighbouring == "replace_one"
    run_check(item, "neighbouring")
