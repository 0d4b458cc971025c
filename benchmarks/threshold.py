"""Secure threshold decisions on packed Paillier ciphertexts (privreg.crypto.threshold):
CPU per decision at each party and wall time per batch, against the DGK-over-Paillier
encrypted sign test of privreg.crypto.compare.

    python benchmarks/threshold.py [--decisions 2000] [--baseline 20] [--bits 14] [--key-bits 2048]
                                   [--workers 1 2] [--ablation 400] [--quick]

Both parties run in this process over the in-memory transport (messages are encoded and
decoded as on a network). A party's CPU is the CPU (this process and the worker pool, see
timing.py) spent while it runs: the transport charges the time between two of its events
(a party sending, a message decoded for its receiver, a party receiving, a party
finishing) to the party that ran, encoding to the sender and decoding to the receiver.

Rows:
  privreg.crypto.threshold           this module: DGK cryptosystem (2048-bit n, t = 160), digits
                                     of 3 bits, slots of bits + 41 bits, 37 per ciphertext
  privreg.crypto.compare (DGK over Paillier)
                                     the baseline: EncryptedSign, the encrypted sign test of
                                     [x - c >= 0] with a bitwise DGK comparison over Paillier
                                     (blinding by |n|-bit exponents), on a smaller batch

The inputs are dense: every slot of every ciphertext is wanted. ``--ablation N`` adds a
table of the digit width (privreg.crypto.threshold.DIGIT_BITS) on N decisions, one core,
and a table of the primitives. ``--quick``: 64 decisions, a baseline of 2, no ablation
(2048-bit keys still; key generation takes a few seconds).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

import numpy as np
from timing import cpu_now, header, usable_cores

import privreg.crypto.threshold as thr
from privreg.core.protocol import Protocol
from privreg.core.randomness import SecureRandom
from privreg.crypto import generate_paillier_keypair, parallel
from privreg.crypto.channel import RoleParty, recv_public_key, send_public_key
from privreg.crypto.compare import EncryptedSign
from privreg.crypto.dgk import generate_dgk_keypair, recv_dgk_public_key, send_dgk_public_key
from privreg.crypto.vector import encrypt
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport

BASELINE = "privreg.crypto.compare (DGK over Paillier)"
OURS = "privreg.crypto.threshold"


class TimedTransport(InMemoryTransport):
    """In-memory transport that charges CPU to the party that ran (module docstring)."""

    def __init__(self) -> None:
        super().__init__(keep_payloads=False)
        self.cpu: dict[str, float] = defaultdict(float)
        self._last = 0.0

    def _charge(self, party: str) -> None:
        now = cpu_now()
        self.cpu[party] += now - self._last
        self._last = now

    async def start(self, parties: Any, *, max_message_bytes: int | None = None) -> None:
        await super().start(parties, max_message_bytes=max_message_bytes)
        self.cpu.clear()
        self._last = cpu_now()

    def _deliver(self, *, sender: str, receiver: str, step: str, data: bytes) -> None:
        self._charge(sender)  # the sender's work and the encoding
        super()._deliver(sender=sender, receiver=receiver, step=step, data=data)
        self._charge(receiver)  # decoding the receiver's copy

    async def send(self, *, sender: str, receiver: str, step: str, payload: Any) -> None:
        await super().send(sender=sender, receiver=receiver, step=step, payload=payload)
        self._charge(sender)

    async def recv(self, *, receiver: str, sender: str, step: str | None) -> Any:
        self._charge(receiver)
        out = await super().recv(receiver=receiver, sender=sender, step=step)
        self._charge(receiver)
        return out

    def finished(self, party: str, error: BaseException | None = None) -> None:
        self._charge(party)
        super().finished(party, error)


class Threshold(Protocol):
    """The two roles with their key exchange (Paillier and DGK public keys first)."""

    name = "threshold-benchmark"
    caveats = "benchmark wrapper of privreg.crypto.threshold (see its docstring)"

    def __init__(
        self, *, kp: Any, dk: Any, cts: list[Any], wanted: list[tuple[int, int]], bits: int, c: int, workers: int
    ):
        self.kp, self.dk, self.cts, self.wanted, self.bits, self.c, self.workers = kp, dk, cts, wanted, bits, c, workers

    def learns(self) -> dict[str, str]:
        return {"keyholder": "the decisions", "holder": "nothing"}

    def parties(self) -> list[RoleParty]:
        return [RoleParty("holder", self._holder), RoleParty("keyholder", self._keyholder)]

    async def _keyholder(self, ch: Any) -> Any:
        await send_public_key(ch, "holder", self.kp.public_key, step="thr.pk")
        await send_dgk_public_key(ch, "holder", self.dk.public_key, step="thr.dgk-pk")
        return await thr.threshold_keyholder(
            ch,
            holder="holder",
            private_key=self.kp.private_key,
            dgk_private_key=self.dk.private_key,
            count=len(self.cts),
            wanted=self.wanted,
            bits=self.bits,
            threshold=self.c,
            step="thr",
            workers=self.workers,
        )

    async def _holder(self, ch: Any) -> None:
        pk = await recv_public_key(ch, "keyholder", step="thr.pk")
        dk = await recv_dgk_public_key(ch, "keyholder", step="thr.dgk-pk")
        await thr.threshold_holder(
            ch,
            keyholder="keyholder",
            ciphertexts=self.cts,
            public_key=pk,
            dgk_key=dk,
            wanted=self.wanted,
            bits=self.bits,
            threshold=self.c,
            step="thr",
            workers=self.workers,
        )


def inputs(kp: Any, decisions: int, bits: int, rng: SecureRandom) -> tuple[list[Any], list[tuple[int, int]], list[int]]:
    slot_bits, per = thr.slot_layout(kp.public_key, bits=bits)
    xs = [rng.randbits(bits) for _ in range(decisions)]
    rows = [xs[i : i + per] for i in range(0, decisions, per)]
    packed = [sum(x << (r * slot_bits) for r, x in enumerate(row)) for row in rows]
    vec = encrypt(kp.public_key, packed, bound=(1 << (per * slot_bits)) - 1)
    wanted = [(i, r) for i, row in enumerate(rows) for r in range(len(row))]
    return [int(c) for c in vec.ciphertexts], wanted, xs


def run_ours(
    kp: Any, dk: Any, decisions: int, bits: int, workers: int, rng: SecureRandom
) -> tuple[float, float, float]:
    cts, wanted, xs = inputs(kp, decisions, bits, rng)
    c = rng.randbelow((1 << bits) + 1)
    transport = TimedTransport()
    wall = time.perf_counter()
    res = run_protocol(
        Threshold(kp=kp, dk=dk, cts=cts, wanted=wanted, bits=bits, c=c, workers=workers), transport=transport
    )
    wall = time.perf_counter() - wall
    got = res.outputs["keyholder"]
    assert np.array_equal(got, np.array([x >= c for x in xs])), "wrong decisions"
    return transport.cpu["holder"], transport.cpu["keyholder"], wall


def run_baseline(kp: Any, decisions: int, bits: int, workers: int, rng: SecureRandom) -> tuple[float, float, float]:
    xs = [rng.randbits(bits) for _ in range(decisions)]
    c = rng.randbelow(1 << bits)  # below 2^bits, so that |x - c| < 2^bits as the sign test needs
    proto = EncryptedSign(
        bits=bits,
        rows=decisions,
        output="keyholder",
        keypair=kp,
        u=[1],
        u_bound=1,
        matrix=np.array([[x - c] for x in xs], dtype=object),
        matrix_bound=(1 << bits) - 1,
        workers=workers,
    )
    transport = TimedTransport()
    wall = time.perf_counter()
    res = run_protocol(proto, transport=transport)
    wall = time.perf_counter() - wall
    assert res.outputs["keyholder"] == [int(x >= c) for x in xs], "wrong baseline decisions"
    return transport.cpu["holder"], transport.cpu["keyholder"], wall


def row(name: str, workers: int, decisions: int, holder: float, keyholder: float, wall: float) -> list[str]:
    per = 1e3 / decisions
    return [
        name,
        str(workers),
        str(decisions),
        f"{holder * per:.3f}",
        f"{keyholder * per:.3f}",
        f"{(holder + keyholder) * per:.3f}",
        f"{wall:.2f}",
        f"{wall * per:.3f}",
    ]


def table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


HEAD = [
    "implementation",
    "workers",
    "decisions",
    "holder CPU ms/dec",
    "key holder CPU ms/dec",
    "total CPU ms/dec",
    "wall s",
    "wall ms/dec",
]


def primitives(kp: Any, dk: Any, rng: SecureRandom, count: int = 400) -> str:
    """Per-operation CPU of the building blocks, one core."""
    pk, sk = dk.public_key, dk.private_key
    psk = kp.private_key
    bits01 = [rng.randbits(1) for _ in range(count)]
    sk.encrypt(bits01[:2], workers=1)  # build the tables once
    cts = pk.encrypt(bits01, workers=1)
    out = []

    def per_op(name: str, fn: Any, ops: int) -> None:
        start = cpu_now()
        fn()
        out.append([name, f"{(cpu_now() - start) * 1e6 / ops:.1f}"])

    per_op("DGK encrypt, key holder (CRT)", lambda: sk.encrypt(bits01, workers=1), count)
    per_op("DGK encrypt, public (h^r table)", lambda: pk.encrypt(bits01, workers=1), count)
    per_op("DGK re-randomise (h^r table)", lambda: pk.rerandomize(cts, workers=1), count)
    per_op("DGK zero test (c^vp mod p)", lambda: sk.is_zero(cts, workers=1), count)
    pcts = [int(c) for c in encrypt(kp.public_key, list(range(40)), bound=40).ciphertexts]
    per_op("Paillier CRT decryption (per ciphertext)", lambda: psk.raw_decrypt(pcts, workers=1), len(pcts))
    import gmpy2

    per_op(
        "Paillier decryption mod p only (per ciphertext)",
        lambda: [gmpy2.powmod(c, psk.p - 1, psk.p2) for c in pcts],
        len(pcts),
    )
    return table(out, ["operation (2048-bit keys, t = 160, one core)", "CPU us/op"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decisions", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=20, help="decisions of the baseline (much slower)")
    ap.add_argument("--bits", type=int, default=14)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--ablation", type=int, default=400, help="decisions of the digit-width table (0: none)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.decisions, args.baseline, args.ablation = 64, 2, 0
    rng = SecureRandom()
    t0 = time.perf_counter()
    kp = generate_paillier_keypair(n_bits=args.key_bits)
    dk = generate_dgk_keypair(n_bits=args.key_bits)
    print(f"key generation: Paillier and DGK ({args.key_bits} bits, t = 160): {time.perf_counter() - t0:.1f} s")
    workers = [w for w in args.workers if w <= usable_cores()] or [1]
    run_ours(kp, dk, 8, args.bits, 1, rng)  # warm-up: fixed-base tables of this process
    rows = []
    for w in workers:
        if w > 1:
            run_ours(kp, dk, 600, args.bits, w, rng)  # warm-up: the worker pool and its tables
        rows.append(row(OURS, w, args.decisions, *run_ours(kp, dk, args.decisions, args.bits, w, rng)))
    for w in workers:
        rows.append(row(BASELINE, w, args.baseline, *run_baseline(kp, args.baseline, args.bits, w, rng)))
    print()
    print(
        header(
            f"Threshold decisions [x >= c], bits={args.bits}, sigma=40, {args.key_bits}-bit Paillier and DGK keys",
            processes=f"1 + up to {max(workers)} workers",
            cores=f"{', '.join(map(str, workers))} (column workers)",
        )
    )
    print(table(rows, HEAD))
    parallel.shutdown()
    if args.ablation:
        print()
        print("Digit width of the DGK comparison (privreg.crypto.threshold.DIGIT_BITS), workers=1")
        abl = []
        default = thr.DIGIT_BITS
        try:
            for k in (1, 2, 3, 4):
                thr.DIGIT_BITS = k
                abl.append(
                    row(f"DIGIT_BITS={k}", 1, args.ablation, *run_ours(kp, dk, args.ablation, args.bits, 1, rng))
                )
        finally:
            thr.DIGIT_BITS = default
        print(table(abl, HEAD))
        print()
        print(primitives(kp, dk, rng))


if __name__ == "__main__":
    main()
