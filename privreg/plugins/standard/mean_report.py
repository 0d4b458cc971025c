"""What ``bounded-mean`` prints: its count, sum and mean with intervals, post-processed.

The count and the sum are Laplace releases on a grid; their ``level`` half-widths come
from the exact discrete Laplace law of the noise drawn
(:func:`privreg.analysis.accuracy.laplace_accuracy`). The mean is the ratio of the two
post-processed releases; its interval is the range of ``S / N`` over both parts'
intervals at ``1 - (1 - level) / 2`` each (a union bound), clipped to the bounds.
"""

from __future__ import annotations

import math

import attrs

from privreg.analysis.accuracy import laplace_accuracy, ratio_range
from privreg.analysis.report import NoisyValue, clamped_release, count_release, needed
from privreg.mechanisms.laplace import LaplaceMechanism, as_global_l1

__all__ = ["mean_mechanisms", "MeanReport"]

#: how far the needed epsilon is searched, as a multiple of the epsilon used
_EPSILON_RANGE = 1e6
_LAPLACE = "Laplace scale b on a grid (exact discrete Laplace law)"


def mean_mechanisms(epsilon: float, lower: float, upper: float) -> tuple[LaplaceMechanism, LaplaceMechanism]:
    """The count's (sensitivity 1) and the sum's (sensitivity ``max(|lower|, |upper|)``)
    Laplace mechanisms, each at ``epsilon / 2``."""
    half = epsilon / 2
    return (
        LaplaceMechanism(epsilon=half, sensitivity=as_global_l1(1.0)),
        LaplaceMechanism(epsilon=half, sensitivity=as_global_l1(max(abs(lower), abs(upper)))),
    )


def _halves(epsilon: float, lower: float, upper: float, level: float) -> tuple[float, float]:
    """``level`` half-widths of the raw count and the raw sum at total ``epsilon``."""
    count, total = mean_mechanisms(epsilon, lower, upper)
    return laplace_accuracy(count, level, "rows")[0], laplace_accuracy(total, level, "data units")[0]


def _ratio_half(n: float, s: float, hn: float, hs: float) -> float:
    """Half the width of the range of ``S / N`` for ``N`` within ``hn`` of ``n`` and ``S``
    within ``hs`` of ``s`` (``inf`` when ``N`` may be <= 0)."""
    box = ratio_range((s - hs, s + hs), (n - hn, n + hn))
    return math.inf if box is None else (box[1] - box[0]) / 2


@attrs.frozen(kw_only=True)
class MeanReport:
    """The half-widths and noise scales of ``bounded-mean``'s releases, computed before
    anything is charged (:meth:`prepare`); :meth:`values` then only does arithmetic on
    the releases, so nothing can fail between or after the charges."""

    epsilon: float
    lower: float
    upper: float
    level: float
    count_half: float
    sum_half: float
    count_scale: float
    sum_scale: float
    count_half_each: float  # at 1 - (1 - level) / 2, for the mean's union bound
    sum_half_each: float

    @classmethod
    def prepare(cls, *, epsilon: float, lower: float, upper: float, level: float) -> MeanReport:
        count, total = mean_mechanisms(epsilon, lower, upper)
        hn, count_acc = laplace_accuracy(count, level, "rows")
        hs, sum_acc = laplace_accuracy(total, level, "data units")
        hn2, hs2 = _halves(epsilon, lower, upper, 1 - (1 - level) / 2)
        return cls(
            epsilon=epsilon,
            lower=lower,
            upper=upper,
            level=level,
            count_half=hn,
            sum_half=hs,
            count_scale=count_acc.noise_scale,
            sum_scale=sum_acc.noise_scale,
            count_half_each=hn2,
            sum_half_each=hs2,
        )

    def values(self, raw_count: float, raw_sum: float) -> dict[str, NoisyValue]:
        """The count, sum and mean with their ``level`` intervals, after free
        post-processing: the count rounded to an integer >= 0, the sum clamped to the sign
        the bounds force (>= 0 when ``lower >= 0``, <= 0 when ``upper <= 0``), the mean
        ``sum / max(count, 1)`` clipped to ``[lower, upper]``. Where a half-width exceeds
        its value, the total epsilon and the rows that would bring it to the value are
        solved from the same half-widths, at the released values (the count's and the
        sum's half-widths do not shrink with more rows; the values grow). Never raises."""
        lower, upper, level, epsilon = self.lower, self.upper, self.level, self.epsilon
        each = 1 - (1 - level) / 2
        limit = _EPSILON_RANGE * epsilon
        n, n_lo, n_hi, h = count_release(raw_count, self.count_half)
        count = NoisyValue(
            name="count",
            value=n,
            low=n_lo,
            high=n_hi,
            level=level,
            half_width=h,
            noise_scale=self.count_scale,
            noise=_LAPLACE,
            post_processing="count rounded to the nearest integer >= 0",
            needed_epsilon=needed(
                lambda e: math.floor(_halves(e, lower, upper, level)[0] + 0.5), n, epsilon, limit=limit
            ),
            needed_rows=h,
        )

        sign_lo = 0.0 if lower >= 0 else None
        sign_hi = 0.0 if upper <= 0 else None
        hs = self.sum_half
        s, s_lo, s_hi = clamped_release(raw_sum, hs, lower=sign_lo, upper=sign_hi)
        m = min(upper, max(lower, s / max(n, 1)))
        total = NoisyValue(
            name="sum",
            value=s,
            low=s_lo,
            high=s_hi,
            level=level,
            half_width=hs,
            noise_scale=self.sum_scale,
            noise=_LAPLACE,
            post_processing="sum clamped to the sign the bounds force"
            if sign_lo is not None or sign_hi is not None
            else "sum as released",
            needed_epsilon=needed(lambda e: _halves(e, lower, upper, level)[1], abs(s), epsilon, limit=limit),
            needed_rows=math.ceil(hs / abs(m)) if m != 0 and math.isfinite(hs / abs(m)) else None,
        )

        hn2, hs2 = self.count_half_each, self.sum_half_each
        parts = (raw_sum, hs2, raw_count, hn2)
        box = (
            ratio_range((raw_sum - hs2, raw_sum + hs2), (raw_count - hn2, raw_count + hn2))
            if all(math.isfinite(x) for x in parts)
            else None
        )
        lo, hi = (lower, upper) if box is None else (min(upper, max(lower, box[0])), min(upper, max(lower, box[1])))

        def half_at_epsilon(e: float) -> float:
            a, b = _halves(e, lower, upper, each)
            return _ratio_half(n, n * m, a, b)

        rows = needed(lambda r: _ratio_half(r, r * m, hn2, hs2), abs(m), 1.0, limit=1e15, integer=True)
        mean = NoisyValue(
            name="mean",
            value=m,
            low=lo,
            high=hi,
            level=level,
            half_width=math.inf if box is None else (box[1] - box[0]) / 2,
            noise_scale=(self.sum_scale + abs(m) * self.count_scale) / max(n, 1),
            noise=f"ratio of the two releases (parts at {100 * each:g}% each); scale to first order "
            "(b_sum + |mean| b_count) / count",
            post_processing=f"mean = sum / max(count, 1) clipped to [{lower:g}, {upper:g}]",
            needed_epsilon=needed(half_at_epsilon, abs(m), epsilon, limit=limit),
            needed_rows=None if rows is None else int(rows),
        )
        return {"count": count, "sum": total, "mean": mean}
