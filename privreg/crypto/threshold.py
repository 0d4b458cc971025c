"""Secure threshold decisions ``[x >= c]`` on packed Paillier ciphertexts, with DGK.

Setting (record linkage): the *holder* has Paillier ciphertexts under the *key holder's*
key, each an encryption of ``sum_r x_r 2^(r s)`` with every ``x_r`` in ``[0, 2^l)`` (``l =
bits``, ``s`` = the slot width of :func:`slot_layout`). For the requested slots ``wanted``
(public to both) the key holder must learn exactly the bits ``[x >= c]`` for a public
threshold ``c`` in ``[0, 2^l]``, and the holder nothing. :func:`threshold_holder` and
:func:`threshold_keyholder` are the two roles, for a whole batch in three messages.

Protocol (``sigma`` the statistical parameter, 40 by default):

1. ``<step>.masked``, holder to key holder. Every slot of every ciphertext holding a wanted
   slot gets a mask ``rho_r`` uniform in ``[0, 2^(l + sigma))`` (homomorphically, one
   multiplication by ``1 + M n``), then the ciphertexts are re-randomised
   (:func:`~privreg.crypto.channel.send_encrypted`). Ciphertexts without a wanted slot
   are not sent. The key holder decrypts ``z_r = x_r + rho_r``: it is within statistical
   distance ``|x - x'| / 2^(l + sigma) < 2^-sigma`` of independent of ``x_r``, unwanted
   slots included, and since ``s >= l + sigma + 1`` nothing carries between slots.
2. With ``w = x - c + 2^l`` in ``[0, 2^(l+1))``, ``[x >= c]`` is bit ``l`` of ``w``. The key
   holder knows ``d = z - c + 2^l = w + rho``; as in :mod:`privreg.crypto.compare`'s
   encrypted sign, ``[x >= c] = d_l XOR rho_l XOR [alpha < beta]`` with ``alpha = d mod
   2^l`` (key holder) and ``beta = rho mod 2^l`` (holder), the last term from a DGK
   comparison (Damgard, Geisler and Kroigaard, ACISP 2007 and the IJACT 2009 correction),
   run with the DGK cryptosystem (:mod:`privreg.crypto.dgk`).
3. ``<step>.bits``, key holder to holder. The DGK comparison here works on digits of
   ``k`` bits (``k = 3``; the top digit takes the remainder: ``l = 14`` gives digits of
   3, 3, 3, 3 and 2 bits): for each digit ``alpha_i`` the key holder sends the
   *thermometer* ``E[alpha_i >= v]`` for ``v = 1 .. 2^k - 1`` under its DGK key, encrypted
   by the CRT (31 ciphertexts per decision at ``l = 14``).
4. ``<step>.terms``, holder to key holder. The holder draws ``s`` in ``{+1, -1}`` and, for
   each digit ``i``, computes homomorphically ``c_i = X_i + sum_{j > i} [alpha_j != beta_j]``
   (``[alpha_j != beta_j] = 1 - T_j[beta_j] + T_j[beta_j + 1]`` from the thermometer
   ``T_j``, with ``T[0] = 1`` and ``T[2^k] = 0``) where, for ``s = +1``,
   ``X_i = [alpha_i >= beta_i]``, and for ``s = -1``, ``X_i = [alpha_i <= beta_i]`` on the
   digits above the lowest and ``X_0 = [alpha_0 < beta_0]``. Every part is 0 or 1, so
   ``c_i`` lies in ``[0, D]`` (``D`` digits, ``u > D``) and is 0 exactly when digit ``i`` is
   the first (from the top) where the values differ and there ``alpha_i < beta_i``
   (``s = +1``) or ``alpha_i > beta_i`` (``s = -1``), or, for ``s = -1`` and the lowest
   digit, when all higher digits are equal and ``alpha_0 >= beta_0``. So some ``c_i`` is
   0 iff ``alpha < beta`` (``s = +1``) or ``alpha >= beta`` (``s = -1``), and at most one
   is. The extra term of the paper's correction for equal values is not needed: the
   ``s = -1`` form counts equality in. The holder blinds each term by an exponent uniform
   in ``[1, u)`` (``c_i r_i``: 0 or uniform in ``Z_u^*``), shuffles the ``D`` terms of each
   comparison, re-randomises each with ``h^r`` (``r`` of ``2.5 t`` bits) and sends them
   with its share bit ``rho_l XOR [s = -1]``.
5. The key holder zero-tests the terms (``c^vp mod p = 1``, exact): ``delta = 1`` iff one
   is 0, which is ``[alpha < beta] XOR [s = -1]``; the decision is ``d_l XOR delta XOR
   share``.

What each party learns (semi-honest parties): the key holder learns the decisions and,
per wanted slot, ``z`` (within ``2^-sigma`` of independent of ``x``), per masked unwanted
slot the same, a uniformly random ``delta``, a share bit that is ``delta`` XOR the
decision XOR ``d_l``, and ``D`` shuffled DGK plaintexts that are 0 (at most one, at a
uniformly random position) or uniform in ``Z_u^*``, with randomness within ``2^-(t/2)``
of uniform in ``<h>``: its whole view is simulated from the decisions. The holder sees
only ciphertexts under the key holder's Paillier and DGK keys: it learns nothing. Public:
``bits``, ``threshold``, ``sigma``, ``wanted``, the number of ciphertexts and the keys.

Decryption choice (measured, ``benchmarks/threshold.py``): slots fill the key's whole
signed plaintext range (``|n| - 3`` bits: 37 slots of 55 bits at 2048 bits, ``l = 14``) and
the key holder decrypts fully by the CRT (two exponentiations modulo ``p^2`` and ``q^2``,
about 2.5 ms per ciphertext at 2048 bits, 0.07 ms per slot). Decrypting modulo one prime
(one exponentiation) would need plaintexts below ``2^(|n|/2 - 1)``, 18 slots, the same
cost per slot, twice the ciphertexts for the holder to mask and re-randomise, and twice
the ciphertexts upstream; it is only cheaper per decision when at most a few slots of
each ciphertext are wanted (a ciphertext is then decrypted for a few decisions either
way: 2.5 ms against 1.3 ms).

Cost per decision (2048-bit Paillier and DGK keys, ``t = 160``, ``l = 14``, dense slots,
one core; ``benchmarks/threshold.py`` on the shared 2-core machine): about 1.95 ms of CPU
in all, 1.3 ms at the key holder (31 CRT DGK encryptions of about 30 us, 5 zero tests of
about 63 us, 1/37 of a 2.6 ms Paillier decryption) and 0.65 ms at the holder (5 terms of
about 125 us: an 88 us table lookup for ``h^r``, an 8-bit blinding exponentiation, a few
multiplications and a shared inversion; 1/37 of a masking and DJN re-randomisation). The
DGK-over-Paillier sign test of :mod:`privreg.crypto.compare` costs about 190 ms per
decision on the same keys. Messages: the thermometers are ``31 |n| / 8`` bytes (8 KB) per
decision, the terms ``5 |n| / 8`` (1.3 KB), the masked ciphertexts ``|n| / 4`` bytes each.
Heavy loops (decryption, DGK encryption, the terms, the zero tests, re-randomisation)
spread over cores with :mod:`privreg.crypto.parallel`; randomness is drawn in this process.
Everything but the decryption, the zero tests and a few multiplications per term is
independent of the data (the uniform elements of ``<h>`` of both parties), so it could be
computed ahead of time; this module does not.

Assumptions: Paillier's semantic security (DCR, plus the DJN short-exponent assumption
for the holder's default DJN re-randomisation of the masked ciphertexts), the DGK
subgroup assumption for the DGK ciphertexts (with ``t = 160`` about 80-bit security
against the Coron-Joux-Mandal-Naccache-Tibouchi attack, see :mod:`privreg.crypto.dgk`),
and the statistical masks (``2^-sigma`` per slot, ``2^-(t/2)`` per re-randomised term).

Caveats: semi-honest parties only. A malicious holder can send anything in place of
the masked ciphertexts and the terms, and so make the key holder output any decisions it
likes (for example all true, or the decision for another threshold); it learns nothing
more itself. The key holder checks what it can (every slot in range, lengths, types, bits
0 or 1, ciphertexts in range), which catches malformed messages but not a well-formed
lie. A malicious key holder could send DGK "bits" that are not 0/1 or a DGK key whose
``vp, vq`` are longer than its ``t`` (so that ``2.5 t``-bit re-randomisers no longer
hide the terms); the holder cannot check that, and the protocol then gives no
guarantee. Inputs outside ``[0, 2^l)`` give wrong decisions or, when a slot leaves its
range, a ProtocolError at the key holder. Nothing is constant time: the holder's time to
build the terms depends slightly on its mask digits (trivial thermometer ends cost fewer
multiplications), and timing side channels on either machine are out of scope. Over a
network, message sizes reveal the public batch dimensions only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import gmpy2
import numpy as np
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import parallel
from privreg.crypto.channel import recv_encrypted, send_encrypted
from privreg.crypto.dgk import (
    DgkCiphertexts,
    DgkPrivateKey,
    DgkPublicKey,
    power_table,
    random_bits,
    uniform_below,
)
from privreg.crypto.errors import PlaintextOverflowError, WrongKeyError
from privreg.crypto.keys import PaillierPrivateKey, PaillierPublicKey
from privreg.crypto.obfuscation import fixed_base_table
from privreg.crypto.vector import vector_from_ciphertexts
from privreg.mpc.transport import STEP_MAX_CHARS, is_step

__all__ = ["DEFAULT_SIGMA", "DIGIT_BITS", "slot_layout", "threshold_holder", "threshold_keyholder"]

#: Statistical security parameter of the slot masks.
DEFAULT_SIGMA = 40
#: Bits per digit of the DGK comparison (the top digit takes the remainder). A digit costs
#: ``2^k - 1`` key-holder encryptions (its thermometer) and one term (a holder
#: re-randomisation and a key-holder zero test, about 6 encryptions' worth); measured total
#: CPU per decision at 2048 bits, ``l = 14``: 3.1 ms (``k = 1``, the paper's bitwise form),
#: 2.06 (``k = 2``), 1.94 (``k = 3``), 2.27 (``k = 4``).
DIGIT_BITS = 3
_SUFFIXES = ("masked", "bits", "terms")


class _Steps(NamedTuple):
    masked: str
    bits: str
    terms: str


def _check_step(step: Any) -> _Steps:
    longest = max(len(s) for s in _SUFFIXES) + 1
    if not isinstance(step, str) or len(step) > STEP_MAX_CHARS - longest or not is_step(step):
        raise PrivregValueError(
            f"step must be a name of 1 to {STEP_MAX_CHARS - longest} ASCII letters, digits, '-', '_', '.', '[' or "
            f"']' (the messages are '<step>.masked', '<step>.bits' and '<step>.terms'); got {step!r:.80}."
        )
    return _Steps(*(f"{step}.{s}" for s in _SUFFIXES))


def _check_sizes(bits: Any, sigma: Any, threshold: Any = None) -> tuple[int, int, int]:
    bits = v.check_int("bits", bits, minimum=1)
    sigma = v.check_int("sigma", sigma, minimum=1)
    if threshold is None:
        return bits, sigma, 0
    c = v.check_int("threshold", threshold)
    if not 0 <= c <= 1 << bits:
        raise PrivregValueError(
            f"threshold must lie in [0, 2^bits] = [0, {1 << bits}] for bits={bits}; got {c}. The decisions are "
            f"[x >= threshold] for x in [0, 2^bits)."
        )
    return bits, sigma, c


def _capacity(public_key: PaillierPublicKey) -> int:
    """Bits of a packed plaintext: the largest ``k`` with ``2^k - 1 <= max_int``."""
    return int(public_key.max_int + 1).bit_length() - 1


def slot_layout(public_key: PaillierPublicKey, *, bits: int, sigma: int = DEFAULT_SIGMA) -> tuple[int, int]:
    """``(slot_bits, slots_per_ciphertext)`` for values of ``bits`` bits under ``public_key``.

    ``slot_bits = bits + sigma + 1``: a slot holds ``x + rho`` with ``x < 2^bits`` and the
    mask ``rho < 2^(bits + sigma)`` without carrying into the next. The slots fill the key's
    signed plaintext range (``2^(slots * slot_bits) - 1 <= max_int``, about ``|n| - 3``
    bits), and the key holder decrypts fully by the CRT (see the module docstring for why
    not modulo one prime): 37 slots at 2048 bits with ``bits=14, sigma=40``. The holder's
    ciphertexts encrypt ``sum_r x_r 2^(r * slot_bits)`` for ``r < slots_per_ciphertext``.
    """
    if not isinstance(public_key, PaillierPublicKey):
        raise PrivregTypeError(f"public_key must be a PaillierPublicKey; got {type(public_key).__name__}.")
    bits, sigma, _ = _check_sizes(bits, sigma)
    slot_bits = bits + sigma + 1
    per = _capacity(public_key) // slot_bits
    if per < 1:
        raise PlaintextOverflowError(
            f"a slot of {slot_bits} bits (bits={bits}, sigma={sigma}) does not fit the {public_key.n_bits}-bit key's "
            f"{_capacity(public_key)}-bit plaintext range; use a larger key or smaller bits/sigma"
        )
    return slot_bits, per


def _digit_sizes(bits: int) -> list[int]:
    """Digit widths from the lowest digit up: ``DIGIT_BITS`` each, the top one the remainder."""
    full, rest = divmod(bits, DIGIT_BITS)
    return [DIGIT_BITS] * full + ([rest] if rest else [])


def _thermometer_offsets(sizes: Sequence[int]) -> list[int]:
    """Where the thermometer of each digit starts in one comparison's ciphertexts (the
    last entry is the total: ``sum 2^k - 1``)."""
    out = [0]
    for k in sizes:
        out.append(out[-1] + (1 << k) - 1)
    return out


def _digits(x: int, sizes: Sequence[int]) -> list[int]:
    out, shift = [], 0
    for k in sizes:
        out.append((x >> shift) & ((1 << k) - 1))
        shift += k
    return out


def _check_dgk_capacity(name: str, dgk: DgkPublicKey, sizes: Sequence[int], bits: int) -> None:
    if dgk.u <= len(sizes):
        raise PrivregValueError(
            f"{name} has plaintext modulus u={dgk.u}, too small for bits={bits} ({len(sizes)} digits: terms up to "
            f"{len(sizes)}); generate the DGK key with comparison_bits >= {bits}."
        )


def _check_wanted(wanted: Any, count: int, per: int) -> list[tuple[int, int]]:
    """``wanted`` as a list of ``(ciphertext, slot)`` pairs, strictly increasing, in range."""
    if isinstance(wanted, (str, bytes)) or not hasattr(wanted, "__iter__"):
        raise PrivregTypeError(
            f"wanted must be a sequence of (ciphertext index, slot index) pairs; got {wanted!r:.80}."
        )
    pairs: list[tuple[int, int]] = []
    for k, item in enumerate(wanted):
        if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 2:
            raise PrivregTypeError(f"wanted[{k}] must be a (ciphertext index, slot index) pair; got {item!r:.80}.")
        ct, slot = v.check_int(f"wanted[{k}][0]", item[0]), v.check_int(f"wanted[{k}][1]", item[1])
        if not 0 <= ct < count or not 0 <= slot < per:
            raise PrivregValueError(
                f"wanted[{k}] = ({ct}, {slot}) is out of range: ciphertext indices lie in [0, {count}) and slot "
                f"indices in [0, {per}) (slot_layout)."
            )
        if pairs and (ct, slot) <= pairs[-1]:
            raise PrivregValueError(
                f"wanted must be sorted (by ciphertext, then slot) and distinct; wanted[{k}] = ({ct}, {slot}) follows "
                f"{pairs[-1]}. Pass sorted(set(wanted))."
            )
        pairs.append((ct, slot))
    return pairs


def _check_ciphertexts(ciphertexts: Any, public_key: PaillierPublicKey) -> list[mpz]:
    if isinstance(ciphertexts, (str, bytes)) or not hasattr(ciphertexts, "__iter__"):
        raise PrivregTypeError(
            f"ciphertexts must be a sequence of Paillier ciphertexts (integers); got {ciphertexts!r:.80}."
        )
    n2 = public_key.n2
    out = []
    for k, c in enumerate(ciphertexts):
        if isinstance(c, bool) or not isinstance(c, (int, np.integer, type(mpz(0)))):
            raise PrivregTypeError(
                f"ciphertexts[{k}] must be an integer (a raw Paillier ciphertext); got {type(c).__name__}."
            )
        x = mpz(int(c))
        if not 0 < x < n2:
            raise PrivregValueError(
                f"ciphertexts[{k}] must lie in (0, n^2) of public_key; it does not (not shown). Pass the raw "
                f"ciphertexts under public_key (EncryptedVector.ciphertexts)."
            )
        out.append(x)
    return out


# ------------------------------------------------------------------ the holder's terms (worker processes)


def _invert_all(xs: Sequence[mpz], n: mpz) -> list[mpz]:
    """The inverses of ``xs`` modulo ``n`` with one inversion (Montgomery's trick);
    ZeroDivisionError if one is not a unit."""
    if not xs:
        return []
    prefix, acc = [], mpz(1)
    for x in xs:
        acc = acc * x % n
        prefix.append(acc)
    inv = gmpy2.invert(acc, n)
    out = [mpz(0)] * len(xs)
    for i in range(len(xs) - 1, 0, -1):
        out[i] = inv * prefix[i - 1] % n
        inv = inv * xs[i] % n
    out[0] = inv
    return out


def _mul(a: mpz | None, b: mpz, n: mpz) -> mpz:
    return b if a is None else a * b % n


def _terms_chunk(
    n: int,
    g: int,
    h: int,
    u: int,
    r_bits: int,
    sizes: Sequence[int],
    groups: Sequence[tuple[Sequence[mpz], Sequence[int], int, Sequence[int], Sequence[int]]],
) -> list[mpz]:
    """The blinded, re-randomised DGK terms of each comparison, lowest digit first.

    A group is (thermometer ciphertexts, beta's digits, minus = [s = -1], blinding exponents,
    re-randomisation exponents). Each term is kept as ``g^kappa * P / N`` (``P``, ``N``
    products of thermometer ciphertexts, None for 1); the ``N`` are inverted together."""
    nn = mpz(n)
    table, gpow = fixed_base_table(h, n, r_bits), power_table(g, n, u)
    offs = _thermometer_offsets(sizes)
    forms: list[tuple[int, mpz | None, mpz | None]] = []
    for cts, betas, minus, _, _ in groups:
        p_run: mpz | None = None  # sum over higher digits of [alpha_j != beta_j], as g^kappa P / N
        n_run: mpz | None = None
        kappa = 0
        group: list[tuple[int, mpz | None, mpz | None]] = []
        for i in range(len(sizes) - 1, -1, -1):
            top, b, o = 1 << sizes[i], betas[i], offs[i] - 1  # T_i[v] = cts[o + v] for 0 < v < top
            xk, pi, ni = 0, p_run, n_run
            if not minus:  # X = [alpha_i >= b] = T[b]
                if b == 0:
                    xk = 1
                else:
                    pi = _mul(p_run, cts[o + b], nn)
            elif i:  # X = [alpha_i <= b] = 1 - T[b + 1]
                xk = 1
                if b + 1 < top:
                    ni = _mul(n_run, cts[o + b + 1], nn)
            elif b:  # lowest digit: X = [alpha_0 < b] = 1 - T[b]
                xk = 1
                ni = _mul(n_run, cts[o + b], nn)
            group.append((kappa + xk, pi, ni))
            if i:  # add [alpha_i != b] = 1 - T[b] + T[b + 1]
                if b:
                    kappa += 1
                    n_run = _mul(n_run, cts[o + b], nn)
                if b + 1 < top:
                    p_run = _mul(p_run, cts[o + b + 1], nn)
        forms.extend(reversed(group))
    invs = iter(_invert_all([ni for _, _, ni in forms if ni is not None], nn))
    out = []
    blinds = (r for _, _, _, rs, _ in groups for r in rs)
    rerands = (a for _, _, _, _, es in groups for a in es)
    for (kappa, pi, ni), r, a in zip(forms, blinds, rerands):
        base = pi if ni is None else _mul(pi, next(invs), nn)
        y = gpow[kappa * r % u] if base is None else gmpy2.powmod(base, r, nn) * gpow[kappa * r % u] % nn
        out.append(y * table.pow(a) % nn)
    return out


# ------------------------------------------------------------------ roles


def _check_workers(workers: Any) -> int | None:
    return None if workers is None else v.check_int("workers", workers, minimum=1)


def _check_keyholder_inputs(
    holder: Any, private_key: Any, dgk_private_key: Any, count: Any, bits: Any, threshold: Any, sigma: Any
) -> tuple[str, PaillierPrivateKey, DgkPrivateKey, int, int, int, int]:
    holder = v.check_name("holder", holder)
    if not isinstance(private_key, PaillierPrivateKey):
        raise PrivregTypeError(
            f"private_key must be a PaillierPrivateKey; got {type(private_key).__name__}. Pass keypair.private_key."
        )
    if not isinstance(dgk_private_key, DgkPrivateKey):
        raise PrivregTypeError(
            f"dgk_private_key must be a DgkPrivateKey; got {type(dgk_private_key).__name__}. Pass "
            f"generate_dgk_keypair(...).private_key."
        )
    count = v.check_int("count", count, minimum=0)
    bits, sigma, c = _check_sizes(bits, sigma, threshold)
    return holder, private_key, dgk_private_key, count, bits, sigma, c


async def threshold_holder(
    ch: Channel,
    *,
    keyholder: str,
    ciphertexts: Sequence[mpz],
    public_key: PaillierPublicKey,
    dgk_key: DgkPublicKey,
    wanted: Sequence[tuple[int, int]],
    bits: int,
    threshold: int,
    sigma: int = DEFAULT_SIGMA,
    step: str,
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> None:
    """The holder's role: masks, terms and a share bit for each wanted slot; learns nothing.

    Args:
        ch: the channel to ``keyholder``.
        keyholder: the key holder's party name.
        ciphertexts: raw Paillier ciphertexts under ``public_key`` (the key holder's), each
            an encryption of ``sum_r x_r 2^(r * slot_bits)`` with every ``x_r`` in
            ``[0, 2^bits)`` (:func:`slot_layout`).
        public_key: the key holder's Paillier public key.
        dgk_key: the key holder's DGK public key (received with
            :func:`~privreg.crypto.dgk.recv_dgk_public_key`, which checks it).
        wanted: the ``(ciphertext index, slot index)`` pairs to decide, sorted and distinct
            (the same list as the key holder's).
        bits: ``l``, the bit length of the values.
        threshold: ``c`` in ``[0, 2^bits]``; the key holder learns ``[x >= c]``.
        sigma: statistical parameter of the slot masks (distance ``2^-sigma`` per slot).
        step: prefix of the three message steps (``<step>.masked``, ``.bits``, ``.terms``).
        rng: randomness (default: the OS CSPRNG).
        workers: processes for the heavy loops (see :mod:`privreg.crypto.parallel`).

    Raises ProtocolError if the key holder's message is malformed (naming it).
    """
    keyholder = v.check_name("keyholder", keyholder)
    if not isinstance(public_key, PaillierPublicKey):
        raise PrivregTypeError(f"public_key must be a PaillierPublicKey; got {type(public_key).__name__}.")
    if not isinstance(dgk_key, DgkPublicKey):
        raise PrivregTypeError(
            f"dgk_key must be a DgkPublicKey; got {type(dgk_key).__name__}. Receive it with recv_dgk_public_key."
        )
    bits, sigma, _ = _check_sizes(bits, sigma, threshold)  # the key holder applies the threshold
    slot_bits, per = slot_layout(public_key, bits=bits, sigma=sigma)
    sizes = _digit_sizes(bits)
    _check_dgk_capacity("dgk_key", dgk_key, sizes, bits)
    cts = _check_ciphertexts(ciphertexts, public_key)
    pairs = _check_wanted(wanted, len(cts), per)
    steps = _check_step(step)
    rng, workers = resolve_random(rng), _check_workers(workers)
    if not pairs:
        return None
    pk, dk = public_key, dgk_key
    sent = sorted({ct for ct, _ in pairs})
    where = {ct: k for k, ct in enumerate(sent)}
    masks = random_bits(rng, bits + sigma, len(sent) * per)
    n, n2 = pk.n, pk.n2
    masked = []
    for k, j in enumerate(sent):
        m = 0
        for r in range(per - 1, -1, -1):
            m = (m << slot_bits) | masks[k * per + r]
        masked.append(cts[j] * (1 + m * n) % n2)
    vec = vector_from_ciphertexts(pk, masked, bound=(1 << (per * slot_bits)) - 1)
    await send_encrypted(ch, keyholder, vec, step=steps.masked, rng=rng, workers=workers)

    offs = _thermometer_offsets(sizes)
    width, count, terms_per = offs[-1], len(pairs), len(sizes)
    enc = await ch.recv(keyholder, step=steps.bits)
    if not isinstance(enc, DgkCiphertexts):
        raise ProtocolError(
            f"expected DgkCiphertexts from {keyholder!r} at step {steps.bits!r}; got {type(enc).__name__}"
        )
    if enc.public_key != dk or len(enc) != count * width:
        raise ProtocolError(
            f"{keyholder!r} sent {len(enc)} DGK ciphertexts under key {enc.public_key.key_id.hex()[:12]} at step "
            f"{steps.bits!r}; expected {count * width} under key {dk.key_id.hex()[:12]}"
        )
    raw = enc.raw()
    rhos = [masks[where[ct] * per + slot] for ct, slot in pairs]
    top = 1 << bits
    minus = random_bits(rng, 1, count)
    blinds = [1 + x for x in uniform_below(rng, dk.u - 1, count * terms_per)]
    rerands = random_bits(rng, dk.r_bits, count * terms_per)
    groups = [
        (
            raw[k * width : (k + 1) * width],
            _digits(rhos[k] % top, sizes),
            minus[k],
            blinds[k * terms_per : (k + 1) * terms_per],
            rerands[k * terms_per : (k + 1) * terms_per],
        )
        for k in range(count)
    ]
    w = parallel.resolve_workers(count * terms_per, workers)
    chunks = [
        (int(dk.n), int(dk.g), int(dk.h), dk.u, dk.r_bits, sizes, list(part)) for part in parallel.split(groups, w)
    ]
    try:
        terms = parallel.run_chunks(_terms_chunk, chunks, w)
    except ZeroDivisionError as exc:
        raise ProtocolError(
            f"{keyholder!r} sent DGK ciphertexts at step {steps.bits!r} that are not units modulo n"
        ) from exc
    shuffled: list[mpz] = []
    for k in range(count):  # Fisher-Yates per comparison: hide which digit differs first
        group = terms[k * terms_per : (k + 1) * terms_per]
        for i in range(len(group) - 1, 0, -1):
            j = rng.randbelow(i + 1)
            group[i], group[j] = group[j], group[i]
        shuffled.extend(group)
    shares = np.array([((rho >> bits) & 1) ^ s for rho, s in zip(rhos, minus)], dtype=np.uint8)
    payload = {"terms": DgkCiphertexts(public_key=dk, ciphertexts=shuffled, randomised=True), "shares": shares}
    await ch.send(keyholder, payload, step=steps.terms)
    return None


async def threshold_keyholder(
    ch: Channel,
    *,
    holder: str,
    private_key: PaillierPrivateKey,
    dgk_private_key: DgkPrivateKey,
    count: int,
    wanted: Sequence[tuple[int, int]],
    bits: int,
    threshold: int,
    sigma: int = DEFAULT_SIGMA,
    step: str,
    rng: RandomSource | None = None,
    workers: int | None = None,
) -> np.ndarray:
    """The key holder's role: returns ``decisions``, a boolean array with
    ``decisions[k] = [x_{wanted[k]} >= threshold]``.

    Args:
        ch: the channel to ``holder``.
        holder: the holder's party name.
        private_key: this party's Paillier private key (the holder's ciphertexts are under
            its public key).
        dgk_private_key: this party's DGK private key (the holder has its public key).
        count: the number of the holder's ciphertexts.
        wanted, bits, threshold, sigma, step: as for :func:`threshold_holder` (the same values).
        rng: randomness for the DGK encryptions (default: the OS CSPRNG).
        workers: processes for the heavy loops.

    Raises ProtocolError naming the holder if what it sent is malformed: a ciphertext
    count or type that does not match, a slot outside ``[0, 2^bits + 2^(bits + sigma) - 1)``
    (a value outside ``[0, 2^bits)`` or tampering), terms of another key, shares not 0/1.
    """
    holder, sk, dsk, count, bits, sigma, c = _check_keyholder_inputs(
        holder, private_key, dgk_private_key, count, bits, threshold, sigma
    )
    slot_bits, per = slot_layout(sk.public_key, bits=bits, sigma=sigma)
    sizes = _digit_sizes(bits)
    _check_dgk_capacity("dgk_private_key", dsk.public_key, sizes, bits)
    pairs = _check_wanted(wanted, count, per)
    steps = _check_step(step)
    rng, workers = resolve_random(rng), _check_workers(workers)
    if not pairs:
        return np.zeros(0, dtype=bool)
    sent = sorted({ct for ct, _ in pairs})
    where = {ct: k for k, ct in enumerate(sent)}
    try:
        vec = await recv_encrypted(ch, holder, step=steps.masked, public_key=sk.public_key, length=len(sent))
    except WrongKeyError as exc:
        raise ProtocolError(f"{holder!r} sent at step {steps.masked!r} ciphertexts under another key") from exc
    plain = sk.raw_decrypt([mpz(x) for x in vec.ciphertexts], workers=workers)
    slot_mask, zmax = (1 << slot_bits) - 1, (1 << bits) + (1 << (bits + sigma)) - 2
    full = 1 << (per * slot_bits)
    for m in plain:
        if m >= full or any(((m >> (r * slot_bits)) & slot_mask) > zmax for r in range(per)):
            raise ProtocolError(
                f"{holder!r} sent at step {steps.masked!r} a ciphertext whose slots leave [0, 2^bits + "
                f"2^(bits+sigma) - 1): its values are not in [0, 2^{bits}) or it broke the protocol"
            )
    top = 1 << bits
    ds = [(int(plain[where[ct]]) >> (slot * slot_bits) & slot_mask) - c + top for ct, slot in pairs]
    therm = [int(a >= lv) for d in ds for a, k in zip(_digits(d % top, sizes), sizes) for lv in range(1, 1 << k)]
    enc = dsk.encrypt(therm, rng=rng, workers=workers)
    await ch.send(holder, enc, step=steps.bits)

    terms_per = len(sizes)
    msg = await ch.recv(holder, step=steps.terms)
    if not isinstance(msg, dict) or set(msg) != {"terms", "shares"}:
        raise ProtocolError(f"expected a dict of 'terms' and 'shares' from {holder!r} at step {steps.terms!r}")
    terms, shares = msg["terms"], msg["shares"]
    if (
        not isinstance(terms, DgkCiphertexts)
        or terms.public_key != dsk.public_key
        or len(terms) != len(pairs) * terms_per
    ):
        raise ProtocolError(
            f"{holder!r} sent at step {steps.terms!r} something other than {len(pairs) * terms_per} DGK ciphertexts "
            f"under this party's DGK key"
        )
    if (
        not isinstance(shares, np.ndarray)
        or shares.shape != (len(pairs),)
        or shares.dtype.kind not in "biu"
        or not np.all((shares == 0) | (shares == 1))
    ):
        raise ProtocolError(f"{holder!r} sent at step {steps.terms!r} shares that are not {len(pairs)} bits")
    zero = dsk.is_zero(terms, workers=workers)
    out = np.zeros(len(pairs), dtype=bool)
    for k, d in enumerate(ds):
        delta = any(zero[k * terms_per : (k + 1) * terms_per])
        out[k] = bool(((d >> bits) & 1) ^ int(delta) ^ int(shares[k]))
    return out
