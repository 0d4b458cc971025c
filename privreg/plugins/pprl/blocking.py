"""Double blocking at each data party: Hamming LSH, then suffix blocking (paper 004, Sec. 4).

**LSH blocking** (Section 4.1). ``J`` groups ``H_j`` of ``K`` Hamming hash functions
``h_jk(bf) = bf[p_jk]``; a record's LSH key in group ``j`` is its ``K`` bits at positions
``p_j1 < ... < p_jK`` (first position = most significant bit), and records with equal
keys share an LSH block. The positions come from :func:`lsh_positions`: a keyed PRG
(BLAKE2b under a key derived from the shared secret) draws, for each group independently,
``K`` *distinct* positions uniformly from ``[0, L)``. Every data party gets the same
positions; the linkage unit, without the secret, does not know them. (The paper draws
each position uniformly, possibly repeating one within a group; distinct positions make
each of the ``K`` bits count. :mod:`tuning` gives the collision probability of both.)

**Suffix blocking** (Section 4.1). Each LSH block of group ``j`` is split by the value of
the record's suffix of length ``l`` for ``l = lmin, ..., lmin + x - 1``, so a record lies
in ``J x`` blocks. *Which bits*: the suffix of length ``l`` in group ``j`` is the last
``l`` positions of ``bf`` **that are not among group j's K LSH positions**, in increasing
position order, read as an ``l``-bit integer whose most significant bit is the lowest of
these positions (so sorting by value sorts the bit strings lexicographically, as the
paper's merge does). Within an LSH block the group's own LSH bits are constant, so the
paper's "last l bits of bf" would waste some of the ``l`` bits on them; set
``suffix_excludes_lsh=False`` for the paper's literal rule (then the suffix is exactly
positions ``L-l .. L-1``). ``lmin`` comes from the dispersion rule (:mod:`dispersion`)
unless given; ``lmin = 0`` means no suffix blocking (``suffix_len = 0`` rows).

**Privacy improvement over the paper.** The paper sends the linkage unit signatures
``<id, LSH-key, suffix>`` with the raw key bits and suffix bits, i.e. ``K + l`` bits of
every record's ``bf``. Here a party sends (:func:`party_signatures`):

* ``lsh_key`` = a keyed token, the first 8 bytes of ``BLAKE2b(k_tok, j | K | key bits)``
  with ``k_tok = derive_key(secret, "lsh/token")``: equal keys give equal tokens (so the
  linkage unit can still merge blocks with the same LSH key across parties), but the
  token reveals nothing about the bits (collisions of distinct keys: about
  ``(#keys)^2 / 2^65``, negligible);
* ``suffix`` XOR ``mask(j, key, l)``, the mask being the low ``l`` bits of
  ``BLAKE2b(k_mask, j | K | key bits | l)`` with ``k_mask = derive_key(secret,
  "suffix/mask")``. XOR with a fixed mask preserves the common-prefix length of any two
  suffixes of the same signature list (the bits where they differ do not change), so the
  prefix clusters of the sorted list -- the sets of suffixes sharing a prefix -- stay
  contiguous after sorting the masked values, and windows inside a cluster are the same
  as without masking. The order of the two halves of a cluster is swapped where the mask
  bit is 1, so a window straddling a cluster boundary may meet a different neighbouring
  cluster than without the mask (in the paper, which neighbour that is depends on the
  arbitrary keyed bit positions anyway).

What the linkage unit still learns: block sizes and membership (inherent to blocking),
which blocks of different parties share an LSH key, and, within one signature list, the
XOR of two suffixes (which of the ``l`` bits differ between two blocks) -- not the bits
themselves, nor any bit of a record outside a shared LSH key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import RandomSource, resolve_random
from privreg.plugins.pprl.dispersion import (
    DispersionConfig,
    block_entropies,
    dispersion_positions,
    lmin_from_dispersion,
    overall_dispersion,
    round_lmin,
)
from privreg.plugins.pprl.kdf import check_secret, derive_key
from privreg.plugins.pprl.records import EncodedRecords, Signatures

__all__ = [
    "BlockingConfig",
    "LminChoice",
    "check_blocking",
    "lmin_from_entropies",
    "paper_window",
    "lsh_positions",
    "pack_bits",
    "lsh_bit_keys",
    "suffix_positions",
    "plain_signatures",
    "protect_signatures",
    "party_dispersion",
    "choose_lmin",
    "party_signatures",
]

#: The paper's window sizes by number of parties (Section 5, Fig. 7).
_PAPER_WINDOWS = {3: 5, 5: 7, 7: 9, 9: 12}


def paper_window(parties: int) -> int:
    """The sliding-window size the paper uses for ``parties`` parties: 5, 7, 9, 12 for
    3, 5, 7, 9 parties (Fig. 7); otherwise ``n + 2`` (``n + 3`` from 9 on)."""
    n = v.check_int("parties", parties, minimum=2)
    return _PAPER_WINDOWS.get(n, n + 2 if n < 9 else n + 3)


def _int_range(name: str, lo: int, hi: int) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        x = v.check_int(name, value, minimum=lo)
        if x > hi:
            raise PrivregValueError(f"{name} must be <= {hi}; got {x}")

    return check


@attrs.frozen(kw_only=True)
class BlockingConfig:
    """Parameters of double blocking and the merge (paper 004, Sections 4-5).

    ``lsh_groups`` = ``J`` (paper 3), ``lsh_bits`` = ``K`` (paper 20, at most 64),
    ``lmin`` = minimum suffix length (``None``: from the dispersion rule; 0: no suffix
    blocking), ``suffix_count`` = ``x`` (paper 2), ``window`` = ``w`` of the merge
    (``None``: :func:`paper_window` of the number of parties), ``suffix_excludes_lsh``
    (see the module docstring), ``dispersion`` = the rule's parameters.

    The paper's ``J = 3, K = 20`` on 100-bit filters keeps only about three quarters of
    true pairs at FEBRL-level corruption; use :func:`tuning.suggest_lsh`.
    """

    lsh_groups: int = attrs.field(default=3, validator=_int_range("lsh_groups", 1, 256))
    lsh_bits: int = attrs.field(default=20, validator=_int_range("lsh_bits", 1, 64))
    lmin: int | None = attrs.field(default=None)
    suffix_count: int = attrs.field(default=2, validator=_int_range("suffix_count", 1, 16))
    window: int | None = attrs.field(default=None)
    suffix_excludes_lsh: bool = attrs.field(default=True)
    dispersion: DispersionConfig = attrs.field(factory=DispersionConfig)

    @lmin.validator
    def _lmin(self, attribute: Any, value: Any) -> None:
        if value is not None:
            x = v.check_int("lmin", value, minimum=0)
            if x > 64:
                raise PrivregValueError(f"lmin must be <= 64 (suffixes are 64-bit words); got {x}")

    @window.validator
    def _window(self, attribute: Any, value: Any) -> None:
        if value is not None:
            v.check_int("window", value, minimum=2)

    @suffix_excludes_lsh.validator
    def _excl(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, bool):
            raise PrivregTypeError(f"suffix_excludes_lsh must be true or false; got {value!r}")

    @dispersion.validator
    def _disp(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, DispersionConfig):
            raise PrivregTypeError(f"dispersion must be a DispersionConfig; got {value!r}")

    def max_suffix_length(self, filter_length: int) -> int:
        """The longest usable suffix for filters of ``filter_length`` bits."""
        usable = filter_length - (self.lsh_bits if self.suffix_excludes_lsh else 0)
        return min(64, usable)

    def max_lmin(self, filter_length: int) -> int:
        return self.max_suffix_length(filter_length) - self.suffix_count + 1

    def suffix_lengths(self, lmin: int, filter_length: int) -> tuple[int, ...]:
        """``(lmin, ..., lmin + x - 1)``, or ``(0,)`` for ``lmin = 0`` (no suffix blocking)."""
        lmin = v.check_int("lmin", lmin, minimum=0)
        if lmin == 0:
            return (0,)
        top = lmin + self.suffix_count - 1
        if top > self.max_suffix_length(filter_length):
            raise PrivregValueError(
                f"suffix lengths {lmin}..{top} exceed the longest usable suffix "
                f"{self.max_suffix_length(filter_length)} for L={filter_length}, K={self.lsh_bits}; "
                f"lower lmin or suffix_count"
            )
        return tuple(range(lmin, top + 1))

    def window_for(self, parties: int) -> int:
        return self.window if self.window is not None else paper_window(parties)


def check_blocking(blocking: Any, parties: int) -> tuple[BlockingConfig, int]:
    """``(config, merge window)`` for ``parties`` data parties (``None``: the paper's
    configuration); the window must hold one signature of every party."""
    cfg = BlockingConfig() if blocking is None else blocking
    if not isinstance(cfg, BlockingConfig):
        raise PrivregTypeError(f"blocking must be a BlockingConfig; got {type(cfg).__name__}.")
    window = cfg.window_for(parties)
    if window < parties:
        raise PrivregValueError(f"the merge window ({window}) must be at least the number of parties ({parties}).")
    return cfg, window


def _filters(records: Any) -> np.ndarray:
    if isinstance(records, EncodedRecords):
        f = records.block_filters
    else:
        f = records
    f = np.asarray(f)
    if f.ndim != 2 or f.dtype != bool:
        raise PrivregTypeError(f"filters must be a 2-d boolean array (records, L); got {f.dtype} {f.shape}")
    return f


def lsh_positions(config: BlockingConfig, *, filter_length: int, secret: bytes) -> np.ndarray:
    """(J, K) int64 LSH bit positions, sorted within each group: for group ``j`` the ``K``
    positions with the smallest keyed scores ``BLAKE2b(k_pos, j | p)`` (a keyed random
    ``K``-subset of ``[0, L)``; groups independent), ``k_pos = derive_key(secret,
    "lsh/positions")``. The same at every data party; unknown to the linkage unit."""
    if not isinstance(config, BlockingConfig):
        raise PrivregTypeError(f"config must be a BlockingConfig; got {config!r}")
    L = v.check_int("filter_length", filter_length, minimum=1)
    J, K = config.lsh_groups, config.lsh_bits
    if K > L:
        raise PrivregValueError(f"lsh_bits K={K} exceeds the filter length L={L}")
    key = derive_key(secret, info="lsh/positions")
    out = np.empty((J, K), dtype=np.int64)
    pos = np.arange(L)
    for j in range(J):
        scores = np.array(
            [
                int.from_bytes(
                    hashlib.blake2b(j.to_bytes(4, "big") + int(p).to_bytes(4, "big"), key=key, digest_size=8).digest(),
                    "big",
                )
                for p in pos
            ],
            dtype=np.uint64,
        )
        out[j] = np.sort(pos[np.lexsort((pos, scores))[:K]])
    return out


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """Rows of at most 64 bits as uint64 integers, first column most significant."""
    bits = np.asarray(bits, dtype=bool)
    width = bits.shape[-1]
    if width > 64:
        raise PrivregValueError(f"at most 64 bits fit a uint64; got {width}")
    if width == 0:
        return np.zeros(bits.shape[:-1], dtype=np.uint64)
    weights = np.left_shift(np.uint64(1), np.arange(width, dtype=np.uint64)[::-1])
    return (bits.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)


def lsh_bit_keys(filters: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(m, J) uint64: the raw LSH key of each record in each group (bits of
    ``filters[:, positions[j]]`` packed, first position most significant)."""
    f = _filters(filters)
    positions = np.asarray(positions, dtype=np.int64)
    return pack_bits(f[:, positions])  # (m, J, K) -> (m, J)


def suffix_positions(positions: np.ndarray, *, filter_length: int, length: int, exclude_lsh: bool = True) -> np.ndarray:
    """(J, length) int64: the positions of the suffix of ``length`` bits in each group,
    increasing (see the module docstring)."""
    positions = np.asarray(positions, dtype=np.int64)
    L = v.check_int("filter_length", filter_length, minimum=1)
    length = v.check_int("length", length, minimum=0)
    out = np.empty((positions.shape[0], length), dtype=np.int64)
    for j, group in enumerate(positions):
        allowed = np.setdiff1d(np.arange(L), group) if exclude_lsh else np.arange(L)
        if allowed.size < length:
            raise PrivregValueError(f"suffix length {length} exceeds the {allowed.size} usable positions")
        out[j] = allowed[allowed.size - length :]
    return out


def plain_signatures(
    records: EncodedRecords, *, positions: np.ndarray, suffix_lengths: Sequence[int], exclude_lsh: bool = True
) -> Signatures:
    """The paper's signatures: raw LSH key bits and raw suffix bits (no tokens, no masks).

    One row per (record, group j, suffix length l), ordered by group, then length, then
    record. For tests and ablations; :func:`party_signatures` sends protected ones."""
    if not isinstance(records, EncodedRecords):
        raise PrivregTypeError(f"records must be EncodedRecords; got {type(records).__name__}")
    f = _filters(records)
    m, L = f.shape
    positions = np.asarray(positions, dtype=np.int64)
    J = positions.shape[0]
    lengths = tuple(v.check_int("suffix length", x, minimum=0) for x in suffix_lengths)
    if not lengths:
        raise PrivregValueError("suffix_lengths must hold at least one length (0 = no suffix blocking)")
    keys = lsh_bit_keys(f, positions)  # (m, J)
    rec, grp, key, slen, suf = [], [], [], [], []
    for j in range(J):
        for length in lengths:
            sp = suffix_positions(positions[j : j + 1], filter_length=L, length=length, exclude_lsh=exclude_lsh)[0]
            rec.append(np.arange(m, dtype=np.int64))
            grp.append(np.full(m, j, dtype=np.int64))
            key.append(keys[:, j])
            slen.append(np.full(m, length, dtype=np.int64))
            suf.append(pack_bits(f[:, sp]))
    return Signatures(
        party=records.party,
        record=np.concatenate(rec),
        lsh_group=np.concatenate(grp),
        lsh_key=np.concatenate(key).astype(np.uint64),
        suffix_len=np.concatenate(slen),
        suffix=np.concatenate(suf).astype(np.uint64),
    )


def prf_words(key: bytes, rows: np.ndarray) -> np.ndarray:
    """One keyed 64-bit word per row of the uint64 matrix ``rows``: the first 8 bytes of
    ``BLAKE2b(key, row as big-endian words)``, computed once per distinct row."""
    rows = np.ascontiguousarray(rows, dtype=np.uint64)
    order = np.lexsort(rows.T[::-1])
    srt = rows[order]
    new = np.r_[True, np.any(srt[1:] != srt[:-1], axis=1)]
    uniq = srt[new]
    inverse = np.empty(rows.shape[0], dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    buf = memoryview(uniq.astype(">u8").tobytes())
    width = 8 * rows.shape[1]
    digests = b"".join(
        hashlib.blake2b(buf[i : i + width], key=key, digest_size=8).digest() for i in range(0, len(buf), width)
    )
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)[inverse]


def protect_signatures(plain: Signatures, *, secret: bytes, lsh_bits: int) -> Signatures:
    """Tokenise the LSH keys and XOR-mask the suffixes of ``plain`` (module docstring)."""
    secret = check_secret(secret)
    K = np.uint64(v.check_int("lsh_bits", lsh_bits, minimum=1))
    if len(plain) == 0:
        return plain
    g = plain.lsh_group.astype(np.uint64)
    k = plain.lsh_key.astype(np.uint64)
    ln = plain.suffix_len.astype(np.uint64)
    token = prf_words(derive_key(secret, info="lsh/token"), np.stack([g, np.full_like(g, K), k], axis=1))
    mask = prf_words(derive_key(secret, info="suffix/mask"), np.stack([g, np.full_like(g, K), k, ln], axis=1))
    low = np.where(ln >= 64, np.uint64(2**64 - 1), np.left_shift(np.uint64(1), np.minimum(ln, 63)) - np.uint64(1))
    return Signatures(
        party=plain.party,
        record=plain.record,
        lsh_group=plain.lsh_group,
        lsh_key=token,
        suffix_len=plain.suffix_len,
        suffix=plain.suffix ^ (mask & low),
    )


def party_dispersion(
    records: EncodedRecords, *, config: BlockingConfig, secret: bytes, rng: RandomSource | None = None
) -> np.ndarray:
    """This party's single-block dispersions (Section 4.2.2, formula (1)) of its LSH
    blocks: what the party sends for the overall dispersion."""
    f = _filters(records)
    L = f.shape[1]
    pos = lsh_positions(config, filter_length=L, secret=secret)
    mpos = dispersion_positions(pos, filter_length=L, count=config.dispersion.positions, secret=secret)
    return block_entropies(f, lsh_bit_keys(f, pos), positions=mpos, config=config.dispersion, rng=resolve_random(rng))


@attrs.frozen(kw_only=True)
class LminChoice:
    """The outcome of the dispersion rule: overall dispersion ``hs`` (``None`` when no
    block had more than ``X`` records), the unrounded formula-(3) value ``raw`` (``None``
    when suffix blocking is skipped) and the ``lmin`` to use (0 = skip)."""

    hs: float | None
    raw: float | None
    lmin: int
    sampled_blocks: int


def choose_lmin(
    parties: Sequence[EncodedRecords], *, config: BlockingConfig, secret: bytes, rng: RandomSource | None = None
) -> LminChoice:
    """The common ``lmin`` of all parties by the dispersion rule (Section 4.2.2): every
    party computes its single-block dispersions, the mean over all of them is ``Hs``
    (formula (2)), then formula (3), :func:`dispersion.round_lmin` with the largest
    usable value. No eligible block anywhere means LSH blocks are already small: suffix
    blocking is skipped (``lmin = 0``).

    In a deployment each party computes its dispersions locally and sends only these
    ``N`` numbers (entropies of ``m``-bit patterns of sampled blocks) to the party that
    averages them; they reveal how varied its blocks are, not which records they hold."""
    rng = resolve_random(rng)
    if isinstance(parties, EncodedRecords) or not parties:
        raise PrivregTypeError("parties must be a non-empty sequence of EncodedRecords (one per party)")
    L = {p.block_filters.shape[1] for p in parties}
    if len(L) != 1:
        raise PrivregValueError(f"all parties must use the same bf length; got {sorted(L)}")
    per = [party_dispersion(p, config=config, secret=secret, rng=rng) for p in parties]
    return lmin_from_entropies(per, config=config, filter_length=L.pop())


def lmin_from_entropies(per: Sequence[np.ndarray], *, config: BlockingConfig, filter_length: int) -> LminChoice:
    """The common ``lmin`` from every party's single-block dispersions (what the parties
    send): ``Hs`` by formula (2), then formula (3) rounded by :func:`dispersion.round_lmin`
    below the largest usable value for filters of ``filter_length`` bits."""
    hs = overall_dispersion(per)
    d = config.dispersion
    raw = None if hs is None else lmin_from_dispersion(hs, theta=d.theta, ht=d.ht, lt=d.lt)
    lmin = round_lmin(raw, maximum=config.max_lmin(filter_length))
    return LminChoice(hs=hs, raw=raw, lmin=lmin, sampled_blocks=int(sum(x.size for x in per)))


def party_signatures(
    records: EncodedRecords,
    *,
    config: BlockingConfig,
    secret: bytes,
    lmin: int | None = None,
    rng: RandomSource | None = None,
    protect: bool = True,
) -> Signatures:
    """One party's block signatures after double blocking (LSH, then suffix blocking).

    ``lmin``: explicit minimum suffix length (wins over ``config.lmin``); when both are
    ``None`` the dispersion rule is applied to *this party's* blocks only (sampling with
    ``rng``). All parties must use the same ``lmin``: in a multi-party run call
    :func:`choose_lmin` once and pass its ``lmin`` (or set ``config.lmin``);
    :func:`merge.sliding_window_merge` refuses signatures with different suffix lengths.
    ``protect=False`` returns the paper's raw signatures (tests and ablations only)."""
    if not isinstance(records, EncodedRecords):
        raise PrivregTypeError(f"records must be EncodedRecords; got {type(records).__name__}")
    if not isinstance(config, BlockingConfig):
        raise PrivregTypeError(f"config must be a BlockingConfig; got {config!r}")
    secret = check_secret(secret)
    f = _filters(records)
    L = f.shape[1]
    if lmin is None:
        lmin = config.lmin
    if lmin is None:
        lmin = choose_lmin([records], config=config, secret=secret, rng=rng).lmin
    lengths = config.suffix_lengths(lmin, L)
    pos = lsh_positions(config, filter_length=L, secret=secret)
    plain = plain_signatures(records, positions=pos, suffix_lengths=lengths, exclude_lsh=config.suffix_excludes_lsh)
    return protect_signatures(plain, secret=secret, lsh_bits=config.lsh_bits) if protect else plain
