"""Keyed Hamming-LSH banding of CLKs and the candidate pairs it yields (recommended profile).

Each data party splits every CLK into ``J`` bands of ``K`` keyed random bit positions
(Indyk and Motwani 1998, bit sampling; positions from the shared secret, unknown to the
linkage unit) and sends, per record and band, a keyed 64-bit token of the band's bits
(``BLAKE2b(derive_key(secret, "clk-lsh/token"), band | K | bits)``). Two records of
different parties are a candidate pair when they share a token in some band: a pair at
Hamming distance ``d`` (filters of length ``L``) becomes a candidate with probability
``1 - (1 - C(L - d, K) / C(L, K))^J`` (:mod:`tuning`).

Choice of ``J``, ``K`` and the number of shared bands (:func:`recommended_bands`), without
labels: a pair is a candidate only when it shares at least **two** band keys (an AND over
two band collisions, which a near pair passes easily and a far pair almost never), with
``K = 16`` bits per band, and ``J`` is the smallest number of bands that gives a pair at
the *design distance* at least two shared keys with probability ``0.99`` (a binomial
tail). The design distance is the Hamming distance of two filters of the parties'
median popcount ``m`` at Dice ``0.85``, ``2 (1 - 0.85) m``: halfway between the match
threshold (0.75) and identity, so that the rare pairs near the threshold are still caught
most of the time and the bulk of the true pairs (much closer) almost surely. With
1,024-bit CLKs about 55 % full this gives ``J`` of 110-130. Fixed on the design data
(FEBRL 3 original-duplicate pairs and the synthetic generator, never FEBRL 4): against a
single shared key with ``K = 20`` (what :func:`~privreg.plugins.pprl.tuning.suggest_lsh`'s
work objective suggests, with ``J`` from the same rule) it keeps as many of the pairs
above the threshold (2,847 against 2,850 of about 2,946 on FEBRL 3) with a third of the
candidates (3,339 against 10,790 per 2,000 x 3,000 records; 8,362 against 38,770 per
5,000 x 5,000 synthetic records).

What the linkage unit learns from the tokens when it receives them (``clk-dice`` with
``blocking="linkage-unit"``; under ``"parties"`` only the data parties of a pair
exchange them, :mod:`party_blocking`): which records (of any parties, the same
party included) share a band key -- equality patterns of ``J K``-bit projections of the
CLKs -- and the number of records per party; not the bits. The number of keys two records
share estimates their Dice similarity (Spearman 0.97-0.98 on FEBRL 4: :mod:`leakage`,
``benchmarks/pprl_leakage.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import pandas as pd
from scipy.stats import binom

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.plugins.pprl.blocking import pack_bits, prf_words
from privreg.plugins.pprl.kdf import check_secret, derive_key
from privreg.plugins.pprl.tuning import key_probability

__all__ = [
    "BandConfig",
    "recommended_bands",
    "band_positions",
    "band_tokens",
    "candidate_pairs",
    "exact_pairs",
    "union_pairs",
    "DESIGN_DICE",
    "BAND_BITS",
    "MIN_SHARED",
    "TARGET_COLLISION",
    "BACKGROUND_CANDIDATES",
    "EXACT_PAIRS_PER_RECORD",
    "pair_orientation",
    "pair_roles",
]

#: Dice similarity whose pairs the bands catch with probability :data:`TARGET_COLLISION`.
DESIGN_DICE = 0.85
TARGET_COLLISION = 0.99
#: Expected non-matching candidates per record that the choice of ``K`` allows (model).
BACKGROUND_CANDIDATES = 0.02
BAND_BITS = 16
MIN_SHARED = 2
#: An exact pass counts while it yields at most this many pairs per record (:func:`exact_pairs`).
EXACT_PAIRS_PER_RECORD = 1.5  # the recommended rule: two shared band keys


@attrs.frozen(kw_only=True)
class BandConfig:
    """``bands`` (``J``) of ``bits`` (``K``) positions each; a pair is a candidate when it
    shares at least ``min_shared`` band keys; ``max_block_pairs`` skips a band key shared
    by so many records that it would yield more pairs (reported)."""

    bands: int = attrs.field()
    bits: int = attrs.field()
    min_shared: int = attrs.field(default=1)
    max_block_pairs: int = attrs.field(default=10_000)

    def __attrs_post_init__(self) -> None:
        J = v.check_int("bands", self.bands, minimum=1)
        K = v.check_int("bits", self.bits, minimum=1)
        v.check_int("max_block_pairs", self.max_block_pairs, minimum=1)
        if v.check_int("min_shared", self.min_shared, minimum=1) > J:
            raise PrivregValueError(f"min_shared={self.min_shared} exceeds bands={J}; lower it")
        if J > 1024 or K > 64:
            raise PrivregValueError(f"bands must be <= 1024 and bits <= 64; got bands={J}, bits={K}")


def recommended_bands(
    *,
    filter_length: int,
    popcount: float,
    records: int | None = None,
    bits: int | None = None,
    min_shared: int = MIN_SHARED,
) -> BandConfig:
    """The recommended ``(J, K)`` for filters of ``filter_length`` bits, median
    ``popcount`` and parties of up to ``records`` records (module docstring).

    ``J``: the smallest number of bands for which a pair at the design distance
    ``2 (1 - DESIGN_DICE) popcount`` shares at least ``min_shared`` band keys with
    probability :data:`TARGET_COLLISION` (bands independent: a binomial tail). ``K``
    (unless ``bits`` is given): the smallest ``K >= 16`` for which a record meets at most
    :data:`BACKGROUND_CANDIDATES` non-matching candidates of another party of ``records``
    records in expectation, under the independent-bits model at the background distance
    ``2 m (1 - m / L)`` of two random filters of popcount ``m`` (16 up to at least 10,000
    records, 19 at 100,000). Real records share bits, so the model undercounts (about
    30-fold on FEBRL); the rule only makes ``K`` grow with the data as it must."""
    L = v.check_int("filter_length", filter_length, minimum=1)
    m = v.check_real("popcount", popcount)
    if not 0 < m <= L:
        raise PrivregValueError(f"popcount must lie in (0, {L}]; got {m}: encode some records first")
    need = v.check_int("min_shared", min_shared, minimum=1)
    n = 1 if records is None else v.check_int("records", records, minimum=1)
    d = min(float(L), 2.0 * (1.0 - DESIGN_DICE) * m)
    background = 2.0 * m * (1.0 - m / L)
    choices = [v.check_int("bits", bits, minimum=1)] if bits is not None else list(range(BAND_BITS, 65))
    for K in choices:
        p1 = float(key_probability(d, filter_length=L, bits=K))
        if p1 <= 0.0:
            raise PrivregValueError(f"no band of {K} bits survives distance {d:.0f} of {L}; use fewer bits")
        J = need
        while J < 1024 and float(binom.sf(need - 1, J, p1)) < TARGET_COLLISION:
            J += 1
        p_bg = float(key_probability(background, filter_length=L, bits=K))
        if bits is not None or n * float(binom.sf(need - 1, J, p_bg)) <= BACKGROUND_CANDIDATES or J >= 1024:
            return BandConfig(bands=J, bits=K, min_shared=need)
    return BandConfig(bands=J, bits=K, min_shared=need)


def band_positions(config: BandConfig, *, filter_length: int, secret: bytes) -> np.ndarray:
    """(J, K) int64 keyed positions: for band ``j`` the ``K`` positions with the smallest
    scores ``BLAKE2b(derive_key(secret, "clk-lsh/positions"), j | p)``; sorted."""
    if not isinstance(config, BandConfig):
        raise PrivregTypeError(f"config must be a BandConfig; got {type(config).__name__}")
    L = v.check_int("filter_length", filter_length, minimum=1)
    if config.bits > L:
        raise PrivregValueError(f"bits K={config.bits} exceeds the filter length L={L}")
    key = derive_key(check_secret(secret), info="clk-lsh/positions")
    pos = np.arange(L, dtype=np.uint64)
    out = np.empty((config.bands, config.bits), dtype=np.int64)
    for j in range(config.bands):
        rows = np.stack([np.full(L, j, dtype=np.uint64), pos], axis=1)
        scores = prf_words(key, rows)
        out[j] = np.sort(np.lexsort((pos, scores))[: config.bits])
    return out


#: Band tokens computed at once by :func:`band_tokens` (bounds its temporaries).
TOKEN_CHUNK = 1 << 20


def band_tokens(filters: np.ndarray, *, config: BandConfig, secret: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(m, J) uint64 tokens of every record and band, and the positions used.

    Rows are records in order; column ``j`` is band ``j``."""
    f = np.asarray(filters)
    if f.ndim != 2 or f.dtype != bool:
        raise PrivregTypeError(f"filters must be a 2-d boolean array (records, L); got {f.dtype} {f.shape}")
    m, L = f.shape
    positions = band_positions(config, filter_length=L, secret=secret)
    if m == 0:
        return np.zeros((0, config.bands), dtype=np.uint64), positions
    J = config.bands
    key = derive_key(check_secret(secret), info="clk-lsh/token")
    tokens = np.empty((m, J), dtype=np.uint64)
    step = max(1, TOKEN_CHUNK // J)  # records per chunk: bounded temporaries (~340 B per token)
    for lo in range(0, m, step):
        keys = pack_bits(f[lo : lo + step, positions])  # (rows, J)
        k = keys.shape[0]
        band = np.broadcast_to(np.arange(J, dtype=np.uint64), (k, J)).reshape(-1)
        rows = np.stack([band, np.full(k * J, config.bits, dtype=np.uint64), keys.reshape(-1)], axis=1)
        tokens[lo : lo + k] = prf_words(key, rows).reshape(k, J)
    return tokens, positions


def candidate_pairs(
    a: np.ndarray,
    b: np.ndarray,
    *,
    max_block_pairs: int = 10_000,
    min_shared: int = 1,
    exact_a: np.ndarray | None = None,
    exact_b: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """Candidate pairs of two parties' (m, J) token matrices: ``(k, 2)`` int64 rows
    ``(record of a, record of b)``, unique, sorted; and the number of blocks skipped
    because they would yield more than ``max_block_pairs`` pairs.

    A pair is a candidate when it shares at least ``min_shared`` band tokens, or (with
    ``exact_a``/``exact_b``, (m, F) exact-pass tokens, 0 = missing) the same nonzero
    token in some exact pass."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise PrivregValueError(f"token matrices must be (records, bands) with equal bands; got {a.shape}, {b.shape}")
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int64), 0
    nb = b.shape[0]
    codes, shared, skipped = _joined(_flat(a), _flat(b), nb, max_block_pairs)
    kept = codes[shared >= min_shared]
    pairs = np.stack([kept // nb, kept % nb], axis=1)
    if exact_a is None or exact_b is None:
        return pairs, skipped
    if np.shape(exact_a)[0] != a.shape[0] or np.shape(exact_b)[0] != nb:
        raise PrivregValueError("exact tokens must have one row per record of each party")
    ex, sk = exact_pairs(exact_a, exact_b, max_block_pairs=max_block_pairs)
    return union_pairs(pairs, ex), skipped + sk


def exact_pairs(
    exact_a: np.ndarray,
    exact_b: np.ndarray,
    *,
    max_block_pairs: int = 10_000,
    max_pairs_per_record: float = EXACT_PAIRS_PER_RECORD,
) -> tuple[np.ndarray, int]:
    """Pairs sharing a nonzero token in some exact pass (``(m, F)`` uint64, 0 = missing):
    ``(k, 2)`` sorted unique rows and the number of blocks skipped (``max_block_pairs``).

    A pass counts only while it is a near-identifier at the parties' size: at most
    ``max_pairs_per_record`` pairs per record of the smaller party (a true match each,
    plus at most one background pair per two records). A frequency class such as a date
    of birth yields about ``m_a m_b / distinct`` pairs, which grows with the parties'
    size (on the synthetic generator: 1.04 per record at 1,000 records, 1.19 at 5,000,
    1.8 at 20,000, 5.0 at 100,000), so it is dropped once it no longer singles records
    out. The rule was set for scale after the evaluation; every 5,000-record evaluation
    keeps both passes (at most 1.19), so their figures are unchanged. The decision is a
    function of the tokens the linkage unit already holds."""
    ea = np.asarray(exact_a, dtype=np.uint64)
    eb = np.asarray(exact_b, dtype=np.uint64)
    if ea.ndim != 2 or eb.ndim != 2 or ea.shape[1] != eb.shape[1]:
        raise PrivregValueError(f"exact tokens must be (records, passes) for both parties; got {ea.shape}, {eb.shape}")
    cap = v.check_real("max_pairs_per_record", max_pairs_per_record)
    if not cap > 0:
        raise PrivregValueError(f"max_pairs_per_record must be positive; got {max_pairs_per_record!r}")
    nb = eb.shape[0]
    if ea.shape[0] == 0 or nb == 0 or ea.shape[1] == 0:
        return np.zeros((0, 2), dtype=np.int64), 0
    parts, skipped = [], 0
    for k in range(ea.shape[1]):
        fa, fb = _flat(ea[:, [k]]), _flat(eb[:, [k]])
        codes, _, sk = _joined(fa[fa["token"] != 0], fb[fb["token"] != 0], nb, max_block_pairs)
        skipped += sk
        if len(codes) <= cap * min(ea.shape[0], nb):
            parts.append(np.stack([codes // nb, codes % nb], axis=1))
    return union_pairs(*parts) if parts else np.zeros((0, 2), dtype=np.int64), skipped


def union_pairs(*parts: np.ndarray) -> np.ndarray:
    """The sorted union of ``(k, 2)`` pair arrays."""
    rows = np.concatenate([np.asarray(p, dtype=np.int64).reshape(-1, 2) for p in parts])
    return np.unique(rows, axis=0) if rows.size else np.zeros((0, 2), dtype=np.int64)


def _joined(fa: pd.DataFrame, fb: pd.DataFrame, nb: int, max_block_pairs: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Pair codes ``ra * nb + rb`` sharing a (band, token), how many they share, and the
    number of (band, token) blocks skipped for exceeding ``max_block_pairs``."""
    sizes = (
        fa.groupby(["band", "token"])
        .size()
        .rename("na")
        .to_frame()
        .join(fb.groupby(["band", "token"]).size().rename("nb"), how="inner")
    )
    big = sizes[sizes["na"] * sizes["nb"] > max_block_pairs]
    if len(big):
        drop = pd.MultiIndex.from_frame(big.reset_index()[["band", "token"]])
        fa = fa[~pd.MultiIndex.from_frame(fa[["band", "token"]]).isin(drop)]
    merged = fa.merge(fb, on=["band", "token"], suffixes=("_a", "_b"))
    codes = merged["record_a"].to_numpy(np.int64) * nb + merged["record_b"].to_numpy(np.int64)
    codes, shared = np.unique(codes, return_counts=True)
    return codes, shared, len(big)


def _flat(tokens: np.ndarray) -> pd.DataFrame:
    m, J = tokens.shape
    return pd.DataFrame(
        {
            "record": np.repeat(np.arange(m, dtype=np.int64), J),
            "band": np.tile(np.arange(J, dtype=np.int64), m),
            "token": tokens.reshape(-1),
        }
    )


def pair_roles(i: int, j: int) -> tuple[int, int]:
    """``(left, right)`` of the party pair ``i < j`` (clk-dice's roles): each party is left
    about half the time."""
    return (i, j) if (i + j) % 2 == 0 else (j, i)


def pair_orientation(parties: Sequence[str]) -> list[tuple[int, int]]:
    """Every unordered pair of party indices ``(i, j)``, ``i < j``, in canonical order."""
    n = len(parties)
    return [(i, j) for i in range(n) for j in range(i + 1, n)]
