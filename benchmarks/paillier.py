"""Paillier per-operation times: privreg's fast layer against naive python-paillier (phe).

    python benchmarks/paillier.py [--bits 2048 3072] [--ops 40]

Both run in the same process on the same keys (privreg's key converted with to_phe()).
Times are CPU seconds of this process from time.process_time, i.e. per-core figures
(privreg runs with workers=1 here); the last section reports wall-clock time of a large
batch on all cores against one core. Values are 32-bit integers; "phe" is the naive
element-wise use of phe.EncryptedNumber (encrypt, +, * int, decrypt, obfuscate).

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
import time

import numpy as np

from privreg.core.randomness import SecureRandom
from privreg.crypto import ObfuscatorPool, decrypt, decrypt_packed, encrypt, generate_paillier_keypair, pack, parallel


def _cpu(fn, count: int) -> float:
    """CPU milliseconds per operation of ``fn()`` doing ``count`` operations."""
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1e3 / count


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(bits: int, ops: int) -> list[tuple[str, str, float | None, float]]:
    rng = SecureRandom()
    gen_start = time.process_time()
    kp = generate_paillier_keypair(n_bits=bits)
    keygen = time.process_time() - gen_start
    pk, sk = kp.public_key, kp.private_key
    ppk, psk = pk.to_phe(), sk.to_phe()
    values = [rng.randbits(31) - 2**30 for _ in range(ops)]
    k32 = [rng.randbits(31) + 1 for _ in range(ops)]
    table_start = time.process_time()
    encrypt(pk, [0], bound=1, workers=1)  # builds the DJN table once per key
    encrypt(sk, [0], bound=1, workers=1)
    tables = time.process_time() - table_start
    rows: list[tuple[str, str, float | None, float]] = []

    phe_enc = _cpu(lambda: [ppk.encrypt(x) for x in values], ops)
    enc = encrypt(pk, values, bound=2**30, workers=1)
    rows.append((f"{bits}", "encrypt djn", phe_enc, _cpu(lambda: encrypt(pk, values, bound=2**30, workers=1), ops)))
    rows.append((f"{bits}", "encrypt std", phe_enc,
                 _cpu(lambda: encrypt(pk, values, bound=2**30, obfuscation="standard", workers=1), ops)))
    rows.append((f"{bits}", "encrypt kh djn", phe_enc, _cpu(lambda: encrypt(sk, values, bound=2**30, workers=1), ops)))
    rows.append((f"{bits}", "encrypt kh std", phe_enc,
                 _cpu(lambda: encrypt(sk, values, bound=2**30, obfuscation="standard", workers=1), ops)))
    pool = ObfuscatorPool(pk, size=ops, workers=1)
    rows.append((f"{bits}", "encrypt pool", phe_enc,
                 _cpu(lambda: encrypt(pk, values, bound=2**30, obfuscation=pool, workers=1), ops)))

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
    print(f"{bits}-bit key: keygen {keygen:.2f} s CPU; DJN tables (public + key holder) {tables:.2f} s CPU, "
          f"once per key")
    return rows


def parallel_rows(bits: int, count: int) -> list[tuple[str, float, float]]:
    kp = generate_paillier_keypair(n_bits=bits)
    vals = list(range(count))
    encrypt(kp.public_key, vals[:1], bound=count, workers=1)
    cores = parallel.usable_cores()
    encrypt(kp.public_key, vals[: 2 * cores], bound=count, workers=cores)  # start the workers
    one = _wall(lambda: encrypt(kp.public_key, vals, bound=count, workers=1))
    enc = encrypt(kp.public_key, vals, bound=count, workers=1)
    many = _wall(lambda: encrypt(kp.public_key, vals, bound=count, workers=cores))
    d1 = _wall(lambda: decrypt(kp.private_key, enc, workers=1))
    dn = _wall(lambda: decrypt(kp.private_key, enc, workers=cores))
    return [(f"encrypt djn x{count}", one, many), (f"decrypt x{count}", d1, dn)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bits", type=int, nargs="+", default=[2048, 3072])
    ap.add_argument("--ops", type=int, default=40, help="operations per measurement")
    ap.add_argument("--batch", type=int, default=1000, help="batch size of the multi-core section")
    args = ap.parse_args()
    rows = []
    for bits in args.bits:
        rows.extend(bench(bits, args.ops))
    table = [("bits", "operation", "phe ms/op", "privreg ms/op", "speed-up")]
    for bits, op, naive, fast in rows:
        table.append((bits, op, f"{naive:.3f}", f"{fast:.3f}", f"{naive / fast:.1f}x"))
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    print("\nCPU time per operation (time.process_time, one core, same keys for both):")
    for r in table:
        print("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    cores = parallel.usable_cores()
    print(f"\nWall-clock seconds for a batch at {args.bits[0]} bits, 1 core against {cores} cores (privreg):")
    for name, one, many in parallel_rows(args.bits[0], args.batch):
        print(f"  {name:<22} 1 core {one:7.2f} s   {cores} cores {many:7.2f} s   ({one / many:.1f}x)")
    parallel.shutdown()


if __name__ == "__main__":
    main()
