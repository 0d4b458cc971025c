"""What the recommended profile's linkage unit and data parties infer from what they
receive (issue #33), measured on the transcript of one secure run; the estimators are
privreg.plugins.pprl.leakage's, the same the test (tests/test_pprl_leakage.py) uses.

    python benchmarks/pprl_leakage.py [--data febrl4x3 | synthetic] [--records 5000]
                                      [--overlap 0.7] [--seed 1] [--key-bits 2048]

Data: ``febrl4x3``, the first ``--records`` FEBRL 4 originals (datasets.febrl_population(4),
``pip install 'privreg[pprl]'``) copied to 3 parties by datasets.make_parties with
``--overlap`` (0.7: the other 30 % of the people are held by some parties only, so that
membership has negatives) and 30 % of each party's records corrupted on any FEBRL column;
``synthetic``: datasets.synthetic_population in the same way. Ground truth: entity_id.

The run: DiceLinkageProtocol with ``blocking="linkage-unit"`` (the default before #33; under
``blocking="relay"``, the default now, and ``"parties"`` the linkage unit cannot link a token
to a record: benchmarks/pprl_blocking.py;
bands agreed by the data parties, exact passes on soc_sec_id and date of birth, threshold 0.75), with an
in-memory transport that keeps the payloads. ``--key-bits`` below 2048 needs no flag here
but is marked insecure: the leakage figures depend only on the tokens and the candidate
pairs, never on the key size, which changes only the CPU of the run.

Table: candidate pairs; Spearman rank correlation between the linkage unit's Dice estimate
from the shared band count and the true Dice; its mean absolute error (all pairs, pairs
sharing >= 5 bands); pairs sharing >= 10 bands and the fraction of them that are true
matches; pairs of one party's records sharing >= 2 bands (and >= 10: near-duplicates);
membership TPR and FPR of "my record has a candidate at Q" for "Q holds this person"
(from the deals, dummy candidates included: the default pads, ``--pad``), and the best
membership test on candidate counts (``leakage.count_advantage``); date-of-birth
frequency classes (records whose date of birth is unique among all parties' records); wall
and CPU of the secure run and of the measurement.
"""

from __future__ import annotations

import argparse
import platform
import secrets
import sys

import numpy as np
from timing import columns, header, measure

from privreg import __version__
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl import leakage as lk
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, febrl_population, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import DEFAULT_PAD, LINKAGE_UNIT, DiceLinkageProtocol

FEBRL_COLUMNS = [
    "given_name",
    "surname",
    "street_number",
    "address_1",
    "address_2",
    "suburb",
    "postcode",
    "state",
    "date_of_birth",
    "soc_sec_id",
]


def parties(name: str, records: int, overlap: float, seed: int) -> tuple[tuple[str, ...], dict]:
    rng = InsecureReproducibleRandom(seed=seed)  # benchmark data only, never a key or secret
    pop = febrl_population(4).iloc[:records] if name == "febrl4x3" else synthetic_population(records, rng=rng)
    data = make_parties(pop, parties=3, corruption=0.3, overlap=overlap, rng=rng, fields=FEBRL_COLUMNS)
    return data.parties, dict(data.frames)


def secure_run(names, frames, key_bits: int, pad: float = DEFAULT_PAD):
    secret = secrets.token_bytes(32)
    records = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=secret, party=p, entity_column=ENTITY) for p in names
    }
    proto = DiceLinkageProtocol(
        parties=names,
        records=records,
        secret=secret,
        key_bits=key_bits,
        insecure_allow_small_keys=key_bits < 2048,
        workers=1,
        pad=pad,
        blocking="linkage-unit",  # the mode whose token leakage this measures (the default before #33)
    )
    return records, run_protocol(proto, transport=InMemoryTransport(keep_payloads=True))


def measure_leakage(names, frames, records, res) -> dict:
    """Every figure of the table from the transcript (and the ground truth)."""
    L = FEBRL_CLK_SCHEMA.filter_length
    view = lk.linkage_unit_view(res.transcript, names, LINKAGE_UNIT)
    cands = lk.candidates_received(res.transcript, names, LINKAGE_UNIT)
    ent = {p: frames[p][ENTITY].astype(str).to_numpy() for p in names}
    bands = view[names[0]]["tokens"].shape[1]
    popcount, bits = lk.popcount_from_bands(
        bands, filter_length=L, records=max(v["tokens"].shape[0] for v in view.values())
    )
    shared, truth, match = [], [], []
    # the linkage unit's real candidates (it knows which dealt pairs are dummies)
    for (p, q), pairs in res.outputs[LINKAGE_UNIT]["candidates"].items():
        shared.append(lk.shared_bands(view[p]["tokens"], view[q]["tokens"], pairs))
        truth.append(lk.true_dice(records[p].match_filters, records[q].match_filters, pairs))
        match.append(ent[p][pairs[:, 0]] == ent[q][pairs[:, 1]])
    s = np.concatenate(shared)
    est = lk.estimate_dice(s, bands=bands, bits=bits, filter_length=L, popcount=popcount)
    sim = lk.similarity_leakage(s, est, np.concatenate(truth), np.concatenate(match))
    mem = lk.membership({k: np.unique(v[:, 0]) for k, v in cands.items()}, ent)
    count_adv, _ = lk.count_advantage({k: v[:, 0] for k, v in cands.items()}, ent)
    dob = [c for (c,) in FEBRL_CLK_SCHEMA.exact].index("date_of_birth")
    classes = lk.frequency_classes([view[p]["exact"][:, dob] for p in names])
    within, strong = 0, 0
    for p in names:  # pairs inside one party the linkage unit can form the same way
        tok = view[p]["tokens"]
        pairs = lk.within_party_pairs(tok, min_shared=2)
        within += len(pairs)
        strong += int((lk.shared_bands(tok, tok, pairs) >= lk.STRONG_BANDS).sum())
    return {
        "sim": sim,
        "mem": mem,
        "count_adv": count_adv,
        "unique_dob": classes.get(1, 0) / max(1, sum(classes.values())),
        "bands": bands,
        "within": within,
        "within_strong": strong,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("febrl4x3", "synthetic"), default="febrl4x3")
    ap.add_argument("--records", type=int, default=5000, help="people before copying to the parties")
    ap.add_argument("--overlap", type=float, default=0.7, help="fraction of people every party holds")
    ap.add_argument("--seed", type=int, default=1, help="seeds the benchmark data only")
    ap.add_argument("--key-bits", type=int, default=2048, help="Paillier and DGK bits (< 2048: insecure)")
    ap.add_argument("--pad", type=float, default=DEFAULT_PAD, help="membership padding (0: none)")
    ap.add_argument("--runs", type=int, default=1, help="runs, each with a fresh secret (the figures vary with it)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    names, frames = parties(args.data, args.records, args.overlap, args.seed)
    print(f"# python benchmarks/pprl_leakage.py {' '.join(sys.argv[1:])}")
    print(f"# {platform.platform()}, Python {sys.version.split()[0]}, privreg {__version__}")
    sizes = "/".join(str(len(frames[p])) for p in names)
    print(header(f"## Leakage of the recommended profile, {args.data} 3 x {sizes}", processes=1, cores=1))
    cols = [
        "run",
        "bands",
        "candidate pairs",
        "Spearman",
        "MAE",
        "MAE >= 5 bands",
        ">= 10 bands (true)",
        "within-party pairs (>= 10 bands)",
        "membership TPR",
        "membership FPR",
        "count advantage",
        "unique DOB",
        *(f"run {c}" for c in columns("s")),
        *(f"measure {c}" for c in columns("s")),
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for k in range(args.runs):
        run_t, (records, res) = measure(lambda: secure_run(names, frames, args.key_bits, args.pad))
        meas_t, got = measure(lambda records=records, res=res: measure_leakage(names, frames, records, res))
        del res
        sim, mem = got["sim"], got["mem"]
        cells = [
            str(k + 1),
            str(got["bands"]),
            str(sim.pairs),
            f"{sim.spearman:.3f}",
            f"{sim.mae:.4f}",
            f"{sim.mae_five:.4f}",
            f"{sim.strong_pairs} ({sim.strong_match_fraction:.3f})",
            f"{got['within']} ({got['within_strong']})",
            f"{mem.tpr:.3f}",
            f"{mem.fpr:.3f}",
            f"{got['count_adv']:.3f}",
            f"{got['unique_dob']:.3f}",
            *run_t.cells(".1f"),
            *meas_t.cells(".2f"),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    print(
        f"\nkey bits {args.key_bits}; pad {args.pad:g}; each run draws a fresh secret (band positions, CLK keys); "
        f"membership over {mem.positives} positives and {mem.negatives} negatives"
    )


if __name__ == "__main__":
    main()
