"""MP-SPPRL (paper 004) without the cryptography: the linkage unit's pipeline on plaintext
filters, for quality tables at scales where Paillier would take hours.

:func:`plaintext_linkage` runs exactly the steps of
:class:`~privreg.plugins.pprl.protocol.PPRLProtocol` in one process:

1. ``lmin``: ``blocking.lmin`` if set, else the caller's ``lmin``, else the dispersion
   rule over **all** parties (:func:`~privreg.plugins.pprl.blocking.choose_lmin`: each
   party's single-block dispersions, their mean ``Hs`` (formula (2)), formula (3) and
   :func:`~privreg.plugins.pprl.dispersion.round_lmin` with ``config.max_lmin(L)``),
   which is what the protocol's ``"dispersion"`` / ``"lmin"`` steps compute. The
   dispersion step samples blocks, so with ``lmin=None`` two runs may pick different
   values; pass the protocol's ``lmin`` to reproduce a given run;
2. every party's block signatures (:func:`~privreg.plugins.pprl.blocking.party_signatures`),
   the sliding-window merge with ``blocking.window_for(n)`` and the candidate groups
   (Definition 3, with the same ``max_block_products`` / ``max_group_products`` guards);
3. the encrypting party per LSH key (:func:`~privreg.plugins.pprl.assignment.assign_encryptors`);
4. the verdict :func:`~privreg.plugins.pprl.matching.match_plaintext` with those encryptor
   columns (``rule="star"``: the encrypted record within ``T`` of every other record,
   Section 5 / Algorithm 1; ``rule="all"``: every pair within ``T``).

The protocol's linked groups equal this verdict for the same ``lmin`` and assignment
(``tests/test_pprl_protocol.py``, ``tests/test_pprl_plaintext.py``): early termination and
de-duplication change the cost, never the result. With ``assignment_method="auto"`` the
MILP has a time limit, so its answer can depend on the machine; ``"greedy"`` (the
default here) is deterministic. ``blocking=BlockingConfig(lmin=0)`` is LSH blocking only
(no suffix blocking): the upper bound on pair completeness of double blocking with the
same ``J, K`` (suffix blocking only splits LSH blocks; the merge re-joins some).

No privacy is involved: this is an evaluation tool that sees every filter.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.plugins.pprl.assignment import METHODS, EncryptorAssignment, assign_encryptors, group_units
from privreg.plugins.pprl.blocking import BlockingConfig, check_blocking, choose_lmin, party_signatures
from privreg.plugins.pprl.kdf import check_secret
from privreg.plugins.pprl.matching import check_rule, match_plaintext
from privreg.plugins.pprl.merge import candidate_groups, oversized_blocks, sliding_window_merge
from privreg.plugins.pprl.records import CandidateGroups, EncodedRecords, check_party_records
from privreg.timing import PhaseTimer

__all__ = ["PlaintextLinkage", "plaintext_linkage"]


@attrs.frozen(kw_only=True, eq=False)
class PlaintextLinkage:
    """The outcome of :func:`plaintext_linkage`.

    ``groups``: the candidate groups; ``matched``: bool per candidate group; ``links``:
    the records of the matched groups (``(m, n)`` int64, columns in ``parties`` order, as
    the protocol's ``links``); ``lmin`` used; ``blocks``: final blocks after the merge;
    ``skipped_blocks``: final blocks dropped by ``max_block_products``; ``assignment``:
    the encrypting party per LSH key; ``seconds``: wall seconds per phase (``lmin``,
    ``signatures``, ``merge``, ``groups``, ``assignment``, ``matching``, ``total``)."""

    parties: tuple[str, ...]
    groups: CandidateGroups
    matched: np.ndarray
    links: np.ndarray
    lmin: int
    blocks: int
    skipped_blocks: int
    assignment: EncryptorAssignment
    seconds: dict[str, float]


def plaintext_linkage(
    records: Mapping[str, EncodedRecords],
    *,
    secret: bytes,
    blocking: BlockingConfig | None = None,
    threshold: int = 3,
    rule: str = "star",
    lmin: int | None = None,
    assignment_method: str = "greedy",
    assignment_time_limit: float = 1.0,
    speeds: Mapping[str, float] | None = None,
    max_block_products: int | None = None,
    max_group_products: int | None = None,
    rng: RandomSource | None = None,
) -> PlaintextLinkage:
    """Link ``records`` (``{party: EncodedRecords}``, columns in mapping order) with the
    MP-SPPRL pipeline on plaintext filters (module docstring).

    ``lmin``: the common minimum suffix length (wins over ``blocking.lmin``; ``None`` and
    ``blocking.lmin is None``: the dispersion rule over all parties with ``rng``).
    ``threshold`` = ``T`` (a pair matches iff its Hamming distance is at most ``T``);
    ``rule``, ``assignment_method``, ``speeds``, ``max_*_products`` as in
    :class:`~privreg.plugins.pprl.protocol.PPRLProtocol`. Returns the linked groups and
    phase timings; nothing is encrypted and no privacy is claimed."""
    if not isinstance(records, Mapping) or len(records) < 2:
        raise PrivregTypeError("records must map at least 2 party names to EncodedRecords.")
    records = check_party_records(records)
    names = tuple(records)
    secret = check_secret(secret)
    cfg, window = check_blocking(blocking, len(names))
    threshold = v.check_int("threshold", threshold, minimum=0)
    rule = check_rule(rule)
    if assignment_method not in METHODS:
        raise PrivregValueError(f"assignment_method must be one of {METHODS}; got {assignment_method!r}.")
    if lmin is not None:
        lmin = v.check_int("lmin", lmin, minimum=0)
    rng = resolve_random(rng)
    parts = [records[p] for p in names]
    timer = PhaseTimer()  # wall seconds per phase

    if lmin is None:
        lmin = cfg.lmin if cfg.lmin is not None else choose_lmin(parts, config=cfg, secret=secret, rng=rng).lmin
    timer.lap("lmin")
    sigs = [party_signatures(r, config=cfg, secret=secret, lmin=lmin) for r in parts]
    timer.lap("signatures")
    blocks = sliding_window_merge(sigs, window=window)
    timer.lap("merge")
    groups = candidate_groups(
        blocks, parties=names, max_group_products=max_group_products, max_block_products=max_block_products
    )
    skipped = (
        0 if max_block_products is None else int(oversized_blocks(blocks, parties=names, limit=max_block_products).size)
    )
    timer.lap("groups")
    units = group_units(groups, blocks)
    assignment = assign_encryptors(
        groups, units, speeds=speeds, method=assignment_method, time_limit=assignment_time_limit
    )
    timer.lap("assignment")
    filters = {p: records[p].match_filters for p in names}
    matched = match_plaintext(
        groups, filters, threshold, rule=rule, encryptor=assignment.group_encryptors(units) if rule == "star" else None
    )
    timer.lap("matching")
    seconds = dict(timer.wall)
    seconds["total"] = timer.elapsed()
    return PlaintextLinkage(
        parties=names,
        groups=groups,
        matched=matched,
        links=np.asarray(groups.records[matched], dtype=np.int64),
        lmin=int(lmin),
        blocks=len(blocks),
        skipped_blocks=skipped,
        assignment=assignment,
        seconds=seconds,
    )
