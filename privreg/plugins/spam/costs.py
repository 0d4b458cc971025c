"""Operation counts against paper 000's Section 5.3, the eq. (2) leakage figure, and the
per-step time table in the shape of Table 4.

Paper 000, Section 5.3, for one run of steps 1-12 on ``n`` messages and ``d`` features:
"3n + 2d encryptions and decryptions" and "4n + 2d" ciphertexts transmitted. Its own list
of steps gives ``3n + d`` encryptions (steps 1, 3, 5, 8) and ``2n + d`` decryptions (steps 4,
8, 12), i.e. ``5n + 2d`` operations; the ``4n + 2d`` ciphertexts match its list (steps 1, 3,
5, 7, 8, 11).

This implementation (see :mod:`~privreg.plugins.spam.training_protocol`), per batch of ``k``
messages with ``m`` sine terms in the link and packing capacities ``c1`` (masked inner
products) and ``c2`` (gradients) values per ciphertext:

- encryptions: ``d + 2 m k`` (Bob: step 1, and the ``2m`` trigonometric values per
  message in step 5); Alice encrypts nothing (her masks are plaintext additions);
- decryptions: ``ceil(k / c1) + ceil(d / c2)`` ciphertexts holding ``k + d`` values;
- re-randomisations (Alice, before sending): ``ceil(k / c1) + ceil(d / c2)``;
- ciphertexts sent: ``d + ceil(k / c1) + 2 m k + ceil(d / c2)``.

Compared with the paper: the sound sigmoid costs ``2m`` encryptions per message instead
of the paper's ``3`` (``m = 6`` by default), the reciprocal round (step 8) disappears, and
packing turns ``n + d`` decryptions into ``ceil(n/c1) + ceil(d/c2)``.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from privreg.plugins.spam.training_plan import TrainingPlan
from privreg.plugins.spam.training_protocol import STEP_ROWS
from privreg.timing import PhaseTimer

__all__ = [
    "paper_counts",
    "predicted_counts",
    "packing_capacity",
    "leakage_bound",
    "feature_entropy",
    "time_table",
    "counts_table",
    "measured_counts",
    "Counts",
]


@attrs.frozen(kw_only=True)
class Counts:
    """Encryptions, decryptions (ciphertexts), values decrypted, re-randomisations and
    ciphertexts sent."""

    encryptions: int
    decryptions: int
    values_decrypted: int
    rerandomizations: int
    ciphertexts_sent: int


def paper_counts(n: int, d: int) -> dict[str, int]:
    """Section 5.3 as printed, and as its step list implies."""
    return {
        "enc+dec (printed 3n+2d)": 3 * n + 2 * d,
        "ciphertexts (printed 4n+2d)": 4 * n + 2 * d,
        "encryptions (step list 3n+d)": 3 * n + d,
        "decryptions (step list 2n+d)": 2 * n + d,
    }


def packing_capacity(key_bits_max_int: int, bound: int, count: int) -> int:
    """Values per packed ciphertext, as :func:`privreg.crypto.packing.pack` lays them out
    (``key_bits_max_int`` = bit length of the key's ``max_int``, no headroom)."""
    slot = max(1, (2 * bound).bit_length())
    return max(1, min((key_bits_max_int - 1) // slot, max(1, count)))


def predicted_counts(plan: TrainingPlan, max_int_bits: int) -> Counts:
    """The counts of one whole training run (all batches and epochs), for a key whose
    ``max_int`` has ``max_int_bits`` bits."""
    c = plan.config
    m = c.link.terms
    enc = dec = vals = rer = sent = 0
    gbound = plan.g_bound + plan.noise_bound + (2**plan.gmask_bits if plan.gmask_bits else 0)
    for s, e in plan.batch_bounds:
        k = e - s
        c1 = packing_capacity(max_int_bits, plan.u_bound + 2**plan.mask_bits, k)
        c2 = packing_capacity(max_int_bits, gbound, c.d)
        p1, p2 = math.ceil(k / c1), math.ceil(c.d / c2)
        enc += c.d + 2 * m * k
        dec += p1 + p2
        vals += k + c.d
        rer += p1 + p2
        sent += c.d + p1 + 2 * m * k + p2
    e = c.epochs
    return Counts(
        encryptions=enc * e,
        decryptions=dec * e,
        values_decrypted=vals * e,
        rerandomizations=rer * e,
        ciphertexts_sent=sent * e,
    )


def feature_entropy(X: Any) -> float:
    """An upper bound (bits) on the entropy of one message's binary feature vector: the sum
    of the binary entropies of the features' document frequencies (exact if features were
    independent; dependence only lowers the true entropy)."""
    import scipy.sparse as sp

    M = sp.csr_matrix(X)
    p = np.bincount(M.indices, minlength=M.shape[1]) / max(M.shape[0], 1)
    p = p[(p > 0) & (p < 1)]
    return float(np.sum(-p * np.log2(p) - (1 - p) * np.log2(1 - p)))


def leakage_bound(K: int, entropy_bits: float) -> dict[str, float]:
    """Paper 000, eq. (2): ``H[x_i | grad] <= (K-1)/K H[x_i] + log2 K`` for a batch gradient
    over ``K`` i.i.d. messages. Returns the bound on the remaining entropy, and the least
    information (``H[x_i]/K - log2 K``, clipped at 0) that the bound allows Bob to gain."""
    remaining = min(entropy_bits, (K - 1) / K * entropy_bits + math.log2(K))
    return {
        "K": K,
        "H[x]": entropy_bits,
        "H[x|grad] <=": remaining,
        "fraction kept >=": remaining / entropy_bits if entropy_bits else 1.0,
        "revealed (bound allows) bits": max(0.0, entropy_bits - remaining),
    }


def _render(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows
    )


_ROW_TEXT = {
    "1": "Bob encrypts w (his share)",
    "2, 3": "Alice: inner products, masks, pack",
    "4, 5": "Bob: decrypt, sin/cos, encrypt",
    "6, 7": "Alice: combine into E[y g(yu)]",
    "8": "(reciprocal: not needed)",
    "9, 10": "Alice: encrypted gradient X^T T",
    "11": "Alice: mask/noise, pack, send",
    "12": "Bob: decrypt, update w",
}


def time_table(timers: dict[str, PhaseTimer], *, docs: int) -> str:
    """Seconds per step (the paper's Table 4 rows), wall and CPU, and per message."""
    rows = [["steps", "what", "wall s", "cpu s", "cpu ms/msg"]]
    tw = tc = 0.0
    for row in STEP_ROWS:
        w = sum(t.wall[row] for t in timers.values())
        c = sum(t.cpu[row] for t in timers.values())
        tw, tc = tw + w, tc + c
        rows.append([row, _ROW_TEXT[row], f"{w:.2f}", f"{c:.2f}", f"{1e3 * c / max(docs, 1):.2f}"])
    rows.append(["Total", "", f"{tw:.2f}", f"{tc:.2f}", f"{1e3 * tc / max(docs, 1):.2f}"])
    return _render(rows)


def measured_counts(op_counts: list[Any], transcript: Any) -> Counts:
    """Counts from the parties' :class:`~privreg.crypto.OpCounts` and the transcript."""
    return Counts(
        encryptions=sum(o.encryptions for o in op_counts),
        decryptions=sum(o.decryptions for o in op_counts),
        values_decrypted=sum(o.values_decrypted for o in op_counts),
        rerandomizations=sum(o.rerandomizations for o in op_counts),
        ciphertexts_sent=transcript.total().ciphertexts,
    )


def counts_table(measured: Counts, predicted: Counts, *, messages: int, d: int, steps: int) -> str:
    """Measured against predicted counts and the paper's formulas, summed over ``steps``
    runs of steps 1-12 that process ``messages`` messages in all (the paper's ``n`` is the
    number of messages of one run)."""
    enc_p, dec_p = 3 * messages + d * steps, 2 * messages + d * steps
    rows = [
        ["quantity", "measured", "this construction", "paper 000, Sec. 5.3"],
        ["encryptions", str(measured.encryptions), str(predicted.encryptions), f"{enc_p} (3n+d per run)"],
        ["decryptions (ciphertexts)", str(measured.decryptions), str(predicted.decryptions), f"{dec_p} (2n+d per run)"],
        ["values decrypted", str(measured.values_decrypted), str(predicted.values_decrypted), ""],
        [
            "enc + dec",
            str(measured.encryptions + measured.decryptions),
            str(predicted.encryptions + predicted.decryptions),
            f"{3 * messages + 2 * d * steps} (printed 3n+2d per run; its steps give 5n+2d)",
        ],
        ["re-randomisations", str(measured.rerandomizations), str(predicted.rerandomizations), ""],
        [
            "ciphertexts sent",
            str(measured.ciphertexts_sent),
            str(predicted.ciphertexts_sent),
            f"{4 * messages + 2 * d * steps} (4n+2d per run)",
        ],
    ]
    return _render(rows)
