"""Which party encrypts, per LSH key (paper 004, Section 5, Algorithm 1 lines 1-4).

The paper's rule: for the candidate groups of one LSH key, only one party encrypts the
matching filters ``BF`` of its records, and the linkage unit chooses these encrypting
parties "so that the party with the longest encryption time takes as little time as
possible". A record encrypted once serves every group it appears in.

Problem. Units ``u`` are the LSH keys ``(lsh_group, lsh_key)`` of the final blocks that
produced the groups; ``R_p(u)`` is the set of party ``p``'s records in the groups of unit
``u``. An assignment ``sigma: units -> parties`` costs party ``p`` the distinct records
``load_p = |U_{u: sigma(u) = p} R_p(u)|`` (encryption time is proportional to it), and
its makespan is ``max_p load_p / speed_p`` (``speed_p``: relative encryption speed, 1 by
default). Minimising the makespan is NP-hard: with disjoint record sets and equal costs
it is already makespan scheduling on identical machines (P||Cmax); here a unit's cost
depends on the party (unrelated machines, R||Cmax) and overlapping units share records.
Greedy list scheduling (LPT) carries its 4/3 guarantee only in the identical-machine
case, so the method below certifies its answer per instance instead.

Method (``method="auto"``):

1. Greedy LPT: units in decreasing order of their cheapest cost ``min_p |R_p(u)| /
   speed_p``; each goes to the party whose finishing time, counting only records it
   does not encrypt yet, is smallest.
2. Local search: move a unit away from a most loaded party while that lowers the number
   of parties at the makespan (or the makespan), until no move does.
3. Lower bound: the larger of ``max_u min_p |R_p(u)| / speed_p`` (some party must
   encrypt all of ``R_p(u)``) and a packing bound (:func:`_lower_bound`), raised to the
   next value a makespan can take. If the greedy makespan equals it, it is optimal.
4. Otherwise, for instances of at most :data:`MILP_MAX_VARIABLES` unit-party pairs, the
   exact model is solved as a MILP (HiGHS through scipy) within ``time_limit`` seconds:
   binary ``x[u, p]`` (``p`` encrypts ``u``), ``y[p, r] >= x[u, p]`` for ``r`` in
   ``R_p(u)``, ``sum_r y[p, r] <= speed_p * C``, minimise ``C``. The better of its
   incumbent and the greedy answer is returned, with HiGHS's dual bound as lower bound
   when it is higher.

Guarantee: the returned ``makespan`` is at most ``ratio = makespan / lower_bound`` times
the optimum, with ``lower_bound`` proven; ``optimal`` when the ratio is 1, always so when
HiGHS finishes within the time limit (small instances; the tests compare with brute
force). On large instances the bound is loose where records are shared by many units:
ratio 1.24 and 1.40 on the 3 x 2000 and 3 x 5000 synthetic benchmarks, where the loads
are equal across parties. ``method="greedy"`` skips the MILP (steps 1-3);
``method="exact"`` solves the MILP whatever the size, without a time limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.pprl.records import CandidateGroups, FinalBlock

__all__ = ["METHODS", "EncryptorAssignment", "group_units", "assign_encryptors", "unit_costs"]

METHODS = ("auto", "greedy", "exact")
#: ``method="auto"`` tries the MILP only up to this many assignment variables (units x
#: parties): beyond it the LP relaxation is weak (shared records) and HiGHS rarely beats
#: the greedy answer within seconds.
MILP_MAX_VARIABLES = 3000


@attrs.frozen(kw_only=True, eq=False)
class EncryptorAssignment:
    """The encrypting party of every unit and what it costs.

    ``unit_party[u]`` is the column (index into ``parties``) of the party that encrypts
    the records of unit ``u``; ``encrypt[p]`` the sorted distinct records party ``p``
    encrypts; ``loads[p]`` their number. ``lower_bound`` is proven: no assignment has a
    smaller makespan.
    """

    parties: tuple[str, ...]
    unit_party: np.ndarray
    loads: np.ndarray
    speeds: np.ndarray
    makespan: float
    lower_bound: float
    method: str
    encrypt: dict[str, np.ndarray]

    @property
    def optimal(self) -> bool:
        return self.makespan <= self.lower_bound * (1 + 1e-9)

    @property
    def ratio(self) -> float:
        """``makespan / lower_bound``: a proven approximation factor for this instance."""
        return 1.0 if self.lower_bound <= 0 else self.makespan / self.lower_bound

    def group_encryptors(self, units: np.ndarray) -> np.ndarray:
        """The encrypting party (column) of each group, given the unit of each group."""
        return self.unit_party[np.asarray(units, dtype=np.int64)]

    def describe(self) -> str:
        loads = ", ".join(f"{p}: {int(x)}" for p, x in zip(self.parties, self.loads))
        return (
            f"encryptor assignment ({self.method}): records encrypted {loads}; makespan {self.makespan:g}, "
            f"lower bound {self.lower_bound:g} (ratio {self.ratio:.3f}{', optimal' if self.optimal else ''})"
        )


def group_units(groups: CandidateGroups, blocks: Sequence[FinalBlock]) -> np.ndarray:
    """The unit (dense id of the LSH key ``(lsh_group, lsh_key)`` of its final block) of
    each candidate group."""
    if not isinstance(groups, CandidateGroups):
        raise PrivregTypeError(f"groups must be CandidateGroups; got {type(groups).__name__}.")
    blocks = list(blocks)
    if len(groups) == 0:
        return np.zeros(0, dtype=np.int64)
    b = np.asarray(groups.block, dtype=np.int64)
    if b.min() < 0 or b.max() >= len(blocks):
        raise PrivregValueError(f"groups.block refers to final blocks outside 0..{len(blocks) - 1}.")
    # dense ids of (lsh_group, lsh_key) over the blocks (keys are uint64: compare as pairs)
    lsh_group = np.array([int(blk.lsh_group) for blk in blocks], dtype=np.int64)
    lsh_key = np.array([int(blk.lsh_key) for blk in blocks], dtype=np.uint64)
    pair = np.stack([lsh_group.astype(np.uint64), lsh_key], axis=1)
    _, block_unit = np.unique(pair, axis=0, return_inverse=True)
    _, dense = np.unique(block_unit.reshape(-1)[b], return_inverse=True)
    return dense.reshape(-1).astype(np.int64)


def _speeds(parties: tuple[str, ...], speeds: Mapping[str, float] | None) -> np.ndarray:
    if speeds is None:
        return np.ones(len(parties))
    if not isinstance(speeds, Mapping) or set(speeds) != set(parties):
        raise PrivregValueError(f"speeds must map every party {list(parties)} to a positive number; got {speeds!r}.")
    out = np.array([v.check_real(f"speeds[{p!r}]", speeds[p]) for p in parties])
    if not np.all((out > 0) & np.isfinite(out)):
        raise PrivregValueError(f"speeds must be positive and finite; got {dict(speeds)!r}.")
    return out


class _Incidence:
    """Per party: the distinct (unit, record) pairs, records renumbered densely."""

    def __init__(self, groups: CandidateGroups, units: np.ndarray) -> None:
        self.n_units = int(units.max()) + 1 if units.size else 0
        self.unit_ptr: list[np.ndarray] = []  # per party: offsets into rec by unit
        self.rec: list[np.ndarray] = []  # per party: dense record ids, grouped by unit
        self.records: list[np.ndarray] = []  # per party: dense id -> record index
        for p in range(groups.records.shape[1]):
            rec = groups.records[:, p].astype(np.int64)
            stride = int(rec.max()) + 1 if rec.size else 1
            key = np.unique(units * stride + rec)  # distinct (unit, record), sorted by unit
            pair_unit, pair_rec = key // stride, key % stride
            recs, dense = np.unique(pair_rec, return_inverse=True)
            self.records.append(recs)
            self.rec.append(dense.reshape(-1).astype(np.int64))
            self.unit_ptr.append(np.searchsorted(pair_unit, np.arange(self.n_units + 1)))
        self.cost = (
            np.stack([np.diff(ptr) for ptr in self.unit_ptr], axis=1)
            if self.n_units
            else np.zeros((0, groups.records.shape[1]), dtype=np.int64)
        )

    def of(self, p: int, u: int) -> np.ndarray:
        ptr = self.unit_ptr[p]
        return self.rec[p][ptr[u] : ptr[u + 1]]


def unit_costs(groups: CandidateGroups, units: Any) -> np.ndarray:
    """``(units, parties)``: the distinct records of each party in each unit, ``|R_p(u)|``."""
    return _Incidence(groups, _check_units(groups, units)).cost


def _check_units(groups: CandidateGroups, units: Any) -> np.ndarray:
    if not isinstance(groups, CandidateGroups):
        raise PrivregTypeError(f"groups must be CandidateGroups; got {type(groups).__name__}.")
    u = np.asarray(units)
    if u.shape != (len(groups),) or (u.size and (u.dtype.kind not in "iu" or u.min() < 0)):
        raise PrivregValueError(
            f"units must give one non-negative unit id per group ({len(groups)}); got shape {u.shape}."
        )
    return u.astype(np.int64)


def _loads(inc: _Incidence, unit_party: np.ndarray, n: int) -> tuple[np.ndarray, list[np.ndarray]]:
    counts = [np.zeros(len(inc.records[p]), dtype=np.int64) for p in range(n)]
    for u in range(inc.n_units):
        p = int(unit_party[u])
        counts[p][inc.of(p, u)] += 1
    return np.array([int(np.count_nonzero(c)) for c in counts]), counts


def _greedy(inc: _Incidence, speeds: np.ndarray) -> np.ndarray:
    n = len(speeds)
    scaled = inc.cost / speeds
    order = np.lexsort((-scaled.max(axis=1), -scaled.min(axis=1))) if inc.n_units else np.zeros(0, dtype=np.int64)
    counts = [np.zeros(len(inc.records[p]), dtype=np.int64) for p in range(n)]
    load = np.zeros(n, dtype=np.int64)
    unit_party = np.zeros(inc.n_units, dtype=np.int64)
    for u in order.tolist():
        best, best_key = 0, None
        for p in range(n):
            marg = int(np.count_nonzero(counts[p][inc.of(p, u)] == 0))
            key = ((load[p] + marg) / speeds[p], marg / speeds[p], p)
            if best_key is None or key < best_key:
                best, best_key = p, key
        counts[best][inc.of(best, u)] += 1
        load[best] = np.count_nonzero(counts[best])
        unit_party[u] = best
    return _local_search(inc, speeds, unit_party, counts, load)


def _local_search(
    inc: _Incidence, speeds: np.ndarray, unit_party: np.ndarray, counts: list[np.ndarray], load: np.ndarray
) -> np.ndarray:
    """Move units off a most loaded party while that lowers (makespan, parties at it)."""
    n = len(speeds)
    for _ in range(10 * inc.n_units + 10):
        finish = load / speeds
        top = finish.max()
        crit = int(np.argmax(finish))
        moved = False
        for u in np.flatnonzero(unit_party == crit).tolist():
            gain = int(np.count_nonzero(counts[crit][inc.of(crit, u)] == 1))
            if gain == 0 or (load[crit] - gain) / speeds[crit] >= top:
                continue
            for q in range(n):
                if q == crit:
                    continue
                inc_q = int(np.count_nonzero(counts[q][inc.of(q, u)] == 0))
                if (load[q] + inc_q) / speeds[q] < top:
                    counts[crit][inc.of(crit, u)] -= 1
                    counts[q][inc.of(q, u)] += 1
                    load[crit] -= gain
                    load[q] += inc_q
                    unit_party[u] = q
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return unit_party


def _model(inc: _Incidence, speeds: np.ndarray) -> tuple[Any, ...]:
    """The exact model as (c, integrality, bounds, constraints) for scipy.optimize.milp."""
    import scipy.sparse as sp
    from scipy.optimize import Bounds, LinearConstraint

    n, U = len(speeds), inc.n_units
    y_off = [U * n]
    for p in range(n):
        y_off.append(y_off[-1] + len(inc.records[p]))
    c_var = y_off[-1]
    nvar = c_var + 1
    rows, cols, vals, lb, ub = [], [], [], [], []
    r = 0
    for u in range(U):  # each unit has one encrypting party
        for p in range(n):
            rows.append(r)
            cols.append(u * n + p)
            vals.append(1.0)
        lb.append(1.0)
        ub.append(1.0)
        r += 1
    for p in range(n):  # y[p, rec] >= x[u, p] for rec in R_p(u)
        units_of = np.repeat(np.arange(U), np.diff(inc.unit_ptr[p]))
        k = units_of.size
        idx = np.arange(r, r + k)
        rows += idx.tolist() * 2
        cols += (y_off[p] + inc.rec[p]).tolist() + (units_of * n + p).tolist()
        vals += [1.0] * k + [-1.0] * k
        lb += [0.0] * k
        ub += [np.inf] * k
        r += k
    for p in range(n):  # load_p <= speed_p * C
        m = len(inc.records[p])
        rows += [r] * (m + 1)
        cols += list(range(y_off[p], y_off[p + 1])) + [c_var]
        vals += [1.0] * m + [-float(speeds[p])]
        lb.append(-np.inf)
        ub.append(0.0)
        r += 1
    A = sp.csr_matrix((vals, (rows, cols)), shape=(r, nvar))
    cost = np.zeros(nvar)
    cost[c_var] = 1.0
    integrality = np.zeros(nvar)
    integrality[: U * n] = 1
    if np.all(speeds == 1.0):
        integrality[c_var] = 1  # the makespan is a record count: lets HiGHS prune on integrality
    upper = np.ones(nvar)
    upper[c_var] = np.inf
    return cost, integrality, Bounds(np.zeros(nvar), upper), LinearConstraint(A, lb, ub)


def _lower_bound(inc: _Incidence, speeds: np.ndarray) -> float:
    """A proven lower bound on the makespan: the larger of

    - ``max_u min_p |R_p(u)| / speed_p`` (some party encrypts all of ``R_p(u)``), and
    - ``sum_{u in I} min_p |R_p(u)| / sum_p speed_p`` for a set ``I`` of units no two of
      which share a record of any party (their costs add up in every assignment, and
      ``sum_p load_p <= makespan * sum_p speed_p``); ``I`` is chosen greedily, cheapest
      cost first, in decreasing order.
    """
    scaled = inc.cost / speeds
    single = float(scaled.min(axis=1).max())
    taken = [np.zeros(len(r), dtype=bool) for r in inc.records]
    total = 0
    for u in np.argsort(-inc.cost.min(axis=1), kind="stable").tolist():
        parts = [inc.of(p, u) for p in range(len(speeds))]
        if any(taken[p][parts[p]].any() for p in range(len(speeds))):
            continue
        for p in range(len(speeds)):
            taken[p][parts[p]] = True
        total += int(inc.cost[u].min())
    return max(single, total / float(speeds.sum()))


def _round_up(bound: float, speeds: np.ndarray) -> float:
    """The smallest value ``load / speed_p`` (integer load) that is at least ``bound``."""
    return float(min(math.ceil(bound * s - 1e-6 * max(1.0, bound * s)) / s for s in speeds))


def assign_encryptors(
    groups: CandidateGroups,
    units: Any,
    *,
    speeds: Mapping[str, float] | None = None,
    method: str = "auto",
    time_limit: float = 10.0,
) -> EncryptorAssignment:
    """Choose the encrypting party of every unit (LSH key), minimising the largest
    encryption load (distinct records / speed); see the module docstring for the method
    and its per-instance guarantee.

    ``units``: the unit of each group (:func:`group_units`). ``speeds``: relative
    encryption speed per party (default equal). ``time_limit``: seconds for the MILP
    (``method="auto"``).
    """
    from scipy.optimize import milp

    units = _check_units(groups, units)
    if method not in METHODS:
        raise PrivregValueError(f"method must be one of {METHODS}; got {method!r}.")
    limit = v.check_real("time_limit", time_limit)
    if not limit > 0:
        raise PrivregValueError(f"time_limit must be positive seconds; got {time_limit!r}.")
    parties = tuple(groups.parties)
    n = len(parties)
    s = _speeds(parties, speeds)
    inc = _Incidence(groups, units)
    unit_party = _greedy(inc, s)
    used = "greedy"
    loads, _ = _loads(inc, unit_party, n)
    makespan = float((loads / s).max()) if inc.n_units else 0.0
    lower = _round_up(_lower_bound(inc, s), s) if inc.n_units else 0.0
    small = inc.n_units * n <= MILP_MAX_VARIABLES
    if method != "greedy" and makespan > lower * (1 + 1e-9) and (method == "exact" or small):
        equal = bool(np.all(s == s[0]))
        unit = s / s[0] if equal else s  # equal speeds: work in records (integer makespans)
        cost, integrality, bounds, cons = _model(inc, unit)
        options: dict[str, Any] = {"disp": False}
        if equal:  # stop once the gap is below one record: the incumbent is then optimal
            options["mip_rel_gap"] = 0.99 / max(1.0, makespan * s[0])
        if method == "auto":
            options["time_limit"] = limit
        res = milp(cost, integrality=integrality, bounds=bounds, constraints=cons, options=options)
        if res.x is not None:
            cand = np.argmax(res.x[: inc.n_units * n].reshape(inc.n_units, n), axis=1).astype(np.int64)
            cand_loads, _ = _loads(inc, cand, n)
            cand_span = float((cand_loads / s).max())
            if cand_span < makespan:
                unit_party, loads, makespan, used = cand, cand_loads, cand_span, "milp"
        dual = getattr(res, "mip_dual_bound", None)
        if dual is None and res.status == 0:
            dual = res.fun
        if dual is not None and np.isfinite(dual):  # HiGHS's proven bound on the optimum
            if equal:
                dual = math.ceil(float(dual) - 1e-3) / s[0]  # integer record counts (1e-3: HiGHS tolerance)
            lower = max(lower, _round_up(float(dual), s))
    lower = min(lower, makespan)
    _, counts = _loads(inc, unit_party, n)
    encrypt = {p: inc.records[i][np.flatnonzero(counts[i])] for i, p in enumerate(parties)}
    return EncryptorAssignment(
        parties=parties,
        unit_party=unit_party,
        loads=np.asarray(loads, dtype=np.int64),
        speeds=s,
        makespan=makespan,
        lower_bound=lower,
        method=used,
        encrypt=encrypt,
    )
