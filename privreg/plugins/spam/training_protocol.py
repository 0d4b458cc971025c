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
   (at most one multiplication per nonzero binary feature: messages sharing features
   share partial products, :mod:`privreg.crypto.binary_dot`).
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
overflow); the public bounds are derived in
:class:`~privreg.plugins.spam.training_plan.TrainingPlan`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import (
    EncryptedVector,
    PaillierKeypair,
    PaillierPublicKey,
    counting,
    decrypt_packed,
    encrypt,
    pack,
)
from privreg.crypto.channel import (
    RoleParty,
    recv_public_key,
    require_input,
    rerandomized,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.crypto.packing import PackedCiphertexts
from privreg.plugins.spam import message_size as ms
from privreg.plugins.spam.fixed_point import declare_bound, uniform_ints
from privreg.plugins.spam.logistic import check_labels
from privreg.plugins.spam.training_config import TrainingConfig
from privreg.plugins.spam.training_plan import gradient_mechanism, mech_step_int
from privreg.timing import PhaseTimer, process_tree_cpu_seconds

__all__ = ["PrivateTraining", "STEP_ROWS", "check_key_bits", "check_received_key", "step_timer"]

#: Rows of the per-step time table, in the shape of the paper's Table 4.
STEP_ROWS = ("1", "2, 3", "4, 5", "6, 7", "8", "9, 10", "11", "12")


def _round_div(x: int, shift: int) -> int:
    """``round(x / 2^shift)`` (half up) for Python ints."""
    return (x + (1 << (shift - 1))) >> shift if shift > 0 else x


def step_timer() -> PhaseTimer:
    """A timer of the Table 4 rows (:data:`STEP_ROWS`): wall seconds and CPU seconds of
    this process and its Paillier worker processes. Only a party's own computing is
    timed, never its waiting for messages."""
    return PhaseTimer(STEP_ROWS, cpu_clock=process_tree_cpu_seconds)


def check_key_bits(key_bits: Any, keypair: PaillierKeypair | None) -> int | None:
    """The public modulus size: ``key_bits`` (checked), else the size of ``keypair``'s."""
    if key_bits is None:
        return None if keypair is None else int(keypair.public_key.n_bits)
    kb = v.check_int("key_bits", key_bits, minimum=MIN_INSECURE_KEY_BITS)
    if keypair is not None and keypair.public_key.n_bits != kb:
        raise PrivregValueError(
            f"key_bits = {kb} but the keypair's modulus has {keypair.public_key.n_bits} bits; pass the keypair's "
            f"size or leave key_bits out."
        )
    return kb


def check_received_key(pk: PaillierPublicKey, key_bits: int | None, sender: str, step: str) -> None:
    """Refuse a key of another size than the public ``key_bits`` (when given)."""
    if key_bits is not None and pk.n_bits != key_bits:
        raise ProtocolError(
            f"{sender!r} sent a {pk.n_bits}-bit key at step {step!r}; the run's public key_bits is {key_bits}"
        )


# ------------------------------------------------------------------ the protocol


class PrivateTraining(Protocol):
    """The training protocol of paper 000, Section 4.2, in the sound form described in
    the module docstring. Parties ``alice`` (data) and ``bob`` (model, keys).

    Each process passes the inputs of the parties it hosts: Bob ``keypair`` (and ``w0``);
    Alice ``X`` (n x d, binary or fixed-point integers after
    :func:`~privreg.plugins.spam.fixed_point.quantize_features`),
    ``y`` (+-1), and with DP a ``charger``. ``config`` and ``n`` are public and must agree.
    ``key_bits`` (public, optional; taken from ``keypair`` where Bob runs): the size of
    Bob's modulus; Alice then refuses a key of another size, and :meth:`max_message_bytes`
    bounds every message. ``progress`` (a
    :data:`~privreg.core.progress.ProgressCallback`, where Alice runs): phase ``"private
    training"``, one unit per batch of every epoch.
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
        "Alice only re-randomises with public DJN, which adds the DJN short-exponent assumption). Not constant-time. "
        "Network: over mutual TLS a network attacker learns only message sizes and timing (hence n, d, K and the "
        "number of batches), never content; plaintext mode shows everything. Malicious parties are not covered: "
        "Alice can poison the model (false features, labels or gradients), stop the run, or make Bob abort on a "
        "condition of her choice (a bit about w per run); a deviating Bob can learn Alice's features and labels, "
        "since the masks hide only values inside the public bounds and Alice cannot check the bounds of the "
        "encrypted weights and trigonometric values he sends (one encrypted weight of 2^200 exposes that feature of "
        "every message); his key is checked on receipt (type, insecure flag, and key_bits when given)."
    )

    def __init__(
        self,
        *,
        config: TrainingConfig,
        n: int,
        keypair: PaillierKeypair | None = None,
        w0: Any = None,
        X: Any = None,
        y: Any = None,
        charger: Charger | None = None,
        allow_insecure: bool = False,
        rng: RandomSource | None = None,
        alice: str = "alice",
        bob: str = "bob",
        progress: ProgressCallback | None = None,
        key_bits: int | None = None,
    ) -> None:
        if not isinstance(config, TrainingConfig):
            raise PrivregTypeError(f"config must be a TrainingConfig; got {type(config).__name__}.")
        self.config = config
        self.plan = config.plan(n)
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        self.keypair = keypair
        self.key_bits = check_key_bits(key_bits, keypair)
        self.w0 = None if w0 is None else np.asarray(w0, dtype=np.float64)
        if self.w0 is not None and (
            self.w0.shape != (config.d,) or np.max(np.abs(self.w0), initial=0) > config.w0_bound
        ):
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
                l2_bound = config.dp_parameters()[2]
                if l2max > l2_bound * (1 + 1e-12) + (
                    math.sqrt(config.d) * 2.0 ** -(config.feature_bits + 1) if config.feature_bits else 0
                ):
                    raise PrivregValueError(
                        f"a message exceeds the public l2_bound={config.l2_bound} on ||x||_2; cap the features "
                        f"(NgramHasher(max_active=...)) or raise l2_bound"
                    )
            self.X = M
        self.y = None if y is None else check_labels(y, n)
        if config.dp and X is not None and charger is None:
            raise PrivregValueError(
                "DP training needs a charger (the budget session) where Alice runs; pass charger=..."
            )
        self.charger = charger
        self.allow_insecure = allow_insecure
        self.rng = rng
        self.alice, self.bob = v.check_name("alice", alice), v.check_name("bob", bob)
        self.progress = check_progress("progress", progress)

    def _step_bounds(self, kb: int) -> dict[tuple[str, str], int]:
        """``{(step, direction): bound}`` under a ``kb``-bit key, direction ``"b>a"`` (Bob
        to Alice) or ``"a>b"``."""
        c, plan = self.config, self.plan
        k = max(e - s for s, e in plan.batch_bounds)
        m = int(c.link.harmonics.size)
        g = plan.g_bound + plan.noise_bound + (2**plan.gmask_bits if c.reveal == "final" else 0)
        out = {
            ("setup.public-key", "b>a"): ms.public_key_bytes(kb),
            ("1.E[w]", "b>a"): ms.vector_bytes(c.d, kb),
            ("3.masked-inner-products", "a>b"): ms.vector_bytes(
                ms.packed_count(k, plan.u_bound + 2**plan.mask_bits, kb), kb
            ),
            ("5.E[trig]", "b>a"): ms.vector_bytes(2 * m * k, kb),
            ("11.E[gradient]", "a>b"): ms.vector_bytes(ms.packed_count(c.d, g, kb), kb),
        }
        if c.reveal == "final":
            out[("12.final-share", "a>b")] = ms.int_list_bytes(c.d, plan.share_bound)
        return {key: ms.with_margin(x) for key, x in out.items()}

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """The bound of the message of ``step`` (see :meth:`max_message_bytes` for each
        term): from the run's public sizes (``d``, ``n``, the batch size, the harmonics,
        ``key_bits``); 0 for a step Alice and Bob never send that way, None without
        ``key_bits``."""
        if self.key_bits is None:
            return None
        way = "b>a" if (sender, receiver) == (self.bob, self.alice) else "a>b" if sender == self.alice else ""
        return self._step_bounds(self.key_bits).get((step, way), 0)

    def max_message_bytes(self) -> int | None:
        """With ``key_bits`` known: the largest of Bob's key, ``E[w]`` (``d`` ciphertexts),
        the packed masked inner products (``K`` values of ``|U + R| <= u_bound + 2^mask``),
        ``E[trig]`` (``2 m K`` ciphertexts, ``m`` harmonics), the packed gradient (``d``
        values of the plan's gradient bound) and Alice's final share (``d`` integers of
        ``|W_A| <= share_bound``), each bounded as in
        :mod:`~privreg.plugins.spam.message_size`, plus the margin of
        :func:`~privreg.plugins.spam.message_size.with_margin`. ``None`` without ``key_bits``."""
        if self.key_bits is None:
            return None
        c, plan, kb = self.config, self.plan, self.key_bits
        k = max(e - s for s, e in plan.batch_bounds)
        m = int(c.link.harmonics.size)
        g = plan.g_bound + plan.noise_bound + (2**plan.gmask_bits if c.reveal == "final" else 0)
        sizes = [
            ms.public_key_bytes(kb),
            ms.vector_bytes(c.d, kb),
            ms.vector_bytes(ms.packed_count(k, plan.u_bound + 2**plan.mask_bits, kb), kb),
            ms.vector_bytes(2 * m * k, kb),
            ms.vector_bytes(ms.packed_count(c.d, g, kb), kb),
            ms.int_list_bytes(c.d, plan.share_bound) if c.reveal == "final" else 0,
        ]
        return ms.with_margin(max(sizes))

    def learns(self) -> Mapping[str, str]:
        c = self.config
        bob = (
            "the final weights w; the inner products only masked (V = U + R, statistical distance 2^-sigma "
            "each), angles uniform on the circle, and the batch gradients "
            + ("masked by R_G (2^-sigma)" if c.reveal == "final" else "in the clear (as w(t+1) in the paper)")
            + (" with (epsilon, delta)-DP Gaussian noise" if c.dp else "")
            + "; never a feature, label or per-message value. Public: n, d, K, schedule, scales."
        )
        alice = "nothing about w (only ciphertexts under Bob's key); the public parameters"
        return {self.alice: alice, self.bob: bob}

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.alice, self._run_alice), RoleParty(self.bob, self._run_bob)]

    # ------------------------------------------------------------------ Bob

    async def _run_bob(self, ch: Channel) -> dict[str, Any]:
        kp = require_input(self.keypair, "keypair", self.bob)
        c, plan = self.config, self.plan
        sk, pk = kp.private_key, kp.public_key
        timer = step_timer()
        with counting() as counts:
            await send_public_key(ch, self.alice, pk, step="setup.public-key")
            W_B = [0] * c.d if self.w0 is None else [int(x) for x in np.rint(self.w0 * 2**c.weight_bits).astype(object)]
            harmonics = c.link.harmonics
            shift = c.rate_bits + plan.fg + c.feature_bits
            for _epoch in range(c.epochs):
                for s, e in plan.batch_bounds:
                    k = e - s
                    with timer.phase("1"):
                        if max(abs(x) for x in W_B) > plan.share_bound:
                            raise ProtocolError("Bob's weight share left its public bound; the run is aborted")
                        enc_w = encrypt(sk, W_B, bound=plan.share_bound, workers=c.workers)
                    await send_encrypted(ch, self.alice, enc_w, step="1.E[w]", workers=c.workers)
                    packed = await ch.recv(self.alice, step="3.masked-inner-products")
                    with timer.phase("4, 5"):
                        _check_packed(packed, pk, k, "3.masked-inner-products")
                        V = decrypt_packed(sk, packed, workers=c.workers)
                        theta = np.array([int(x) % plan.period_int for x in V], dtype=np.float64)
                        theta *= 2 * np.pi / plan.period_int
                        ang = np.multiply.outer(theta, harmonics)
                        trig = np.concatenate([np.sin(ang), np.cos(ang)], axis=1) * 2.0**c.trig_bits
                        vals = [int(x) for x in np.rint(trig).astype(np.int64).reshape(-1)]
                        enc_t = encrypt(sk, vals, bound=2**c.trig_bits, workers=c.workers)
                    await send_encrypted(ch, self.alice, enc_t, step="5.E[trig]", workers=c.workers)
                    packed_g = await ch.recv(self.alice, step="11.E[gradient]")
                    with timer.phase("12"):
                        _check_packed(packed_g, pk, c.d, "11.E[gradient]")
                        G = decrypt_packed(sk, packed_g, workers=c.workers)
                        W_B = [
                            _round_div(
                                c.decay_int * wb * 2 ** (plan.fg + c.feature_bits)
                                + c.eta_int * int(gj) * 2**c.weight_bits,
                                shift,
                            )
                            for wb, gj in zip(W_B, G)
                        ]
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
        timer = step_timer()
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
            check_received_key(pk, self.key_bits, self.bob, "setup.public-key")
            shown = PhaseProgress(self.progress, "private training", total=plan.steps, unit="batch")
            for epoch in range(c.epochs):
                noise = self._epoch_noise(epoch, n_batches, rng) if c.dp else None
                for b, (s, e) in enumerate(plan.batch_bounds):
                    k = e - s
                    Xb, yb = X[s:e], y[s:e]
                    enc_wb = await ch.recv(self.bob, step="1.E[w]")
                    with timer.phase("2, 3"):
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
                    with timer.phase("6, 7"):
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
                        M = sp.csr_matrix(
                            (np.concatenate([alpha, beta], axis=1).reshape(-1), (rows, cols)), shape=(k, 2 * m * k)
                        )
                        enc_T = enc_t.dot(M, bound=2**c.coef_bits, workers=c.workers)
                        enc_T = declare_bound(enc_T.add_plain([int(t) * half for t in yb]), plan.t_bound)
                    with timer.phase("9, 10"):
                        enc_G = enc_T.dot(XT[:, s:e], bound=c.feature_bound, workers=c.workers)
                    with timer.phase("11"):
                        extra = [0] * c.d
                        if noise is not None:
                            extra = noise[b]
                        R_G = uniform_ints(rng, c.d, plan.gmask_bits) if c.reveal == "final" else None
                        if R_G is not None:
                            extra = [a + r for a, r in zip(extra, R_G)]
                        bound = plan.g_bound + plan.noise_bound + (2**plan.gmask_bits if R_G is not None else 0)
                        enc_G = declare_bound(
                            enc_G.add_plain(extra) if (noise is not None or R_G is not None) else enc_G, bound
                        )
                        out = rerandomized(pack(enc_G, workers=c.workers), rng=rng, workers=c.workers)
                        if R_G is not None:
                            W_A = [
                                _round_div(c.decay_int * wa * 2**fgx - c.eta_int * r * 2**c.weight_bits, shift)
                                for wa, r in zip(W_A, R_G)
                            ]
                    await send_encrypted(ch, self.bob, out, step="11.E[gradient]", rng=rng, workers=c.workers)
                    shown.advance()
            if c.reveal == "final":
                await ch.send(self.bob, W_A, step="12.final-share")
        return {"timings": timer, "counts": counts}

    def _epoch_noise(self, epoch: int, n_batches: int, rng: RandomSource) -> list[list[int]]:
        """One Gaussian release (charged first) of dimension ``batches * d`` on zeros, as
        integers at the gradient scale, plus a uniform dither below the grid step."""
        c, plan = self.config, self.plan
        if self.charger is None:
            raise PrivregValueError("DP training needs a charger (the budget session) for Alice.")
        mech = gradient_mechanism(c, n_batches, plan.dp_sensitivity)
        fgx = plan.fg + c.feature_bits
        step_int = mech_step_int(mech, fgx)
        rel = mech.release(
            np.zeros(n_batches * c.d),
            charger=self.charger,
            rng=rng,
            label=f"spam training gradients, epoch {epoch + 1}/{c.epochs}",
        )
        grid_units = np.rint(np.asarray(rel.output, dtype=np.float64) / float(mech.grid.step)).astype(np.int64)
        dither_bits = step_int.bit_length() - 1  # the step is a power of two: exact uniform dither
        out = []
        for b in range(n_batches):
            block = grid_units[b * c.d : (b + 1) * c.d]
            dith = uniform_ints(rng, c.d, dither_bits) if dither_bits else [0] * c.d
            out.append([int(z) * step_int + u for z, u in zip(block.tolist(), dith)])
        return out


def _check_packed(obj: Any, pk: Any, count: int, step: str) -> None:
    if not isinstance(obj, PackedCiphertexts) or len(obj) != count:
        raise ProtocolError(f"expected {count} packed values at step {step!r}; got {type(obj).__name__}")
    pk.check_same(obj.public_key, f"the values of step {step!r}")
