"""Paillier per-operation times: privreg's fast layer against naive python-paillier (phe).

    python benchmarks/paillier.py [--bits 2048 3072] [--ops 40] [--batch 1000] [--quick]

Both run in the same process on the same keys (privreg's key converted with to_phe()).
Every row reports wall, CPU and CPU per core (benchmarks/timing.py) per operation; the
first table runs on one core (privreg with workers=1), the last section times a large
batch on one core against all usable cores (the worker pool's CPU is counted). Values
are 32-bit integers; "phe" is the real peer python-paillier (version printed) used
element-wise through phe.EncryptedNumber (encrypt, +, * int, decrypt, obfuscate).
``--quick``: 2048 bits only, 4 operations, a batch of 64.

privreg rows:
  encrypt djn      public-key encryption, DJN fixed-base table (DCR + short-exponent assumption)
  encrypt std      public-key encryption, r^n with r uniform (DCR only)
  encrypt kh djn   key-holder encryption, DJN tables modulo p^2 and q^2 (CRT)
  encrypt kh std   key-holder encryption, r^n by the CRT
  encrypt pool     online cost with a precomputed one-time obfuscator pool
  decrypt          CRT decryption of one ciphertext
  packed decrypt   per value: pack (Horner) + one CRT decryption per full ciphertext
  add, mul int     homomorphic addition, multiplication by a 32-bit plaintext integer
  rerandomize      multiply by a fresh DJN obfuscator
"""

from __future__ import annotations

import argparse
import importlib.metadata

import numpy as np
from timing import Timing, columns, header, measure

from privreg.core.randomness import SecureRandom
from privreg.crypto import ObfuscatorPool, decrypt, decrypt_packed, encrypt, generate_paillier_keypair, pack, parallel


def _cpu(fn, count: int) -> Timing:
    """Milliseconds per operation of ``fn()`` doing ``count`` operations on one core."""
    return measure(fn, cores=1)[0].scaled(1e3 / count)


def bench(bits: int, ops: int) -> list[tuple[str, str, Timing, Timing]]:
    rng = SecureRandom()
    keygen, kp = measure(lambda: generate_paillier_keypair(n_bits=bits))
    pk, sk = kp.public_key, kp.private_key
    ppk, psk = pk.to_phe(), sk.to_phe()
    values = [rng.randbits(31) - 2**30 for _ in range(ops)]
    k32 = [rng.randbits(31) + 1 for _ in range(ops)]
    tables, _ = measure(
        lambda: (
            encrypt(pk, [0], bound=1, workers=1),  # builds the DJN tables once per key
            encrypt(sk, [0], bound=1, workers=1),
        )
    )
    rows: list[tuple[str, str, Timing, Timing]] = []

    phe_enc = _cpu(lambda: [ppk.encrypt(x) for x in values], ops)
    enc = encrypt(pk, values, bound=2**30, workers=1)
    rows.append((f"{bits}", "encrypt djn", phe_enc, _cpu(lambda: encrypt(pk, values, bound=2**30, workers=1), ops)))
    rows.append(
        (
            f"{bits}",
            "encrypt std",
            phe_enc,
            _cpu(lambda: encrypt(pk, values, bound=2**30, obfuscation="standard", workers=1), ops),
        )
    )
    rows.append((f"{bits}", "encrypt kh djn", phe_enc, _cpu(lambda: encrypt(sk, values, bound=2**30, workers=1), ops)))
    rows.append(
        (
            f"{bits}",
            "encrypt kh std",
            phe_enc,
            _cpu(lambda: encrypt(sk, values, bound=2**30, obfuscation="standard", workers=1), ops),
        )
    )
    pool = ObfuscatorPool(pk, size=ops, workers=1)
    rows.append(
        (
            f"{bits}",
            "encrypt pool",
            phe_enc,
            _cpu(lambda: encrypt(pk, values, bound=2**30, obfuscation=pool, workers=1), ops),
        )
    )

    penc = [ppk.encrypt(x) for x in values]
    phe_dec = _cpu(lambda: [psk.decrypt(c) for c in penc], ops)
    rows.append((f"{bits}", "decrypt", phe_dec, _cpu(lambda: decrypt(sk, enc, workers=1), ops)))
    many = encrypt(pk, values * 8, bound=2**30, workers=1)  # enough values to fill packed ciphertexts

    def packed() -> None:
        decrypt_packed(sk, pack(many, workers=1), workers=1)

    rows.append((f"{bits}", "packed decrypt", phe_dec, _cpu(packed, len(many))))

    reps = 20
    phe_add = _cpu(lambda: [[a + b for a, b in zip(penc, penc)] for _ in range(reps)], ops * reps)
    rows.append((f"{bits}", "add", phe_add, _cpu(lambda: [enc + enc for _ in range(reps)], ops * reps)))
    k_arr = np.array(k32, dtype=np.int64)
    phe_mul = _cpu(lambda: [a * k for a, k in zip(penc, k32)], ops)
    rows.append((f"{bits}", "mul int", phe_mul, _cpu(lambda: enc.mul_plain(k_arr, workers=1), ops)))

    def phe_obf() -> None:
        for c in penc:
            c.obfuscate()
            c.ciphertext()

    rows.append((f"{bits}", "rerandomize", _cpu(phe_obf, ops), _cpu(lambda: enc.rerandomize(workers=1), ops)))
    print(
        f"{bits}-bit key: keygen {keygen.wall:.2f} s wall, {keygen.cpu:.2f} s CPU; DJN tables (public + key "
        f"holder) {tables.wall:.2f} s wall, {tables.cpu:.2f} s CPU, once per key (one core)"
    )
    return rows


def parallel_rows(bits: int, count: int) -> list[tuple[str, Timing, Timing]]:
    kp = generate_paillier_keypair(n_bits=bits)
    vals = list(range(count))
    encrypt(kp.public_key, vals[:1], bound=count, workers=1)
    cores = parallel.usable_cores()
    encrypt(kp.public_key, vals[: 2 * cores], bound=count, workers=cores)  # start the workers
    one, enc = measure(lambda: encrypt(kp.public_key, vals, bound=count, workers=1))
    many, _ = measure(lambda: encrypt(kp.public_key, vals, bound=count, workers=cores), cores=cores)
    d1, _ = measure(lambda: decrypt(kp.private_key, enc, workers=1))
    dn, _ = measure(lambda: decrypt(kp.private_key, enc, workers=cores), cores=cores)
    return [(f"encrypt djn x{count}", one, many), (f"decrypt x{count}", d1, dn)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bits", type=int, nargs="+", default=[2048, 3072])
    ap.add_argument("--ops", type=int, default=40, help="operations per measurement")
    ap.add_argument("--batch", type=int, default=1000, help="batch size of the multi-core section")
    ap.add_argument("--quick", action="store_true", help="2048 bits only, 4 operations, a batch of 64")
    args = ap.parse_args()
    if args.quick:
        args.bits, args.ops, args.batch = [2048], 4, 64
    rows = []
    for bits in args.bits:
        rows.extend(bench(bits, args.ops))
    peer = f"phe {importlib.metadata.version('phe')}"
    table = [
        (
            "bits",
            "operation",
            *(f"{peer} {c}" for c in columns("ms/op")),
            *(f"privreg {c}" for c in columns("ms/op")),
            "speed-up (CPU / core)",
        )
    ]
    for bits, op, naive, fast in rows:
        table.append((bits, op, *naive.cells(), *fast.cells(), f"{naive.cpu_per_core / fast.cpu_per_core:.1f}x"))
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    print()
    print(
        header(
            f"Time per operation, same keys for both; baseline: the real peer python-paillier ({peer}), element-wise",
            processes=1,
            cores=1,
        )
    )
    for r in table:
        print("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    cores = parallel.usable_cores()
    print()
    print(
        header(
            f"A batch at {args.bits[0]} bits, privreg on 1 core against its worker pool on {cores} cores",
            processes=f"1, or 1 + {cores} workers",
            cores=f"1 or {cores}",
        )
    )
    for name, one, many in parallel_rows(args.bits[0], args.batch):
        for label, t in (("1 core", one), (f"{cores} cores", many)):
            cells = "   ".join(f"{c} {v}" for c, v in zip(columns("s"), t.cells(".2f")))
            print(f"  {name:<22} {label:<8} {cells}")
        print(f"  {name:<22} wall 1 core / wall {cores} cores: {one.wall / many.wall:.1f}x")
    parallel.shutdown()


if __name__ == "__main__":
    main()
