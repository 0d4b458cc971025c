"""The values passed between the stages of MP-SPPRL (paper 004): encoded records, block
signatures, final blocks and candidate groups.

Arrays, not objects per record: every stage is vectorised. Record indices are positions in
a party's own record list; they are opaque to the other parties and to the linkage unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from privreg.core.errors import PrivregTypeError, PrivregValueError

__all__ = ["EncodedRecords", "Signatures", "FinalBlock", "CandidateGroups", "check_party_records"]


@attrs.frozen(kw_only=True, eq=False)
class EncodedRecords:
    """One party's records as Bloom filters.

    ``block_filters`` (m, L_b) and ``match_filters`` (m, L_m) are boolean arrays: ``bf``
    over the blocking fields and ``BF`` over the matching fields. ``ids`` are the party's
    own record identifiers (never sent). ``entities`` optionally holds ground-truth entity
    ids for evaluation only (never sent, never used by the protocol). ``exact_keys``
    (m, F) uint64, optional: keyed tokens of exact-value blocking passes (0 = the value is
    missing), see :func:`~privreg.plugins.pprl.clk.encode_clks`.
    """

    party: str
    ids: tuple[str, ...]
    block_filters: np.ndarray
    match_filters: np.ndarray
    entities: tuple[str, ...] | None = None
    exact_keys: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)


@attrs.frozen(kw_only=True, eq=False)
class Signatures:
    """A party's block signatures ``<record, LSH group, LSH key, suffix length, suffix>``.

    One row per (record, LSH group j, suffix length l); a block is the set of rows with
    equal ``(lsh_group, lsh_key, suffix_len, suffix)``. ``lsh_key`` is a keyed token of the
    K sampled bits (the linkage unit cannot invert it); ``suffix`` is the last ``l`` bits
    of ``bf`` after a secret mask shared by the parties (see ``blocking``), so the linkage
    unit sees order and common-prefix structure, not filter bits. ``suffix_len == 0``
    marks an LSH block without suffix blocking. All arrays have equal length.
    """

    party: str
    record: np.ndarray  # int64
    lsh_group: np.ndarray  # int64
    lsh_key: np.ndarray  # uint64
    suffix_len: np.ndarray  # int64
    suffix: np.ndarray  # uint64

    def __len__(self) -> int:
        return int(self.record.shape[0])


@attrs.frozen(kw_only=True, eq=False)
class FinalBlock:
    """A block the sliding-window merge accepted: it holds records of every party.

    ``members`` maps each party to the sorted, unique indices of its records in the block.
    """

    lsh_group: int
    lsh_key: int
    members: dict[str, np.ndarray]


@attrs.frozen(kw_only=True, eq=False)
class CandidateGroups:
    """Candidate groups: one record per party, in the column order of ``parties``.

    ``records`` is (g, n) int64; ``block`` (g,) gives, for each group, the index of the
    final block that produced it first (groups are unique across blocks).
    """

    parties: tuple[str, ...]
    records: np.ndarray
    block: np.ndarray

    def __len__(self) -> int:
        return int(self.records.shape[0])


def check_party_records(records: Any, names: tuple[str, ...] | None = None) -> dict[str, EncodedRecords]:
    """``records`` as ``{party: EncodedRecords}``, each encoded for the party it is filed
    under (and, given ``names``, every party one of them)."""
    if not isinstance(records, Mapping):
        raise PrivregTypeError(f"records must map party names to EncodedRecords; got {type(records).__name__}.")
    for p, rec in records.items():
        if names is not None and p not in names:
            raise PrivregValueError(f"records has party {p!r}, which is not one of {list(names)}.")
        if not isinstance(rec, EncodedRecords):
            raise PrivregTypeError(f"records[{p!r}] must be EncodedRecords; got {type(rec).__name__}.")
        if rec.party != p:
            raise PrivregValueError(
                f"records[{p!r}] holds the records of party {rec.party!r}; encode them with party={p!r}."
            )
    return dict(records)
