"""Private training of logistic regression (paper 000, Section 4.2) between Alice and Bob.

Alice holds labelled messages ``(x_i, y_i)``; Bob holds the model ``w`` and a Paillier key
pair. Bob must not see any ``x_i``, ``y_i`` or per-message value; Alice must not see ``w``.

Why not the printed protocol
----------------------------
Steps 3-9 of the paper mask ``z = y w.x`` with ``r`` uniform over ``Z_N``, let Bob compute
``e^(z - r)`` and let Alice multiply by ``e^r``; then mask ``1 + e^z`` multiplicatively with a
power-law ``q`` so Bob can take the reciprocal. A mask that hides ``z`` makes ``e^r`` far too
large to encrypt; a mask small enough to exponentiate hides nothing; and a multiplicative
mask ``q`` leaks the magnitude of ``1 + e^z`` (its information-theoretic argument in 5.2
holds only for ``v < |D|`` and ignores the ratio structure). So this module evaluates a
public periodic approximation ``h`` of the sigmoid weight instead (the paper's footnote 2
suggests an approximation too), through statistically masked values only:

Construction (one batch of ``K`` messages; all values are integers in fixed point)
---------------------------------------------------------------------------------
Bob's weights are held as additive shares ``W = W_A + W_B`` (``W = round(w 2^fw)``): with
``reveal="final"`` Alice's share ``W_A`` is a sum of her masks and Bob learns ``w`` only at
the end; with ``reveal="every-batch"`` (the paper's online protocol) ``W_A = 0`` and Bob
learns ``w(t+1)`` after every batch, as in step 12.

1. Bob encrypts his share and sends ``E[W_B]`` (d encryptions, key holder's CRT path).
2. Alice computes ``E[W] = E[W_B] + W_A`` and the inner products ``E[U_i] = E[W] . x_i``
   (one multiplication per nonzero binary feature).
3. Alice adds masks ``R_i`` uniform in ``[0, 2^(l + 1 + sigma))``, ``2^l > |U_i|`` (public
   bound from ``|w| <= W_max`` and ``||x||_1``), packs several per ciphertext,
   re-randomises and sends ``E[V_i] = E[U_i + R_i]``.
4. Bob decrypts ``V_i``. The statistical distance between ``V_i`` for any two inner
   products is at most ``2^-sigma``.
5. Bob computes the angle ``theta_i = 2 pi (V_i mod P') / P'`` (``P' = P 2^(fw + fx)``, the
   period ``P`` of ``h`` in inner-product units; ``R_i mod P'`` is uniform, so ``theta_i`` is
   uniform and independent of ``U_i``) and sends encryptions of ``sin(k theta_i)`` and
   ``cos(k theta_i)`` for the odd harmonics ``k`` of ``h`` (``2 m`` fresh encryptions per
   message, ``m`` = number of terms).
6-7. Alice, knowing ``phi_i = 2 pi (R_i mod P') / P'``, combines them homomorphically into
   ``E[T_i]``, ``T_i ~ 2^fg y_i h(y_i u_i) = 2^fg (y_i / 2 + sum_k b_k sin(k (theta_i - phi_i)))``,
   using ``sin(a - b) = sin a cos b - cos a sin b``; ``y_i`` enters only her plaintext constant.
8. (The paper's reciprocal step is not needed.)
9-10. Alice forms the encrypted gradient ``E[G_j] = prod_{i: x_ij = 1} E[T_i]`` (``G = X^T T``).
11. Alice adds, with ``reveal="final"``, a mask ``R_G`` (``sigma`` bits above the bound of
   ``G``), and optionally differentially private noise (below), packs, re-randomises and
   sends ``E[G + noise + R_G]``.
12. Bob decrypts. Both update their shares so that ``W(t+1) = (1 - 2 eta lambda) W(t) + eta G``
   (the corrected regulariser sign, see :mod:`~privreg.plugins.spam.logistic`); each
   rounds its own share, so ``W`` is exact up to one unit in the last place per batch.
   After the last batch, with ``reveal="final"``, Alice sends ``W_A`` and Bob outputs ``w``.

Security (semi-honest parties)
-----------------------------
Alice sees only ciphertexts under Bob's key (semantic security of Paillier: DCR, and for
Bob's fast CRT-DJN encryption nothing more; see :mod:`privreg.crypto`). Bob sees: the
masked ``V_i`` (each within ``2^-sigma`` of independent of the data), the angles (uniform),
and ``G + noise`` per batch, masked by ``R_G`` (``reveal="final"``: within ``2^-sigma``) or
in the clear (``"every-batch"``: the batch gradient, which the paper also reveals through
``w(t+1)``; eq. (2) bounds what it says about one message). Public: ``n``, ``d``, ``K``,
the schedule, ``eta``, ``lambda``, the scales and bounds. Statistical parameter: ``sigma``
(40 by default) per masked value; over ``q`` masked values the total distance is at most
``q 2^-sigma``.

Differential privacy (optional, ``dp``)
---------------------------------------
Output and objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011; the "bolt-on"
SGD analysis of Wu et al. 2017) rest on a convex loss that is minimised, or on SGD steps
that do not expand distances; the periodic link ``h`` is not monotone beyond ``|z| ~ P/2``, so
no such sensitivity bound holds for the model this protocol trains. And Bob sees every
batch gradient (``every-batch``) before any output could be perturbed. So the noise goes on
the batch gradients, added by Alice before anything reaches Bob (gradient perturbation):
Alice adds Gaussian noise to every batch gradient before it leaves her, drawn through
:class:`~privreg.mechanisms.gaussian.GaussianMechanism` (charged to the charger
before any noise is drawn): once per epoch, one release of dimension ``batches * d`` on
the zero vector gives the noise of all the epoch's batches. One message lies in one batch
per epoch and changes that batch's ``G`` by at most ``Delta = 2 ||x||_2 max|T| / 2^fg`` (L2,
replace-one; ``||x||_2 <= l2_bound`` must be public, e.g. binary features capped at
``max_active`` so ``l2_bound = sqrt(max_active)``); later batches depend on it only through
released values (adaptive composition), so the epoch costs one Gaussian mechanism of
sensitivity ``Delta`` (declared rounded up to a power of two). The mechanism's noise lives
on its grid of step ``s``; ``G`` lives on the finer fixed-point grid, so Alice adds a
uniform dither in ``[0, s)`` (on the fine grid): ``G + dither`` then is ``s`` times a
shift-commuting rounding of ``G / s`` (``|e_i - e'_i| < 1`` per coordinate, the case the
mechanism's integer sensitivity ``m + ceil(sqrt(dim))`` covers) plus a uniform offset that
carries no information. So every value Bob sees is (epsilon, delta)-DP per epoch (with
``E`` epochs, ``E`` events of ``(epsilon/E, delta/E)``), up to the ``2^-sigma`` terms, and
Bob's model is post-processing.

Fixed point and overflow: weights ``2^-fw``; features ``2^-fx`` (0 for binary); trigonometric
values ``2^-ft``; Alice's coefficients ``2^-fc``; gradients ``2^-(ft + fc + fx)``; ``eta`` and
``1 - 2 eta lambda`` are rounded to ``2^-fe`` (the reference uses the same values). Every
plaintext stays far inside the key's range (checked by the crypto layer, which raises on
overflow); the public bounds are derived in :class:`TrainingPlan`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz

from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import EncryptedVector, PaillierKeypair, counting, pack
from privreg.crypto.channel import (
    RoleParty,
    recv_public_key,
    require_input,
    rerandomized,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.errors import PlaintextOverflowError
from privreg.crypto.packing import PackedCiphertexts
from privreg.plugins.spam.link import PeriodicSigmoid
from privreg.plugins.spam.logistic import batches, check_labels

__all__ = ["TrainingConfig", "TrainingPlan", "PrivateTraining", "REVEALS", "STEP_ROWS", "StepTimer",
           "declare_bound", "uniform_ints", "quantize_features", "cpu_seconds"]

REVEALS = ("final", "every-batch")
#: Rows of the per-step time table, in the shape of the paper's Table 4.
STEP_ROWS = ("1", "2, 3", "4, 5", "6, 7", "8", "9, 10", "11", "12")


def _bits(name: str, x: Any, lo: int, hi: int) -> int:
    x = v.check_int(name, x, minimum=lo)
    if x > hi:
        raise PrivregValueError(f"{name} must be at most {hi}; got {x}.")
    return x


@attrs.frozen(kw_only=True)
class TrainingConfig:
    """Public parameters of the training protocol (both parties use the same).

    Args:
        d: number of features.
        eta: step size (the paper: 0.001); applied to the batch *sum* of gradients.
        lam: L2 regularisation lambda (update ``(1 - 2 eta lam) w + eta grad``).
        batch_size: K, messages per batch (eq. (2)).
        epochs: passes over the training data.
        link: the periodic sigmoid approximation evaluated privately.
        reveal: ``"final"`` (Bob learns only the final w) or ``"every-batch"`` (the paper).
        sigma: statistical security parameter of every mask.
        weight_bits, trig_bits, coef_bits, rate_bits, feature_bits: fixed-point fractional
            bits of weights, Bob's trigonometric values, Alice's coefficients, eta, features.
        feature_bound: public bound on ``|x_ij|`` (1 for binary features; reals are scaled).
        l1_bound: public bound on ``||x_i||_1`` (default ``d * feature_bound``).
        w0_bound: public bound on ``|w0_j|`` (Bob's initial weights; 0 for zeros).
        dp_epsilon, dp_delta: per-run DP of the gradients Bob sees (None: no DP).
        l2_bound: public bound on ``||x_i||_2``, required with DP.
        workers: processes for the Paillier batches (None: automatic).
    """

    d: int = attrs.field(converter=lambda x: v.check_int("d", x, minimum=1))
    eta: float = attrs.field(default=0.001)
    lam: float = attrs.field(default=0.0)
    batch_size: int = attrs.field(default=10, converter=lambda x: v.check_int("batch_size", x, minimum=1))
    epochs: int = attrs.field(default=1, converter=lambda x: v.check_int("epochs", x, minimum=1))
    link: PeriodicSigmoid = attrs.field(factory=PeriodicSigmoid)
    reveal: str = attrs.field(default="final")
    sigma: int = attrs.field(default=40, converter=lambda x: _bits("sigma", x, 20, 256))
    weight_bits: int = attrs.field(default=32, converter=lambda x: _bits("weight_bits", x, 8, 64))
    trig_bits: int = attrs.field(default=24, converter=lambda x: _bits("trig_bits", x, 8, 52))
    coef_bits: int = attrs.field(default=24, converter=lambda x: _bits("coef_bits", x, 8, 52))
    rate_bits: int = attrs.field(default=40, converter=lambda x: _bits("rate_bits", x, 16, 64))
    feature_bits: int = attrs.field(default=0, converter=lambda x: _bits("feature_bits", x, 0, 40))
    feature_bound: int = attrs.field(default=1, converter=lambda x: v.check_int("feature_bound", x, minimum=1))
    l1_bound: int | None = attrs.field(default=None)
    w0_bound: float = attrs.field(default=0.0)
    dp_epsilon: float | None = attrs.field(default=None)
    dp_delta: float | None = attrs.field(default=None)
    l2_bound: float | None = attrs.field(default=None)
    workers: int | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        eta, lam = v.check_real("eta", self.eta), v.check_real("lam", self.lam)
        if not 0 < eta < 1:
            raise PrivregValueError(f"eta must lie in (0, 1); got {self.eta}.")
        if lam < 0 or not 2 * eta * lam < 1:
            raise PrivregValueError(f"lam must satisfy 0 <= 2 eta lam < 1; got lam={self.lam}, eta={self.eta}.")
        if not isinstance(self.link, PeriodicSigmoid):
            raise PrivregTypeError(f"link must be a PeriodicSigmoid; got {type(self.link).__name__}.")
        if self.reveal not in REVEALS:
            raise PrivregValueError(f"reveal must be one of {REVEALS}; got {self.reveal!r}.")
        if self.l1_bound is not None:
            v.check_int("l1_bound", self.l1_bound, minimum=1)
        w0 = v.check_real("w0_bound", self.w0_bound)
        if not (w0 >= 0 and math.isfinite(w0)):
            raise PrivregValueError(f"w0_bound must be a finite number >= 0; got {self.w0_bound}.")
        if (self.dp_epsilon is None) != (self.dp_delta is None):
            raise PrivregValueError("pass both dp_epsilon and dp_delta (or neither, for no DP).")
        if self.dp_epsilon is not None:
            v.check_epsilon("dp_epsilon", self.dp_epsilon)
            v.check_delta("dp_delta", self.dp_delta, allow_zero=False)
            if self.l2_bound is None:
                raise PrivregValueError(
                    "DP needs a public bound on ||x_i||_2: pass l2_bound (binary features capped at "
                    "max_active give l2_bound = sqrt(max_active)).")
            v.check_sensitivity("l2_bound", self.l2_bound)
        if self.workers is not None:
            v.check_int("workers", self.workers, minimum=1)
        if int(round(self.eta * 2**self.rate_bits)) < 1:
            raise PrivregValueError(f"eta={self.eta} is below 2^-rate_bits; raise rate_bits.")

    @property
    def dp(self) -> bool:
        return self.dp_epsilon is not None

    @property
    def eta_int(self) -> int:
        return int(round(self.eta * 2**self.rate_bits))

    @property
    def decay_int(self) -> int:
        """``round((1 - 2 eta lam) 2^fe)``."""
        return int(round((1.0 - 2.0 * self.eta_int / 2**self.rate_bits * self.lam) * 2**self.rate_bits))

    @property
    def eta_effective(self) -> float:
        """The step size actually applied (``eta`` rounded to ``2^-rate_bits``)."""
        return self.eta_int / 2**self.rate_bits

    @property
    def lam_effective(self) -> float:
        """The lambda actually applied: ``(1 - decay) / (2 eta)``."""
        return (1.0 - self.decay_int / 2**self.rate_bits) / (2.0 * self.eta_effective)

    def plan(self, n: int) -> TrainingPlan:
        """The derived bounds and sizes for ``n`` training messages."""
        return TrainingPlan.build(self, v.check_int("n", n, minimum=1))


def _dyadic_at_least(x: float) -> float:
    """The smallest power of two >= x."""
    return 2.0 ** math.ceil(math.log2(x))


@attrs.frozen(kw_only=True)
class TrainingPlan:
    """Everything both parties derive from the public configuration and ``n``."""

    config: TrainingConfig
    n: int
    batch_bounds: tuple[tuple[int, int], ...]
    fg: int  # fractional bits of T (trig * coefficient)
    period_int: int  # the period P in inner-product units
    t_bound: int  # |T_i|
    g_bound: int  # |G_j| per batch (without noise)
    w_bound: int  # |W_j| (weights, scaled) at every point of the run
    u_bound: int  # |U_i|
    mask_bits: int  # inner-product masks
    noise_bound: int  # |noise + dither| per gradient coordinate (scaled), 0 without DP
    gmask_bits: int  # gradient masks (reveal="final"), 0 otherwise
    share_bound: int  # |W_B| (Bob's share)
    dp_sensitivity: float  # declared L2 sensitivity of a batch gradient (power of two), 0 without DP

    @property
    def steps(self) -> int:
        return len(self.batch_bounds) * self.config.epochs

    @classmethod
    def build(cls, c: TrainingConfig, n: int) -> TrainingPlan:
        bb = tuple(batches(n, c.batch_size))
        steps = len(bb) * c.epochs
        fx = c.feature_bits
        fg = c.trig_bits + c.coef_bits
        coef = c.link.coefficients
        slack = sum(2**c.trig_bits + abs(b) * 2**c.coef_bits + 1 for b in coef)
        t_bound = math.ceil(c.link.bound() * 2**fg) + math.ceil(slack)
        kmax = max(e - s for s, e in bb)
        g_bound = kmax * c.feature_bound * t_bound  # scale 2^(fg + fx)
        l1 = c.l1_bound if c.l1_bound is not None else c.d * c.feature_bound
        dp_sens = 0.0
        noise_bound = 0
        if c.dp:
            q_l2 = float(c.l2_bound) + (math.sqrt(c.d) * 2.0 ** -(fx + 1) if fx else 0.0)
            dp_sens = _dyadic_at_least(2.0 * q_l2 * t_bound / 2**fg)
            mech = _dp_mechanism(c, len(bb), dp_sens)
            step_int = mech_step_int(mech, fg + fx)
            # |noise| <= 10 sigma_int grid units except with probability < 1e-22 per coordinate
            noise_bound = step_int * (10 * math.ceil(float(mech.sigma_int)) + 1)
        # each step moves a weight by at most eta (|G| + |noise|) / 2^(fg + fx), rounding 1 ulp
        per_step = c.eta_int * (g_bound + noise_bound) * 2**c.weight_bits
        per_step = -(-per_step // 2 ** (c.rate_bits + fg + fx)) + 1
        w_bound = math.ceil(c.w0_bound * 2**c.weight_bits) + steps * per_step
        u_bound = w_bound * l1
        mask_bits = u_bound.bit_length() + 1 + c.sigma
        period_int = int(c.link.period) * 2 ** (c.weight_bits + fx)
        if period_int > 2**mask_bits:  # R mod P' must be uniform, so P' must divide 2^mask_bits
            raise PrivregValueError(
                f"the link period in fixed point (2^{period_int.bit_length() - 1}) exceeds the inner-product masks "
                f"(2^{mask_bits}); raise sigma or lower weight_bits")
        gmask_bits = (g_bound + noise_bound).bit_length() + 1 + c.sigma if c.reveal == "final" else 0
        share_step = -(-(c.eta_int * (2**gmask_bits) * 2**c.weight_bits) // 2 ** (c.rate_bits + fg + fx)) + 1
        share_bound = w_bound + (steps * share_step if c.reveal == "final" else 0)
        return cls(config=c, n=n, batch_bounds=bb, fg=fg, period_int=period_int, t_bound=t_bound, g_bound=g_bound,
                   w_bound=w_bound, u_bound=u_bound, mask_bits=mask_bits, noise_bound=noise_bound,
                   gmask_bits=gmask_bits, share_bound=share_bound, dp_sensitivity=dp_sens)

    def describe(self) -> str:
        c = self.config
        return (f"n={self.n}, d={c.d}, K={c.batch_size}, {len(self.batch_bounds)} batches x {c.epochs} epoch(s); "
                f"masks: inner products {self.mask_bits} bits (|U| < 2^{self.u_bound.bit_length()}, sigma={c.sigma})"
                + (f", gradients {self.gmask_bits} bits" if self.gmask_bits else "")
                + f"; |w| <= {self.w_bound / 2**c.weight_bits:.4g} (public bound)")


def _dp_mechanism(c: TrainingConfig, n_batches: int, sensitivity: float) -> Any:
    from privreg.mechanisms import GaussianMechanism

    return GaussianMechanism(epsilon=c.dp_epsilon / c.epochs, delta=c.dp_delta / c.epochs,
                             sensitivity=sensitivity, dimension=n_batches * c.d)


def mech_step_int(mech: Any, frac_bits: int) -> int:
    """The mechanism's grid step in units of ``2^-frac_bits`` (it must be a whole number)."""
    step = mech.grid.step * 2**frac_bits
    if step.denominator != 1 or step.numerator & (step.numerator - 1):
        raise PrivregValueError(
            f"the DP noise grid step {mech.grid.step} is not a power of two at least 2^-{frac_bits} (the "
            f"fixed-point grid); raise trig_bits/coef_bits")
    return int(step)


# ------------------------------------------------------------------ helpers

def uniform_ints(rng: RandomSource, count: int, bits: int) -> list[int]:
    """``count`` independent integers uniform in ``[0, 2^bits)`` from ``rng``."""
    nbytes = (bits + 7) // 8
    raw = rng.random_bytes(count * nbytes)
    extra = nbytes * 8 - bits
    out = []
    for i in range(count):
        x = int.from_bytes(raw[i * nbytes:(i + 1) * nbytes], "big")
        out.append(x >> extra)
    return out


def declare_bound(vec: EncryptedVector, bound: int) -> EncryptedVector:
    """``vec`` with a public ``bound`` on |plaintext| that the protocol proves (its tracked
    bound is looser, or was computed from a private operand). Decryption still checks it.
    Raises PlaintextOverflowError if the bound does not fit the key's signed plaintext range."""
    if bound > vec.public_key.max_int:
        raise PlaintextOverflowError(
            f"a protocol value may reach {int(bound).bit_length()} bits, beyond the key's "
            f"{vec.public_key.max_int.bit_length()}-bit signed plaintext range; use a larger key or a smaller "
            f"sigma/scale")
    return EncryptedVector(public_key=vec.public_key, ciphertexts=[mpz(x) for x in vec.ciphertexts],
                           scale=vec.scale, power=vec.power, bound=int(bound), bound_public=True,
                           randomised=False)


def quantize_features(X: Any, feature_bits: int) -> sp.csr_matrix:
    """``round(X 2^feature_bits)`` as an int64 CSR matrix (binary int inputs unchanged)."""
    M = sp.csr_matrix(X)
    if feature_bits == 0:
        if M.dtype.kind == "f" and not np.all(M.data == np.round(M.data)):
            raise PrivregValueError("real-valued features need feature_bits > 0 (fixed point).")
        return sp.csr_matrix(M, dtype=np.int64)
    out = sp.csr_matrix((np.rint(M.data * 2.0**feature_bits).astype(np.int64), M.indices, M.indptr), shape=M.shape)
    out.eliminate_zeros()
    return out


def _round_div(x: int, shift: int) -> int:
    """``round(x / 2^shift)`` (half up) for Python ints."""
    return (x + (1 << (shift - 1))) >> shift if shift > 0 else x


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid: str) -> list[str]:
    out: list[str] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(fh.read().split())
        except OSError:
            continue
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process plus its live descendants (the Paillier worker pool,
    started through a forkserver), read from ``/proc`` on Linux; elsewhere this process
    only. On a loaded machine CPU time is the fair measure: wall time also counts other
    users' work."""
    total = time.process_time()
    todo = _children("self")
    seen: set[str] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
        todo.extend(_children(pid))
    return total


class StepTimer:
    """Wall-clock seconds and CPU seconds (this process and its worker processes, see
    :func:`cpu_seconds`) per protocol step (Table 4 rows); only a party's own computing
    is timed, never its waiting for messages."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {row: 0.0 for row in STEP_ROWS}
        self.cpu: dict[str, float] = {row: 0.0 for row in STEP_ROWS}

    @contextmanager
    def step(self, row: str):  # type: ignore[no-untyped-def]
        w0, c0 = time.perf_counter(), cpu_seconds()
        try:
            yield
        finally:
            self.wall[row] += time.perf_counter() - w0
            self.cpu[row] += cpu_seconds() - c0


# ------------------------------------------------------------------ the protocol

class PrivateTraining(Protocol):
    """The training protocol of paper 000, Section 4.2, in the sound form described in
    the module docstring. Parties ``alice`` (data) and ``bob`` (model, keys).

    Each process passes the inputs of the parties it hosts: Bob ``keypair`` (and ``w0``);
    Alice ``X`` (n x d, binary or fixed-point integers after :func:`quantize_features`),
    ``y`` (+-1), and with DP a ``charger``. ``config`` and ``n`` are public and must agree.
    Outputs: Bob a dict with ``w`` (the trained weights), ``timings``, ``counts``; Alice a
    dict with ``timings`` and ``counts``.
    """

    name = "spam-private-training"
    caveats = (
        "Semi-honest parties. The sigmoid is replaced by a public periodic approximation h (default period 32, "
        "odd harmonics up to 11): the model equals plaintext training with h, not with the exact sigmoid "
        "(on SpamAssassin the test AUCs agree to ~1e-6); inner products beyond half the period wrap around. "
        "Bob's view is statistically masked (sigma bits per value, total distance <= count * 2^-sigma) while "
        "|w| stays below the public bound derived from eta, K and the schedule (true by construction without DP; "
        "with DP except with probability < 1e-22 per coordinate). With reveal='every-batch' Bob learns each "
        "batch gradient (eq. (2) bounds its leakage); with reveal='final' only the final model. n, d, K, the "
        "schedule and all scales are public. Paillier security: DCR (Bob encrypts with his key's CRT-DJN path, "
        "Alice only re-randomises with public DJN, which adds the DJN short-exponent assumption). Not constant-time."
    )

    def __init__(self, *, config: TrainingConfig, n: int, keypair: PaillierKeypair | None = None,
                 w0: Any = None, X: Any = None, y: Any = None, charger: Charger | None = None,
                 allow_insecure: bool = False, rng: RandomSource | None = None,
                 alice: str = "alice", bob: str = "bob", progress: Any = None) -> None:
        if not isinstance(config, TrainingConfig):
            raise PrivregTypeError(f"config must be a TrainingConfig; got {type(config).__name__}.")
        self.config = config
        self.plan = config.plan(n)
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        self.keypair = keypair
        self.w0 = None if w0 is None else np.asarray(w0, dtype=np.float64)
        if self.w0 is not None and (self.w0.shape != (config.d,)
                                    or np.max(np.abs(self.w0), initial=0) > config.w0_bound):
            raise PrivregValueError(f"w0 must have {config.d} entries of magnitude <= w0_bound={config.w0_bound}.")
        self.X = None
        if X is not None:
            M = sp.csr_matrix(X)
            if M.dtype.kind not in "biu":
                raise PrivregTypeError("X must hold integers (binary, or quantize_features(X, feature_bits)).")
            if M.shape != (n, config.d):
                raise PrivregValueError(f"X has shape {M.shape}; the protocol was set up for ({n}, {config.d}).")
            M = sp.csr_matrix(M, dtype=np.int64)
            if M.nnz and int(np.max(np.abs(M.data))) > config.feature_bound:
                raise PrivregValueError(f"a feature exceeds feature_bound={config.feature_bound}.")
            l1 = config.l1_bound if config.l1_bound is not None else config.d * config.feature_bound
            if M.nnz and int(np.max(np.asarray(abs(M).sum(axis=1)))) > l1:
                raise PrivregValueError(f"a message exceeds the public l1_bound={l1} on ||x||_1.")
            if config.dp:
                l2max = math.sqrt(float(np.max(np.asarray(M.multiply(M).sum(axis=1))))) / 2**config.feature_bits
                if l2max > config.l2_bound * (1 + 1e-12) + (math.sqrt(config.d) * 2.0 ** -(config.feature_bits + 1)
                                                           if config.feature_bits else 0):
                    raise PrivregValueError(
                        f"a message exceeds the public l2_bound={config.l2_bound} on ||x||_2; cap the features "
                        f"(NgramHasher(max_active=...)) or raise l2_bound")
            self.X = M
        self.y = None if y is None else check_labels(y, n)
        if config.dp and X is not None and charger is None:
            raise PrivregValueError(
                "DP training needs a charger (the budget session) where Alice runs; pass charger=...")
        self.charger = charger
        self.allow_insecure = allow_insecure
        self.rng = rng
        self.alice, self.bob = v.check_name("alice", alice), v.check_name("bob", bob)
        self.progress = progress

    def learns(self) -> Mapping[str, str]:
        c = self.config
        bob = ("the final weights w; the inner products only masked (V = U + R, statistical distance 2^-sigma "
               "each), angles uniform on the circle, and the batch gradients "
               + ("masked by R_G (2^-sigma)" if c.reveal == "final" else "in the clear (as w(t+1) in the paper)")
               + (" with (epsilon, delta)-DP Gaussian noise" if c.dp else "")
               + "; never a feature, label or per-message value. Public: n, d, K, schedule, scales.")
        alice = "nothing about w (only ciphertexts under Bob's key); the public parameters"
        return {self.alice: alice, self.bob: bob}

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.alice, self._run_alice), RoleParty(self.bob, self._run_bob)]

    # ------------------------------------------------------------------ Bob

    async def _run_bob(self, ch: Channel) -> dict[str, Any]:
        kp = require_input(self.keypair, "keypair", self.bob)
        c, plan = self.config, self.plan
        sk, pk = kp.private_key, kp.public_key
        timer = StepTimer()
        with counting() as counts:
            await send_public_key(ch, self.alice, pk, step="setup.public-key")
            W_B = [0] * c.d if self.w0 is None else [int(x) for x in np.rint(self.w0 * 2**c.weight_bits).astype(object)]
            harmonics = c.link.harmonics
            shift = c.rate_bits + plan.fg + c.feature_bits
            for _epoch in range(c.epochs):
                for s, e in plan.batch_bounds:
                    k = e - s
                    with timer.step("1"):
                        if max(abs(x) for x in W_B) > plan.share_bound:
                            raise ProtocolError("Bob's weight share left its public bound; the run is aborted")
                        enc_w = sk.encrypt(W_B, bound=plan.share_bound, workers=c.workers)
                    await send_encrypted(ch, self.alice, enc_w, step="1.E[w]", workers=c.workers)
                    packed = await ch.recv(self.alice, step="3.masked-inner-products")
                    with timer.step("4, 5"):
                        _check_packed(packed, pk, k, "3.masked-inner-products")
                        V = sk.decrypt_packed(packed, workers=c.workers)
                        theta = np.array([int(x) % plan.period_int for x in V], dtype=np.float64)
                        theta *= 2 * np.pi / plan.period_int
                        ang = np.multiply.outer(theta, harmonics)
                        trig = np.concatenate([np.sin(ang), np.cos(ang)], axis=1) * 2.0**c.trig_bits
                        vals = [int(x) for x in np.rint(trig).astype(np.int64).reshape(-1)]
                        enc_t = sk.encrypt(vals, bound=2**c.trig_bits, workers=c.workers)
                    await send_encrypted(ch, self.alice, enc_t, step="5.E[trig]", workers=c.workers)
                    packed_g = await ch.recv(self.alice, step="11.E[gradient]")
                    with timer.step("12"):
                        _check_packed(packed_g, pk, c.d, "11.E[gradient]")
                        G = sk.decrypt_packed(packed_g, workers=c.workers)
                        W_B = [_round_div(c.decay_int * wb * 2 ** (plan.fg + c.feature_bits)
                                          + c.eta_int * int(gj) * 2**c.weight_bits, shift)
                               for wb, gj in zip(W_B, G)]
                        if c.reveal == "every-batch" and max(abs(x) for x in W_B) > plan.w_bound:
                            raise ProtocolError("the weights left their public bound |w| <= W_max; aborted")
            if c.reveal == "final":
                share = await ch.recv(self.alice, step="12.final-share")
                if not (isinstance(share, list) and len(share) == c.d and all(isinstance(x, int) for x in share)):
                    raise ProtocolError("malformed final share from Alice")
                W = [a + b for a, b in zip(share, W_B)]
            else:
                W = W_B
        w = np.array([x / 2**c.weight_bits for x in W], dtype=np.float64)
        return {"w": w, "timings": timer, "counts": counts}

    # ------------------------------------------------------------------ Alice

    async def _run_alice(self, ch: Channel) -> dict[str, Any]:
        X = require_input(self.X, "X", self.alice)
        y = require_input(self.y, "y", self.alice)
        c, plan = self.config, self.plan
        rng = resolve_random(self.rng)
        timer = StepTimer()
        XT = sp.csr_matrix(X.T)
        harmonics, coef = c.link.harmonics, c.link.coefficients
        m = harmonics.size
        fgx = plan.fg + c.feature_bits
        shift = c.rate_bits + fgx
        half = 1 << (plan.fg - 1)
        W_A = [0] * c.d
        n_batches = len(plan.batch_bounds)
        with counting() as counts:
            pk = await recv_public_key(ch, self.bob, step="setup.public-key", allow_insecure=self.allow_insecure)
            done = 0
            for epoch in range(c.epochs):
                noise = self._epoch_noise(epoch, n_batches, rng) if c.dp else None
                for b, (s, e) in enumerate(plan.batch_bounds):
                    k = e - s
                    Xb, yb = X[s:e], y[s:e]
                    enc_wb = await ch.recv(self.bob, step="1.E[w]")
                    with timer.step("2, 3"):
                        if not isinstance(enc_wb, EncryptedVector) or len(enc_wb) != c.d:
                            raise ProtocolError(f"expected {c.d} encrypted weights at step 1.E[w]")
                        pk.check_same(enc_wb.public_key, "the encrypted weights")
                        enc_w = enc_wb.add_plain(W_A) if c.reveal == "final" else enc_wb
                        enc_u = declare_bound(enc_w.dot(Xb, bound=c.feature_bound, workers=c.workers), plan.u_bound)
                        R = uniform_ints(rng, k, plan.mask_bits)
                        masked = declare_bound(enc_u.add_plain(R), plan.u_bound + 2**plan.mask_bits)
                        out = rerandomized(pack(masked, workers=c.workers), rng=rng, workers=c.workers)
                    await send_encrypted(ch, self.bob, out, step="3.masked-inner-products", rng=rng, workers=c.workers)
                    enc_t = await ch.recv(self.bob, step="5.E[trig]")
                    with timer.step("6, 7"):
                        if not isinstance(enc_t, EncryptedVector) or len(enc_t) != 2 * m * k:
                            raise ProtocolError(f"expected {2 * m * k} encrypted values at step 5.E[trig]")
                        pk.check_same(enc_t.public_key, "the encrypted trigonometric values")
                        phi = np.array([r % plan.period_int for r in R], dtype=np.float64)
                        phi *= 2 * np.pi / plan.period_int
                        ang = np.multiply.outer(phi, harmonics)
                        alpha = np.rint(coef * np.cos(ang) * 2.0**c.coef_bits).astype(np.int64)
                        beta = np.rint(-coef * np.sin(ang) * 2.0**c.coef_bits).astype(np.int64)
                        rows = np.repeat(np.arange(k), 2 * m)
                        cols = np.arange(2 * m * k)
                        M = sp.csr_matrix((np.concatenate([alpha, beta], axis=1).reshape(-1), (rows, cols)),
                                          shape=(k, 2 * m * k))
                        enc_T = enc_t.dot(M, bound=2**c.coef_bits, workers=c.workers)
                        enc_T = declare_bound(enc_T.add_plain([int(t) * half for t in yb]), plan.t_bound)
                    with timer.step("9, 10"):
                        enc_G = enc_T.dot(XT[:, s:e], bound=c.feature_bound, workers=c.workers)
                    with timer.step("11"):
                        extra = [0] * c.d
                        if noise is not None:
                            extra = noise[b]
                        R_G = uniform_ints(rng, c.d, plan.gmask_bits) if c.reveal == "final" else None
                        if R_G is not None:
                            extra = [a + r for a, r in zip(extra, R_G)]
                        bound = plan.g_bound + plan.noise_bound + (2**plan.gmask_bits if R_G is not None else 0)
                        enc_G = declare_bound(enc_G.add_plain(extra) if (noise is not None or R_G is not None)
                                              else enc_G, bound)
                        out = rerandomized(pack(enc_G, workers=c.workers), rng=rng, workers=c.workers)
                        if R_G is not None:
                            W_A = [_round_div(c.decay_int * wa * 2**fgx - c.eta_int * r * 2**c.weight_bits, shift)
                                   for wa, r in zip(W_A, R_G)]
                    await send_encrypted(ch, self.bob, out, step="11.E[gradient]", rng=rng, workers=c.workers)
                    done += 1
                    if self.progress is not None:
                        self.progress(done, plan.steps)
            if c.reveal == "final":
                await ch.send(self.bob, W_A, step="12.final-share")
        return {"timings": timer, "counts": counts}

    def _epoch_noise(self, epoch: int, n_batches: int, rng: RandomSource) -> list[list[int]]:
        """One Gaussian release (charged first) of dimension ``batches * d`` on zeros, as
        integers at the gradient scale, plus a uniform dither below the grid step."""
        c, plan = self.config, self.plan
        if self.charger is None:
            raise PrivregValueError("DP training needs a charger (the budget session) for Alice.")
        mech = _dp_mechanism(c, n_batches, plan.dp_sensitivity)
        fgx = plan.fg + c.feature_bits
        step_int = mech_step_int(mech, fgx)
        rel = mech.release(np.zeros(n_batches * c.d), charger=self.charger, rng=rng,
                           label=f"spam training gradients, epoch {epoch + 1}/{c.epochs}")
        grid_units = np.rint(np.asarray(rel.output, dtype=np.float64) / float(mech.grid.step)).astype(np.int64)
        dither_bits = step_int.bit_length() - 1  # the step is a power of two: exact uniform dither
        out = []
        for b in range(n_batches):
            block = grid_units[b * c.d:(b + 1) * c.d]
            dith = uniform_ints(rng, c.d, dither_bits) if dither_bits else [0] * c.d
            out.append([int(z) * step_int + u for z, u in zip(block.tolist(), dith)])
        return out


def _check_packed(obj: Any, pk: Any, count: int, step: str) -> None:
    if not isinstance(obj, PackedCiphertexts) or len(obj) != count:
        raise ProtocolError(f"expected {count} packed values at step {step!r}; got {type(obj).__name__}")
    pk.check_same(obj.public_key, f"the values of step {step!r}")
