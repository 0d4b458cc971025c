"""Membership padding of the recommended protocol (issue #33): what dummy candidates cost
and what they hide, at several ``pad`` settings, on the candidate lists the linkage unit
deals (blocking only: the secure decisions are not run, each pair in a deal costs exactly
one base decision, so the cost is counted, not timed).

    python benchmarks/pprl_padding.py [--data febrl4x3 | synthetic] [--records 5000]
                                      [--overlap 0.7] [--seed 1] [--pads 0,0.25,0.5,1]
                                      [--blockings linkage-unit,relay]

Data as in ``benchmarks/pprl_leakage.py`` (3 parties, 30 % of the people held by some
parties only, 30 % of records corrupted). Blocking as :class:`DiceLinkageProtocol` runs
it: CLKs, bands agreed at the largest median popcount (``bands.recommended_bands``), the
exact passes of ``FEBRL_CLK_SCHEMA``, ``bands.candidate_pairs``; then
``padding.pad_candidates`` as the linkage unit calls it. Table per ``pad``: real
candidate pairs, dummy pairs, base decisions relative to ``pad = 0`` (the stricter levels
add decisions for real pairs only, so the ratio of all decisions is smaller), and the
data parties' membership TPR and FPR of "my record has a candidate at Q" for "Q holds this
person" (``leakage.membership``), the best test on candidate counts instead
(``leakage.count_advantage``: max over t of TPR - FPR of ">= t candidates"), with CPU and wall of the padding step.

Per blocking mode: under ``linkage-unit`` the linkage unit pads both sides of every pair
and every data party sees its padded list (view ``all``); under ``relay`` (the default) the
pair's left party forms the candidates and pads the right party's side only, so the view
``left`` (the party that formed them, which knows its dummies) is the unpadded one and the
view ``right`` the padded one; each data party is left of about half of its peers.
"""

from __future__ import annotations

import argparse
import platform
import secrets
import sys

import numpy as np
from pprl_leakage import parties
from timing import columns, header, measure

from privreg import __version__
from privreg.core.randomness import SecureRandom
from privreg.plugins.pprl import leakage as lk
from privreg.plugins.pprl.bands import (
    MIN_SHARED,
    BandConfig,
    band_tokens,
    candidate_pairs,
    pair_roles,
    recommended_bands,
)
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY
from privreg.plugins.pprl.padding import pad_candidates


def blocking(names, frames):
    """``{(p, q): real candidate pairs}`` for every ordered pair of parties ``p < q``."""
    secret = secrets.token_bytes(32)
    recs = {
        p: encode_clks(frames[p], schema=FEBRL_CLK_SCHEMA, secret=secret, party=p, entity_column=ENTITY) for p in names
    }
    L = FEBRL_CLK_SCHEMA.filter_length
    pop = max(int(np.median(recs[p].match_filters.sum(axis=1))) for p in names)
    config = recommended_bands(filter_length=L, popcount=max(1, pop), records=max(len(recs[p]) for p in names))
    tok = {p: band_tokens(recs[p].match_filters, config=config, secret=secret)[0] for p in names}
    cfg = BandConfig(bands=MIN_SHARED, bits=16, min_shared=MIN_SHARED)
    out = {}
    for i, p in enumerate(names):
        for q in names[i + 1 :]:
            out[(p, q)], _ = candidate_pairs(
                tok[p],
                tok[q],
                max_block_pairs=cfg.max_block_pairs,
                min_shared=cfg.min_shared,
                exact_a=recs[p].exact_keys,
                exact_b=recs[q].exact_keys,
            )
    return out, {p: len(recs[p]) for p in names}


def padded(real, sizes, pad):
    rng = SecureRandom()
    out = {}
    for (p, q), pairs in real.items():
        out[(p, q)] = pad_candidates(pairs, rows=(sizes[p], sizes[q]), pad=pad, rng=rng)
    return out


def relay_padded(real, sizes, pad, names):
    """``blocking="relay"``: the pair's left party (dice_protocol's alternating rule) pads
    the right party's side only; ``{(left, right): (pairs, dummy mask)}``."""
    rng = SecureRandom()
    out = {}
    for (p, q), pairs in real.items():
        flip = pair_roles(names.index(p), names.index(q))[0] != names.index(p)  # then p is the right party
        left, right, oriented = (q, p, pairs[:, ::-1]) if flip else (p, q, pairs)
        out[(left, right)] = pad_candidates(oriented, rows=(sizes[left], sizes[right]), pad=pad, rng=rng, sides=(1,))
    return out


def views(got, blocking):
    """Per viewer ``{(viewer, peer): its rows with a slot at peer (repeats count)}``. Under
    relay the left party knows its dummies, so it sees its real candidates only."""
    out: dict[str, dict] = {"all": {}} if blocking == "linkage-unit" else {"left": {}, "right": {}}
    for (p, q), (pairs, dummy) in got.items():
        if blocking == "linkage-unit":
            out["all"][(p, q)], out["all"][(q, p)] = pairs[:, 0], pairs[:, 1]
        else:
            out["left"][(p, q)], out["right"][(q, p)] = pairs[~dummy, 0], pairs[:, 1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=("febrl4x3", "synthetic"), default="febrl4x3")
    ap.add_argument("--records", type=int, default=5000, help="people before copying to the parties")
    ap.add_argument("--overlap", type=float, default=0.7, help="fraction of people every party holds")
    ap.add_argument("--seed", type=int, default=1, help="seeds the benchmark data only")
    ap.add_argument("--pads", default="0,0.25,0.5,0.75,1", help="comma-separated pad settings")
    ap.add_argument("--blockings", default="linkage-unit,relay", help="comma-separated blocking modes")
    args = ap.parse_args()
    pads = [float(x) for x in args.pads.split(",")]
    names, frames = parties(args.data, args.records, args.overlap, args.seed)
    ent = {p: frames[p][ENTITY].astype(str).to_numpy() for p in names}
    real, sizes = blocking(names, frames)
    base = sum(int(x.shape[0]) for x in real.values())
    print(f"# python benchmarks/pprl_padding.py {' '.join(sys.argv[1:])}")
    print(f"# {platform.platform()}, Python {sys.version.split()[0]}, privreg {__version__}")
    sizes_s = "/".join(str(sizes[p]) for p in names)
    print(header(f"## Membership padding, {args.data} 3 x {sizes_s}", processes=1, cores=1))
    cols = ["blocking", "pad", "real pairs", "dummy pairs", "base decisions x", "view", "TPR", "FPR", "TPR - FPR"]
    cols += ["count advantage (t)"]
    cols += [f"pad {c}" for c in columns("s")]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for mode in args.blockings.split(","):
        for pad in pads:
            if mode == "relay":
                t, got = measure(lambda pad=pad: relay_padded(real, sizes, pad, names))
            else:
                t, got = measure(lambda pad=pad: padded(real, sizes, pad))
            dummies = sum(int(m.sum()) for _, m in got.values())
            for view, rows in views(got, mode).items():
                mem = lk.membership({k: np.unique(r) for k, r in rows.items()}, ent)
                adv, t_best = lk.count_advantage(rows, ent)
                cells = [mode, f"{pad:g}", str(base), str(dummies), f"{(base + dummies) / max(1, base):.3f}"]
                cells += [
                    view,
                    f"{mem.tpr:.3f}",
                    f"{mem.fpr:.3f}",
                    f"{mem.tpr - mem.fpr:.3f}",
                    f"{adv:.3f} ({t_best})",
                    *t.cells(".3f"),
                ]
                print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\nmembership over {mem.positives} positives and {mem.negatives} negatives; a fresh secret per run")


if __name__ == "__main__":
    main()
