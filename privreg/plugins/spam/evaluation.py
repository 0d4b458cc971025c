"""Private evaluation (paper 000, Section 4.3): Carol learns whether ``w . x' > 0`` for her
message ``x'``; Bob learns nothing; Carol learns nothing about ``w`` beyond the label.

Steps, on top of :mod:`privreg.crypto.compare` (no private Paillier code here):

1. Bob encrypts his weights in fixed point, ``W_j = round(w_j 2^fv)`` with ``|w_j| <= w_bound``
   (a public bound), and sends ``E[W]`` (once for any number of messages: the paper's
   "pre-computed E[w]").
2. Carol computes ``E[U] = E[W] . x'`` homomorphically (one multiplication per active
   binary feature).
3-5. Carol masks ``U + 2^l`` with ``r`` uniform in ``[0, 2^(l + 1 + sigma))``; Bob decrypts the
   masked value; a DGK bitwise comparison (Damgard-Geisler-Kroigaard 2007, over Paillier)
   of the low ``l`` bits gives XOR shares of ``[U >= 0]``, and Bob sends his share to Carol
   (``EncryptedSign`` with ``output="holder"``): the paper's step 5 "variant of the secure
   millionaire protocol", with only Carol learning the result.

Label: +1 (spam) when ``U >= 0``, else -1. ``U`` is the inner product of the *quantised*
weights; a message whose exact ``w . x'`` lies within ``||x'||_1 2^-(fv+1)`` of zero may get
the other label than the float computation (:func:`expected_labels` gives the exact
labels of the quantised model; the workflow reports both agreements).

Cost and the comparison length: the DGK part costs ``l + 1`` full-length exponentiations
per message at the holder (Carol), ``l`` the bit length of the public bound on ``|U|``:
``l = bits(ceil(w_bound 2^fv) * l1_bound) + 1``. The sign of ``w . x'`` needs little
precision, so ``fv`` defaults to 8 bits (not the 32 of training) and ``l1_bound`` to the
largest ``||x'||_1`` that the feature map allows: with ``d = 10^4`` binary features and
``w_bound = 4``: ``l = 25`` instead of 40+. One protocol run evaluates all of Carol's
messages, steps 2-5 in batches of ``EvaluationConfig.batch`` messages (bounded memory
and messages, and a progress report per batch), the exponentiations spread over the
worker processes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import scipy.sparse as sp

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource
from privreg.crypto import PaillierKeypair, counting, encrypt
from privreg.crypto.channel import (
    RoleParty,
    recv_encrypted,
    recv_public_key,
    require_input,
    send_encrypted,
    send_public_key,
)
from privreg.crypto.compare import sign_holder, sign_keyholder
from privreg.plugins.spam import message_size as ms
from privreg.plugins.spam.fixed_point import declare_bound
from privreg.plugins.spam.training_protocol import check_key_bits, check_received_key, step_timer

__all__ = ["EvaluationConfig", "PrivateEvaluation", "quantize_weights", "expected_labels"]


@attrs.frozen(kw_only=True)
class EvaluationConfig:
    """Public parameters of the evaluation protocol.

    Args:
        d: number of features.
        w_bound: public bound on ``|w_j|`` (Bob clips to it; choose it from public facts,
            e.g. the training plan's bound, never from ``w`` itself).
        weight_bits: fractional bits ``fv`` of the quantised weights.
        feature_bound: bound on ``|x_j|`` (1: binary).
        l1_bound: public bound on ``||x'||_1`` (default ``d * feature_bound``).
        sigma: statistical security parameter of the comparison's mask.
        workers: processes for the Paillier batches (None: automatic).
        batch: messages per comparison batch (public; both parties must agree).
    """

    d: int = attrs.field(converter=lambda x: v.check_int("d", x, minimum=1))
    w_bound: float = attrs.field(default=4.0)
    weight_bits: int = attrs.field(default=8, converter=lambda x: v.check_int("weight_bits", x, minimum=0))
    feature_bound: int = attrs.field(default=1, converter=lambda x: v.check_int("feature_bound", x, minimum=1))
    l1_bound: int | None = attrs.field(default=None)
    sigma: int = attrs.field(default=40, converter=lambda x: v.check_int("sigma", x, minimum=20))
    workers: int | None = attrs.field(default=None)
    batch: int = attrs.field(default=100, converter=lambda x: v.check_int("batch", x, minimum=1))

    def __attrs_post_init__(self) -> None:
        wb = v.check_real("w_bound", self.w_bound)
        if not (wb > 0 and math.isfinite(wb)):
            raise PrivregValueError(f"w_bound must be a positive finite number; got {self.w_bound}.")
        if self.l1_bound is not None:
            v.check_int("l1_bound", self.l1_bound, minimum=1)

    @property
    def w_bound_int(self) -> int:
        return math.ceil(self.w_bound * 2**self.weight_bits)

    @property
    def u_bound(self) -> int:
        l1 = self.l1_bound if self.l1_bound is not None else self.d * self.feature_bound
        return self.w_bound_int * l1

    @property
    def bits(self) -> int:
        """The comparison length ``l``: ``|U| < 2^l``."""
        return self.u_bound.bit_length() + 1


def quantize_weights(w: Any, config: EvaluationConfig) -> list[int]:
    """``round(w 2^fv)`` clipped to the public bound (Bob's evaluation weights)."""
    arr = np.asarray(w, dtype=np.float64)
    if arr.shape != (config.d,) or not np.all(np.isfinite(arr)):
        raise PrivregValueError(f"w must be {config.d} finite weights; got shape {arr.shape}.")
    q = np.clip(np.rint(arr * 2.0**config.weight_bits), -config.w_bound_int, config.w_bound_int)
    return [int(x) for x in q.astype(np.int64)]


def expected_labels(w: Any, X: Any, config: EvaluationConfig) -> np.ndarray:
    """The labels the protocol computes, in the clear: ``sign`` of the quantised inner products
    (+1 for ``>= 0``)."""
    W = np.array(quantize_weights(w, config), dtype=object)
    M = sp.csr_matrix(X)
    U = [sum(int(M.data[k]) * W[M.indices[k]] for k in range(M.indptr[i], M.indptr[i + 1])) for i in range(M.shape[0])]
    return np.array([1 if u >= 0 else -1 for u in U], dtype=np.int64)


class PrivateEvaluation(Protocol):
    """Section 4.3 for a batch of Carol's messages (rows of ``X``); parties ``bob`` (model,
    keys) and ``carol`` (messages). Outputs: Carol the labels (+1 spam, -1 ham) and her
    timings/counts; Bob his timings/counts only. ``key_bits`` (public, optional; taken
    from ``keypair`` where Bob runs): Carol then refuses a key of another size, and
    :meth:`max_message_bytes` bounds every message. ``progress`` (a
    :data:`~privreg.core.progress.ProgressCallback`, where Carol runs): phase ``"private
    evaluation"``, one unit per message, reported after each batch."""

    name = "spam-private-evaluation"
    caveats = (
        "Semi-honest parties. Bob's weights are quantised to 2^-weight_bits and clipped to the public w_bound, "
        "so a message with |w.x'| within ||x'||_1 2^-(weight_bits+1) of 0 may be labelled differently from the "
        "float model. Security: Paillier semantic security (DCR, plus the DJN short-exponent assumption for "
        "Carol's public-key re-randomisations) and the comparison's statistical mask (2^-sigma per message). "
        "Public: d, the number of messages, w_bound, weight_bits, the bit length l. Cost is l + 1 full "
        "exponentiations per message at Carol (the DGK blinding). "
        "Network: over mutual TLS a network attacker learns only message sizes and timing (d, the number of "
        "messages, l), never content; plaintext mode shows everything. Malicious parties are not covered: a "
        "deviating Bob can return arbitrary labels, or learn Carol's features by encrypting a weight beyond w_bound "
        "(Carol cannot check it, and it defeats her mask); a deviating Carol learns one bit of a linear function of "
        "w of her choice per message (integer weights or an offset instead of a binary message), so a few dozen "
        "messages per feature reveal w; Bob's key is checked on receipt (type, insecure flag, key_bits when given)."
    )

    def __init__(
        self,
        *,
        config: EvaluationConfig,
        count: int,
        keypair: PaillierKeypair | None = None,
        w: Any = None,
        X: Any = None,
        allow_insecure: bool = False,
        rng: RandomSource | None = None,
        bob: str = "bob",
        carol: str = "carol",
        key_bits: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        if not isinstance(config, EvaluationConfig):
            raise PrivregTypeError(f"config must be an EvaluationConfig; got {type(config).__name__}.")
        self.config = config
        self.count = v.check_int("count", count, minimum=1)
        if keypair is not None and not isinstance(keypair, PaillierKeypair):
            raise PrivregTypeError(f"keypair must be a PaillierKeypair; got {type(keypair).__name__}.")
        self.keypair = keypair
        self.key_bits = check_key_bits(key_bits, keypair)
        self.W = None if w is None else quantize_weights(w, config)
        self.X = None
        if X is not None:
            M = sp.csr_matrix(X)
            if M.dtype.kind not in "biu":
                raise PrivregTypeError("X must hold integer (binary or fixed-point) features.")
            if M.shape != (self.count, config.d):
                raise PrivregValueError(f"X has shape {M.shape}; expected ({self.count}, {config.d}).")
            M = sp.csr_matrix(M, dtype=np.int64)
            if M.nnz and int(np.max(np.abs(M.data))) > config.feature_bound:
                raise PrivregValueError(f"a feature exceeds feature_bound={config.feature_bound}.")
            l1 = config.l1_bound if config.l1_bound is not None else config.d * config.feature_bound
            if M.nnz and int(np.max(np.asarray(abs(M).sum(axis=1)))) > l1:
                raise PrivregValueError(f"a message exceeds the public l1_bound={l1}.")
            self.X = M
        self.allow_insecure, self.rng = allow_insecure, rng
        self.bob, self.carol = v.check_name("bob", bob), v.check_name("carol", carol)
        self.progress = check_progress("progress", progress)

    def max_message_bytes(self) -> int | None:
        """With ``key_bits`` known: the largest of Bob's key, ``E[w]`` (``d`` ciphertexts),
        and per batch of ``b = min(count, batch)`` messages the masked values (``b``), the
        DGK bits and their blinded terms (``b (l + 1)`` ciphertexts each, the largest) and
        the result shares (``b`` small integers),
        each bounded as in :mod:`~privreg.plugins.spam.message_size`, plus the margin of
        :func:`~privreg.plugins.spam.message_size.with_margin`. ``None`` without ``key_bits``."""
        if self.key_bits is None:
            return None
        c, kb = self.config, self.key_bits
        b = min(self.count, c.batch)
        sizes = [
            ms.public_key_bytes(kb),
            ms.vector_bytes(c.d, kb),
            ms.vector_bytes(b * (c.bits + 1), kb),
            ms.int_list_bytes(b, 1),
        ]
        return ms.with_margin(max(sizes))

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """The bound of the message of ``step``: Bob's key and ``E[w]`` (Bob to Carol), and
        per comparison batch of ``b`` messages (``eval.sign.*``) the masked values (``b``
        ciphertexts), the DGK bits and blinded terms (``b (l + 1)``) and the result shares
        (``b`` small integers), as in :meth:`max_message_bytes`; 0 for another step, None
        without ``key_bits``."""
        if self.key_bits is None:
            return None
        c, kb = self.config, self.key_bits
        parties = {self.bob, self.carol}
        if sender not in parties or receiver not in parties or sender == receiver:
            return 0
        if step.startswith("eval.sign."):  # per batch of b messages
            b = min(self.count, c.batch)
            if step.endswith(".share"):  # the result shares: b small integers
                return ms.with_margin(ms.int_list_bytes(b, 1))
            if step.endswith(".masked"):  # one masked value per message
                return ms.with_margin(ms.vector_bytes(b, kb))
            return ms.with_margin(ms.vector_bytes(b * (c.bits + 1), kb))  # the DGK bits and blinded terms
        if sender != self.bob:
            return 0
        if step == "eval.public-key":
            return ms.with_margin(ms.public_key_bytes(kb))
        if step == "eval.1.E[w]":
            return ms.with_margin(ms.vector_bytes(c.d, kb))
        return 0

    def learns(self) -> Mapping[str, str]:
        return {
            self.carol: "the label of each of her messages ([w.x' >= 0] of the quantised model), nothing else about w",
            self.bob: "nothing (ciphertexts, a masked value within 2^-sigma of independent of w.x', a uniformly "
            "random comparison share); public: the number of messages",
        }

    def parties(self) -> Sequence[Party]:
        return [RoleParty(self.bob, self._run_bob), RoleParty(self.carol, self._run_carol)]

    async def _run_bob(self, ch: Channel) -> dict[str, Any]:
        kp = require_input(self.keypair, "keypair", self.bob)
        W = require_input(self.W, "w", self.bob)
        c = self.config
        timer = step_timer()
        with counting() as counts:
            await send_public_key(ch, self.carol, kp.public_key, step="eval.public-key")
            with timer.phase("1"):
                enc = encrypt(kp.private_key, W, bound=c.w_bound_int, rng=self.rng, workers=c.workers)
            await send_encrypted(ch, self.carol, enc, step="eval.1.E[w]")
            for lo in range(0, self.count, c.batch):
                with timer.phase("4, 5"):
                    await sign_keyholder(
                        ch,
                        holder=self.carol,
                        private_key=kp.private_key,
                        count=min(self.count, lo + c.batch) - lo,
                        bits=c.bits,
                        sigma=c.sigma,
                        output="holder",
                        step="eval.sign",
                        rng=self.rng,
                        workers=c.workers,
                    )
        return {"timings": timer, "counts": counts}

    async def _run_carol(self, ch: Channel) -> dict[str, Any]:
        X = require_input(self.X, "X", self.carol)
        c = self.config
        timer = step_timer()
        with counting() as counts:
            pk = await recv_public_key(ch, self.bob, step="eval.public-key", allow_insecure=self.allow_insecure)
            check_received_key(pk, self.key_bits, self.bob, "eval.public-key")
            enc = await recv_encrypted(ch, self.bob, step="eval.1.E[w]", public_key=pk, length=c.d)
            bits: list[Any] = []
            shown = PhaseProgress(self.progress, "private evaluation", total=self.count, unit="message")
            for lo in range(0, self.count, c.batch):
                hi = min(self.count, lo + c.batch)
                with timer.phase("2, 3"):
                    u = declare_bound(enc.dot(X[lo:hi], bound=c.feature_bound, workers=c.workers), c.u_bound)
                with timer.phase("4, 5"):
                    got = await sign_holder(
                        ch,
                        keyholder=self.bob,
                        enc=u,
                        bits=c.bits,
                        sigma=c.sigma,
                        output="holder",
                        step="eval.sign",
                        rng=self.rng,
                        workers=c.workers,
                    )
                if got is None or len(got) != hi - lo:
                    raise ProtocolError("the comparison returned no result for Carol")
                bits.extend(got)
                shown.update(hi)
        labels = np.array([1 if b else -1 for b in bits], dtype=np.int64)
        return {"labels": labels, "timings": timer, "counts": counts}
