"""Bounds on the linkage protocols' messages, per message kind, from the run's declared sizes.

A network transport refuses a peer's message above the bound of its kind from the frame
header, before reading the payload (:meth:`privreg.core.protocol.Protocol.message_bound`),
so what a party with a valid certificate can make another allocate is set by the sizes
every party declared in the run's options (record counts per party, filter bits, key
size), not by the deployment's maxima.

Sizes are bytes of the :mod:`privreg.mpc.wire` encoding. A ciphertext (below ``n^2``) takes
``c = ceil(2 key_bits / 8)`` bytes in a container's fixed-width blob; a container adds at
most ``H = 256 + 9 (key_bits / 8 + 8)`` bytes (tags, names, key id, a few integers below
the key's range); an int64 array entry takes 8 bytes. Every message adds :data:`OVERHEAD`
(1 KiB) for its dict keys, tags and lengths: the framing overhead, documented here.

MP-SPPRL (:class:`~privreg.plugins.pprl.protocol.PPRLProtocol`), ``n`` data parties,
``m_p`` the declared records of party ``p``, ``L`` the filter bits, ``J`` LSH groups,
``x`` suffixes, ``w`` the merge window, ``R`` filters per ciphertext unit (``"slots"``:
``(key_bits / 2 - 1) // s`` with ``s = 8 ceil((bits(L) + 1 + sigma) / 8)``; ``"bits"``: 1),
``U_p = min(m_p, ceil(m_p / R) + n + 1)`` units of ``p`` (one partial unit per encryption
batch: the first set and one per round), ``Q_p = 2 w (n + 1) m_p`` the pairs ``p``
compares in a round (an engineering bound: a run above it fails naming the message)::

    keys        LU -> p    3 key_bits / 8 + H
    dispersion  p -> LU    8 J m_p + O
    lmin        LU -> p    O
    signatures  p -> LU    40 J x m_p + O          (5 int64 fields per signature)
    groups      LU -> p    8 m_p + O
    requests-*  LU -> p    8 m_p + 8 (n - 1) U_p + 16 Q_p + n O
    encrypted-filters-*  e -> c    U_e (L c + 16) + H + O
    distances-* p -> LU    Q_p (c + 16) + n (H + O)
    result      LU -> p    16 m_p + O

clk-dice (:class:`~privreg.plugins.pprl.dice_protocol.DiceLinkageProtocol`): ``P_pq =
m_p m_q`` candidate pairs of parties ``p, q`` at most (dummy pairs of the membership
padding included: they are unique and distinct from the real ones; after blocking, the
dealt count, dummies included, replaces ``P_pq``), ``D_pq = min(P_pq, 16384)``
decisions per batch message, ``l`` the comparison bits, ``J`` the bands (given, else
1024), ``F`` the exact passes, ``d = ceil(key_bits / 8)`` bytes of a DGK ciphertext::

    keys / keys-dgk   LU -> p    3 key_bits / 8 + H  /  4 key_bits / 8 + H   ("dgk" only)
    popcount          p -> q     O
    tokens            p -> LU    8 (J + F) m_p + O
    deal              LU -> p    sum over q of (24 P_pq + O)
    masked(.k)        p -> q     (8 L + 8) min(m_p, P_pq, C) + O   (C = beaver.CHUNK_PAIRS pairs per chunk)
    shares-*          right -> left   D_pq c + H + O                          ("dgk" only, as the next three)
    cmp-*.masked      left -> LU      D_pq c + H + O
    cmp-*.bits        LU -> left      D_pq ceil(l / k) (2^k - 1) d + H + O   (k = threshold.DIGIT_BITS)
    cmp-*.terms       left -> LU      D_pq (ceil(l / k) d + 1) + H + O       (and a share byte per decision)
    cmp-*.triples     LU -> p         8 G W_pq + 32 + O      ("dealer" only, as the next two; G AND gates)
    cmp-*.open<r>     p -> q          8 (2 l + 1) W_pq + O   (round 0: l gates' d and e, the output mask)
    cmp-*.out         p -> LU         8 W_pq + O             (one output-share bit per decision)

(``"dealer"``: ``W_pq = ceil(D_pq / 64)`` words per wire of a batch, ``G`` the AND gates of
:func:`privreg.crypto.dealer_compare.and_counts` at ``l`` bits, at most ``4 l``.)
    refine            LU -> p    8 sum over q of P_pq + n O
    result            LU -> p    16 m_p + O

With ``blocking="parties"`` the tokens go peer to peer and the linkage unit never gets
them (its ``tokens`` bound is 0: refused); ``P_pq`` counts the pair's slots, ``E = 32``
bytes of a group element (:mod:`~privreg.plugins.pprl.oprf`), and::

    oprf-blinded      p -> LU    E (m_p (J + F) + 4 (n - 1)) + O   (4 check inputs per peer)
    oprf-evaluated    LU -> p    E (m_p (J + F) + 4 (n - 1)) + O
    pair-tokens       p -> q     8 (J + F) m_p + 32 + O     (and the pair's 32-byte check)
    candidates        p -> LU    256 n + O             (per peer: name, count, 32-byte digest)
    deal              LU -> p    sum over q of (8 P_pq + 512)   (w, a name, a role, a seed)
    masked            p -> q     (8 L + 8) min(P_pq, C) + O  (one masked CLK per slot, C per chunk)
    resolve           LU -> p    8 sum over q of P_pq + n O
    resolved          p -> LU    8 sum over q of P_pq + n O
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["OVERHEAD", "ciphertext_bytes", "container_bytes", "header_bytes", "public_key_bytes", "step_kind"]

#: Bytes every message bound adds for the message's dict keys, tags and lengths.
OVERHEAD = 1024


def ciphertext_bytes(key_bits: int) -> int:
    """Bytes of one Paillier ciphertext in a container (``ceil(2 key_bits / 8)``)."""
    return (2 * key_bits + 7) // 8


def header_bytes(key_bits: int) -> int:
    """A bound on everything of an encrypted container but its ciphertexts."""
    return 256 + 9 * (key_bits // 8 + 8)


def container_bytes(count: int, key_bits: int) -> int:
    """A bound on an encrypted container of ``count`` ciphertexts."""
    return count * ciphertext_bytes(key_bits) + header_bytes(key_bits)


def public_key_bytes(key_bits: int, *, integers: int = 3) -> int:
    """A bound on a public key of ``integers`` key-sized halves (``n`` and ``h < n^2``: 3)."""
    return integers * key_bits // 8 + header_bytes(key_bits)


def step_kind(step: str, prefixes: Mapping[str, str]) -> str:
    """The kind of ``step``: itself, or the kind of the first of ``prefixes`` it starts
    with (``{"requests-": "requests"}``); a step of no kind is returned unchanged."""
    for prefix, kind in prefixes.items():
        if step.startswith(prefix):
            return kind
    return step
