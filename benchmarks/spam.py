"""Private training of paper 000: milliseconds per message per training step, privreg's
protocol against a naive element-wise python-paillier (phe) implementation of the same step.

    python benchmarks/spam.py [--n 1000] [--d 10000] [--bits 2048] [--naive-docs 12] [--naive-coords 200]
                              [--rounds 3] [--quick]

One training step = steps 1-12 of privreg.plugins.spam.training_protocol on one batch of ``n``
messages with ``d`` binary hashed 4-gram features (real SpamAssassin messages when
../shared/data/spamassassin.tar.gz exists, else synthetic ones of the same density),
at ``bits``-bit keys, reveal="final". Both implementations run in the same process on the
same key (privreg's key converted with to_phe()).

Measurements (benchmarks/timing.py; every row has wall, CPU and CPU per core):
  - privreg: wall time and CPU seconds of this process and its worker processes, with
    the crypto layer's worker pool on all usable cores; CPU per core divides by those
    cores (a per-core cost, not a wall time).
  - baseline: the real peer python-paillier (phe, version printed) used element-wise:
    the same step with one phe.EncryptedNumber per value, one process on one core: phe
    encryption (r^n mod n^2) of Bob's weights and of the trigonometric values, phe `+`
    for every inner-product term and every gradient term, phe `*` for Alice's
    coefficients, one phe decryption per value (no packing), obfuscate() before sending.
    Its per-message part is measured on ``--naive-docs`` messages and its per-coordinate
    part (encrypting d weights, obfuscating and decrypting d gradients) on
    ``--naive-coords`` coordinates; both are linear, so the per-message time at ``n`` is
    per-message + per-coordinate * d / n, for wall and CPU time alike.

Rounds: privreg's step then the phe baseline, ``--rounds`` times in turn (the load of a
shared machine changes within minutes); every round's rows and speed-ups are printed and
the median CPU speed-up is the result (target, issue #32: >= 12x in CPU per message).

Target (issue #8): at most 30 ms per message on 2 cores at 2048 bits, d = 10^4, n = 1000,
judged by the measured wall time (inflated on a loaded machine: the load is printed);
naive phe is about 300 ms. The paper's 41 s per message at 256-bit keys (2011 hardware,
Table 2) is the historical anchor. ``--quick``: n = 40, d = 400, 1024-bit (insecure,
benchmark-only) keys, 2 naive messages and 10 naive coordinates, one round.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os

import numpy as np
import scipy.sparse as sp
from timing import columns, header, measure, timed

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import decrypt, encrypt, generate_paillier_keypair, parallel
from privreg.mpc.runtime import run_protocol
from privreg.plugins.spam.corpus import default_corpus_path, labels_of, paper_split, read_corpus
from privreg.plugins.spam.costs import time_table
from privreg.plugins.spam.features import NgramHasher, binary_csr
from privreg.plugins.spam.fixed_point import uniform_ints
from privreg.plugins.spam.training_config import TrainingConfig
from privreg.plugins.spam.training_protocol import PrivateTraining


def _data(n: int, d: int) -> tuple[sp.csr_matrix, np.ndarray, str]:
    path = default_corpus_path()
    if path is not None:
        tr, _ = paper_split(read_corpus(path))
        msgs = tr[:n]
        return NgramHasher(space=d).transform(msgs), labels_of(msgs), f"SpamAssassin ({path})"
    gen = np.random.default_rng(0)  # benchmark data only
    rows = [np.sort(gen.choice(d, size=int(gen.integers(d // 10, d // 3)), replace=False)) for _ in range(n)]
    return binary_csr(rows, d), np.where(gen.random(n) < 0.3, 1, -1), "synthetic (density 10-33%)"


def fast_step(X, y, kp, d: int) -> dict:
    cfg = TrainingConfig(d=d, batch_size=X.shape[0], epochs=1)
    n = X.shape[0]
    # fixed-base tables are built once per key and process: warm this process and the workers
    warm = encrypt(kp.private_key, list(range(2 * parallel.PARALLEL_MIN_BATCH)), bound=10**6)
    decrypt(kp.private_key, warm.rerandomize())
    encrypt(kp.private_key, [0], bound=1, workers=1)
    warm.rerandomize(workers=1)
    clock, res = measure(
        lambda: run_protocol(
            PrivateTraining(config=cfg, n=n, keypair=kp, X=X, y=y, allow_insecure=kp.public_key.insecure)
        ),
        cores=parallel.usable_cores(),
    )
    timers = {p: res.outputs[p]["timings"] for p in ("alice", "bob")}
    return {"time": clock, "table": time_table(timers, docs=n), "timers": timers, "terms": cfg.link.terms, "cfg": cfg}


def naive_step(X, y, kp, d: int, cfg: TrainingConfig, docs: int, coords: int) -> dict:
    import phe

    ppk, psk = kp.public_key.to_phe(), kp.private_key.to_phe()
    n2 = int(kp.public_key.n2)
    rng = InsecureReproducibleRandom(seed=1)
    harmonics, coef = cfg.link.harmonics, cfg.link.coefficients
    plan = cfg.plan(X.shape[0])
    fast_w = encrypt(kp.private_key, [rng.randbits(40) for _ in range(d)], bound=2**40, workers=1)
    enc_w = [phe.EncryptedNumber(ppk, int(c), 0) for c in fast_w.ciphertexts]  # same ciphertexts, phe objects

    # per-coordinate part: Bob encrypts a weight; Alice obfuscates a gradient; Bob decrypts it
    with timed(cores=1) as clock:
        for _ in range(coords):
            e = ppk.encrypt(rng.randbits(60))
            e.obfuscate()
            psk.decrypt(e)
    per_coord = clock.timing.scaled(1 / coords)

    # per-message part on `docs` messages
    grad = [ppk.encrypt(0) for _ in range(d)]
    clock = timed(cores=1).__enter__()
    for i in range(docs):
        idx = X.indices[X.indptr[i] : X.indptr[i + 1]]
        u = enc_w[idx[0]]
        for j in idx[1:]:
            u = u + enc_w[j]  # step 2: one phe addition per active feature
        r = uniform_ints(rng, 1, plan.mask_bits)[0]
        masked = u + r  # step 3
        masked.obfuscate()
        v = psk.decrypt(masked)  # step 4: one decryption per value
        theta = 2 * math.pi * (v % plan.period_int) / plan.period_int
        trig = [ppk.encrypt(int(round(math.sin(k * theta) * 2**cfg.trig_bits))) for k in harmonics] + [
            ppk.encrypt(int(round(math.cos(k * theta) * 2**cfg.trig_bits))) for k in harmonics
        ]  # step 5
        phi = 2 * math.pi * (r % plan.period_int) / plan.period_int
        a = [int(round(b * math.cos(k * phi) * 2**cfg.coef_bits)) for k, b in zip(harmonics, coef)]
        bb = [int(round(-b * math.sin(k * phi) * 2**cfg.coef_bits)) for k, b in zip(harmonics, coef)]
        t = trig[0] * a[0]
        for c, k in zip(trig[1:], a[1:] + bb):
            t = t + c * k  # steps 6-7
        t = t + int(y[i]) * 2 ** (cfg.trig_bits + cfg.coef_bits - 1)
        for j in idx:
            grad[j] = grad[j] + t  # steps 9-10: one phe addition per active feature
    clock.__exit__()
    per_doc = clock.timing.scaled(1 / docs)
    assert n2 > 0
    return {"per_doc": per_doc, "per_coord": per_coord}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--d", type=int, default=10_000)
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--naive-docs", type=int, default=12)
    ap.add_argument("--naive-coords", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of privreg then phe (median reported)")
    ap.add_argument("--quick", action="store_true", help="n 40, d 400, 1024-bit keys, 2 docs, 10 coords naive")
    args = ap.parse_args()
    if args.quick:
        args.n, args.d, args.bits, args.naive_docs, args.naive_coords = 40, 400, 1024, 2, 10
        args.rounds = 1
    X, y, source = _data(args.n, args.d)
    print(
        f"data: {source}; n = {args.n} messages, d = {args.d} features, "
        f"{X.nnz / args.n:.0f} active features per message; key {args.bits} bits; "
        f"{parallel.usable_cores()} usable cores"
    )
    kp = generate_paillier_keypair(n_bits=args.bits, insecure_allow_small_keys=args.bits < 2048)
    n, d = args.n, args.d
    rounds = []  # (privreg ms/msg, phe ms/msg, privreg step, phe parts, load average at the round's start)
    for _ in range(max(1, args.rounds)):
        load = os.getloadavg()[0]
        fast = fast_step(X, y, kp, args.d)
        naive = naive_step(X, y, kp, args.d, fast["cfg"], args.naive_docs, args.naive_coords)
        naive_ms = (naive["per_doc"] + naive["per_coord"].scaled(d / n)).scaled(1e3)
        rounds.append((fast["time"].scaled(1e3 / n), naive_ms, fast, naive, load))
    order = sorted(range(len(rounds)), key=lambda r: rounds[r][1].cpu / rounds[r][0].cpu)
    fast_ms, naive_ms, fast, naive, _ = rounds[order[len(order) // 2]]  # the round of median CPU speed-up
    print("\nprivreg, one training step, time per step (paper 000 Table 4 rows; the median round):")
    print(fast["table"])
    cores = fast["time"].cores
    peer = f"phe {importlib.metadata.version('phe')}"
    print()
    print(
        header(
            f"One training step per message, {len(rounds)} interleaved round(s) (privreg then phe, same key, "
            f"same process)",
            processes=f"privreg 1 + {cores} workers, {peer} 1",
            cores=f"privreg {cores}, {peer} 1",
        )
    )
    cols = columns("ms/msg")
    print(f"{'round':<6}{'implementation':<56}{cols[0]:>14}{cols[1]:>14}{cols[2]:>20}{'load avg':>10}")
    for r, (f_ms, p_ms, _, _, load) in enumerate(rounds, 1):
        for name, t in (
            (f"privreg (packing, DJN/CRT, shared products), {cores} cores", f_ms),
            (f"naive phe: real peer {peer}, element-wise, 1 core", p_ms),
        ):
            w, c, pc = t.cells(".1f")
            print(f"{r:<6}{name:<56}{w:>14}{c:>14}{pc:>20}{load:>10.1f}")
        cpu_x, wall_x = p_ms.cpu / f_ms.cpu, p_ms.wall / f_ms.wall
        print(f"{'':<6}{'speed-up over naive phe (CPU, wall)':<56}{cpu_x:>13.1f}x{wall_x:>13.1f}x")
    print(
        f"  {peer} parts (median round): {1e3 * naive['per_doc'].cpu:.1f} ms CPU per message + "
        f"{1e3 * naive['per_coord'].cpu:.2f} ms CPU per coordinate x d/n = {d / n:g}"
    )
    cpu_ratios = sorted(p.cpu / f.cpu for f, p, *_ in rounds)
    wall_ratios = sorted(p.wall / f.wall for f, p, *_ in rounds)
    print(
        f"\nspeed-up over naive phe, median of {len(rounds)} round(s): CPU {naive_ms.cpu / fast_ms.cpu:.1f}x "
        f"(range {cpu_ratios[0]:.1f}-{cpu_ratios[-1]:.1f}x); wall {wall_ratios[len(wall_ratios) // 2]:.1f}x "
        f"(range {wall_ratios[0]:.1f}-{wall_ratios[-1]:.1f}x); target (issue #32): >= 12x CPU per message "
        f"(load average now {os.getloadavg()[0]:.1f})"
    )
    print(
        f"target <= 30 ms/msg wall on 2 cores: {'met' if fast_ms.wall <= 30 else 'NOT met'} "
        f"({fast_ms.wall:.1f} ms/msg wall on {cores} cores of this shared machine; "
        f"CPU {fast_ms.cpu:.1f} ms/msg, {fast_ms.cpu_per_core:.1f} ms/msg per core, not a wall time)"
    )
    rows = {}
    for row in fast["timers"]["alice"].cpu:
        rows[row] = sum(t.cpu[row] for t in fast["timers"].values())
    top = sorted(rows.items(), key=lambda kv: -kv[1])[:3]
    print("dominant steps (CPU s): " + ", ".join(f"{k}: {v:.1f}" for k, v in top))


if __name__ == "__main__":
    main()
