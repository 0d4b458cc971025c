"""clk-dice secure decisions (privreg.plugins.pprl.dice_protocol): CPU per decision, wall,
peak memory, at 2048-bit keys, end to end.

    python benchmarks/pprl_decisions.py [--records 2000] [--parties 3] [--data febrl4|synthetic]
                                        [--workers 1] [--key-bits 2048] [--pad 1.0] [--profile 25]
                                        [--estimate 1000000] [--comparison dealer|dgk]
                                        [--blocking relay|linkage-unit] [--progress]

Data: ``--data febrl4``: the clean FEBRL 4 originals (datasets.febrl_population(4), 5,000
people) sampled to ``--records`` per party with make_parties (30 % corrupted, 70 % overlap);
``synthetic``: datasets.synthetic_population of ``--records`` people, same corruption.
CLKs: FEBRL_CLK_SCHEMA. ``--comparison`` (default ``dealer``, the protocol's default):
``dealer`` decides by the circuit on Beaver triples the linkage unit deals
(privreg.crypto.dealer_compare; no key); ``dgk``: fresh 2048-bit Paillier and DGK (t = 224)
keys from the OS CSPRNG, generated before the run (their time is reported on its own row,
not charged to the decisions). The protocol runs every role in this process over InMemoryTransport
(messages encoded and decoded as on a network), ``workers`` processes for the heavy loops.

Rows: the whole run (blocking, deal, masked exchange, shares, comparisons, levels) with
wall s, CPU s (this process and its workers, benchmarks/timing.py), CPU s / core, and per
secure decision (dummies and stricter levels included: every decision the linkage unit
makes) CPU ms, CPU ms / core and wall ms; the "decisions" row starts when the linkage
unit has sent the deals (masked exchange, shares, comparisons, levels, result). Peak
memory is the process's maximum resident set (every role together; tracemalloc is not
used: it slows numpy-heavy code). ``--profile N`` runs under cProfile (one process: use --workers 1) and prints the
N functions of highest own time. ``--estimate M`` prints dice_memory.memory_estimate at
M records per party (3 parties) next to this run's figures.

Per role: every role's channel is wrapped so that the CPU time (``time.process_time``)
between its resumptions and its next send or receive is charged to it; what runs inside
a send or a receive (encoding, decoding, the event loop) is charged to no role and shown
as "transport". This is the CPU each party would spend in its own process (its share of
the encoding apart), measured here in one process (``--workers 1``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import sys
import time

import numpy as np
from timing import cpu_now, header, timed, usable_cores

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import generate_paillier_keypair
from privreg.crypto.channel import RoleParty
from privreg.crypto.dgk import generate_dgk_keypair
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, febrl_population, make_parties, synthetic_population
from privreg.plugins.pprl.dice_memory import memory_estimate
from privreg.plugins.pprl.dice_protocol import (
    COMPARISONS,
    DEFAULT_BLOCKING,
    DEFAULT_COMPARISON,
    DGK_T,
    LINKAGE_UNIT,
    DiceLinkageProtocol,
)

SECRET = bytes(range(11, 43))  # benchmark only: a real run draws secrets.token_bytes(32)


def _records(args: argparse.Namespace) -> dict:
    rng = InsecureReproducibleRandom(seed=7)  # the data only; keys and masks use the OS CSPRNG
    if args.data == "febrl4":
        pop = febrl_population(4)
        pop = pop.iloc[np.sort(np.random.default_rng(3).permutation(len(pop))[: args.records])]
    else:
        pop = synthetic_population(args.records, rng=rng)
    data = make_parties(pop, parties=args.parties, corruption=0.3, rng=rng, overlap=0.7)
    return {
        p: encode_clks(data.frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    }


class _Clocked:
    """A channel that charges the CPU between its role's awaits to ``spent[role]``."""

    def __init__(self, ch, spent: dict[str, float]) -> None:
        self._ch, self._spent = ch, spent
        self.party, self.parties = ch.party, ch.parties
        self._t0 = time.process_time()

    def stop(self) -> None:
        self._spent[self.party] = self._spent.get(self.party, 0.0) + time.process_time() - self._t0

    def start(self) -> None:
        self._t0 = time.process_time()

    async def send(self, to, payload, *, step):
        self.stop()
        await self._ch.send(to, payload, step=step)
        self.start()

    async def recv(self, frm, *, step=None):
        self.stop()
        try:
            return await self._ch.recv(frm, step=step)
        finally:
            self.start()


def _clocked(proto: DiceLinkageProtocol, spent: dict[str, float]) -> DiceLinkageProtocol:
    roles = proto.parties()

    def wrap(party):
        async def run(ch):
            clocked = _Clocked(ch, spent)
            try:
                return await party.run(clocked)
            finally:
                clocked.stop()

        return RoleParty(party.name, run)

    wrapped = [wrap(p) for p in roles]
    proto.parties = lambda: wrapped  # type: ignore[method-assign]
    return proto


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--data", choices=("febrl4", "synthetic"), default="febrl4")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--pad", type=float, default=1.0)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--estimate", type=int, default=1_000_000)
    ap.add_argument("--comparison", choices=COMPARISONS, default=DEFAULT_COMPARISON)
    ap.add_argument("--blocking", choices=("relay", "linkage-unit"), default=DEFAULT_BLOCKING)
    ap.add_argument("--progress", action="store_true", help="a line per phase on stderr (long runs)")
    args = ap.parse_args()

    records = _records(args)
    kp = dk = None
    with timed(cores=1) as keys:
        if args.comparison == "dgk":
            kp = generate_paillier_keypair(n_bits=args.key_bits)
            dk = generate_dgk_keypair(n_bits=args.key_bits, t=DGK_T, comparison_bits=16)
    marks: dict[str, tuple[float, float]] = {}
    spent: dict[str, float] = {}
    spent_at_mark: dict[str, float] = {}

    started = time.perf_counter()

    def progress(phase: str, done: int, total: int | None, unit: str) -> None:
        if phase == "secure decisions" and phase not in marks:  # the deals are out: blocking is over
            marks[phase] = (time.perf_counter(), cpu_now())
            spent_at_mark.update(spent)
        if args.progress and (done == total or phase not in shown):
            shown.add(phase)
            print(
                f"[{time.perf_counter() - started:8.1f} s] {phase}: {done}/{total} {unit}", file=sys.stderr, flush=True
            )

    shown: set[str] = set()

    proto = DiceLinkageProtocol(
        parties=tuple(records),
        records=records,
        secret=SECRET,
        keypair=kp,
        dgk_keypair=dk,
        workers=args.workers,
        pad=args.pad,
        progress=progress,
        comparison=args.comparison,
        blocking=args.blocking,
    )
    proto = _clocked(proto, spent)
    prof = cProfile.Profile() if args.profile else None
    cores = min(args.workers, usable_cores())
    with timed(cores=cores) as run:
        if prof is not None:
            prof.enable()
        res = run_protocol(proto, transport=InMemoryTransport(keep_payloads=False))
        if prof is not None:
            prof.disable()
    end = (time.perf_counter(), cpu_now())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    lu = res.outputs[LINKAGE_UNIT]
    d = lu["decisions"]
    t = run.timing
    print(
        header(
            f"clk-dice secure decisions: {args.parties} x {args.records} records ({args.data}), "
            f"{args.key_bits}-bit keys, pad={args.pad}, comparison={args.comparison}",
            processes=args.workers,
            cores=cores,
        )
    )
    print(
        f"candidate pairs {lu['candidate_count']}, dummies {lu['dummy_pairs']}, refined {lu['refined']}, "
        f"decisions {d}, accepted {lu['accepted']}"
    )
    w0, c0 = marks.get("secure decisions", end)
    dec_wall, dec_cpu = end[0] - w0, end[1] - c0
    rows = [
        ("keys (not charged)", keys.timing.wall, keys.timing.cpu, keys.timing.cpu, None),
        ("whole run", t.wall, t.cpu, t.cpu / cores, d),
        ("blocking + deal", t.wall - dec_wall, t.cpu - dec_cpu, (t.cpu - dec_cpu) / cores, None),
        ("decisions", dec_wall, dec_cpu, dec_cpu / cores, d),
    ]
    print(
        f"{'row':<20} {'wall s':>9} {'CPU s':>9} {'CPU s/core':>11} {'CPU ms/dec':>11} {'CPU ms/dec/core':>16} "
        f"{'wall ms/dec':>12}"
    )
    for name, wall, cpu, per_core, dec in rows:
        tail = (
            f"{1e3 * cpu / dec:>11.3f} {1e3 * per_core / dec:>16.3f} {1e3 * wall / dec:>12.3f}"
            if dec
            else f"{'':>11} {'':>16} {'':>12}"
        )
        print(f"{name:<20} {wall:>9.2f} {cpu:>9.2f} {per_core:>11.2f} {tail}")
    print(f"decisions per CPU s: {d / t.cpu:.0f}; peak resident memory (all roles, one process): {rss / 2**20:.0f} MiB")
    print(f"per role (CPU between its awaits; --workers {args.workers}):")
    print(f"{'role':<20} {'CPU s run':>10} {'CPU s dec':>10} {'CPU ms/dec':>11}")
    roles = [LINKAGE_UNIT, *(p for p in records)]
    for role in roles:
        dec_role = spent.get(role, 0.0) - spent_at_mark.get(role, 0.0)
        print(f"{role:<20} {spent.get(role, 0.0):>10.2f} {dec_role:>10.2f} {1e3 * dec_role / d:>11.3f}")
    charged = sum(spent.values())
    dec_charged = charged - sum(spent_at_mark.values())
    rest = dec_cpu - dec_charged
    print(f"{'transport':<20} {t.cpu - charged:>10.2f} {rest:>10.2f} {1e3 * rest / d:>11.3f}")
    print("linkage unit phases (wall s):", {k: round(v, 2) for k, v in lu["timings"].items()})
    if args.estimate:
        per = (lu["candidate_count"] + lu["dummy_pairs"]) / max(1, args.records) / max(1, args.parties - 1)
        first = next(iter(records))
        J, F = res.outputs[first]["bands"], records[first].exact_keys.shape[1]
        est = memory_estimate(
            records=args.estimate,
            parties=3,
            candidates_per_record=max(1.0, per),
            bands=J,
            exact_passes=F,
            blocking=args.blocking,
            comparison=args.comparison,
        )
        print(
            f"memory estimate at 3 x {args.estimate} records ({max(1.0, per):.2f} candidates per record and peer, "
            f"J = {J}, F = {F}, blocking={args.blocking}, comparison={args.comparison}): data party "
            f"{est.data_party_peak / 1e9:.2f} GB, linkage unit {est.linkage_unit_peak / 1e9:.2f} GB "
            f"(dice_memory.memory_estimate)"
        )
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.profile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
