"""Peak memory per word of clk-dice's relay blocking (``blocking="relay"``, the default),
measured with tracemalloc, for :mod:`privreg.plugins.pprl.dice_memory`.

    python benchmarks/pprl_relay_memory.py [--records 20000] [--parties 3] [--chunk 4194304]

Data: datasets.synthetic_population of ``--records`` people copied to the parties by
make_parties (30 % corrupted, overlap 0.7), FEBRL_CLK_SCHEMA CLKs, the recommended bands at
that size. Each step runs as in DiceLinkageProtocol, outside the protocol (no messages), and
its tracemalloc peak (allocations made during the step, its inputs excluded) is divided by
the words of one party (``m (J + F)``):

* ``left party``: from its band tokens (counted: a copy is made and dropped, as the protocol
  drops its own), its words and their keyed order, the groups it receives and their checks,
  the peer's keyed order and :func:`relay_blocking.relay_candidates`, in the protocol's order
  (the largest transient of a data party's blocking under relay);
* ``linkage unit, one pair``: :func:`relay_blocking.relay_entry` (the collision groups of two
  parties' word lists, then the left party's bitmap)
  (the lists themselves are held for the whole phase: 8 bytes per word and party).

The measurement is of this machine's numpy; ``dice_memory.RELAY_PARTY_BYTES`` and
``RELAY_LU_BYTES`` round it up.
"""

from __future__ import annotations

import argparse
import tracemalloc

import numpy as np

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.bands import band_tokens, recommended_bands
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.party_blocking import private_order
from privreg.plugins.pprl.relay_blocking import (
    check_groups,
    position_order,
    relay_candidates,
    relay_entry,
    relay_groups,
    relay_words,
)

SECRET = bytes(range(7, 39))  # benchmark only


def _peak(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return out, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--parties", type=int, default=3, help="made by make_parties; two of them are measured")
    ap.add_argument("--chunk", type=int, default=1 << 22, help="relay_candidates' pairs (and positions) per chunk")
    args = ap.parse_args()
    rng = InsecureReproducibleRandom(seed=5)
    pop = synthetic_population(args.records, rng=rng)
    data = make_parties(pop, parties=args.parties, corruption=0.3, rng=rng, overlap=0.7)
    names = list(data.parties)[:2]
    recs = {
        p: encode_clks(data.frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in names
    }
    pop_med = max(int(np.median(recs[p].match_filters.sum(axis=1))) for p in names)
    cfg = recommended_bands(filter_length=1024, popcount=pop_med, records=max(len(recs[p]) for p in names))
    tok = {p: band_tokens(recs[p].match_filters, config=cfg, secret=SECRET)[0] for p in names}
    a, b = names
    m = {p: len(recs[p]) for p in names}
    W = cfg.bands + recs[a].exact_keys.shape[1]
    words = {p: relay_words(tok[p][private_order(m[p], rng)], recs[p].exact_keys, rng) for p in names}
    orders = {p: position_order(SECRET, p, m[p] * W) for p in names}
    sent = {p: words[p].reshape(-1)[orders[p]] for p in names}

    entry, lu_peak = _peak(lambda: relay_entry(sent[a], sent[b]))
    groups = relay_groups(sent[a], sent[b])
    n_b = sent[b].size

    def left() -> tuple[np.ndarray, int]:
        # the protocol's order (DiceLinkageProtocol._relay_with_peers): the band tokens are
        # dropped once the words are made, the words once sent, the sent list once every
        # groups entry is checked; relay_candidates drops each side of the groups it indexed
        t = tok[a].copy()
        w = relay_words(t[private_order(m[a], rng)], recs[a].exact_keys, rng)
        del t
        own = position_order(SECRET, a, w.size)
        mine = w.reshape(-1)[own]
        del w
        got = {"shared": entry["shared"].copy(), "theirs": entry["theirs"].copy()}  # as received
        # the same words as the linkage unit's (``mine`` drew fresh fills for missing values): held alike
        g = [check_groups(got, "LU", sent=sent[a], theirs=n_b)]
        del mine, got
        peer = position_order(SECRET, b, n_b)
        return relay_candidates(
            g.pop(),
            own,
            peer,
            width=W,
            bands=cfg.bands,
            rows=(m[a], m[b]),
            min_shared=cfg.min_shared,
            max_block_pairs=cfg.max_block_pairs,
            chunk=args.chunk,
        )

    (cands, _), party_peak = _peak(left)
    n_words = m[a] * W
    # pairs met: over own positions, the peer positions of the same block (group, column)
    keys = []
    for (gr, pos), o in ((groups[0].T, orders[a]), (groups[1].T, orders[b])):
        keys.append(gr.astype(np.int64) * W + o[pos] % W)
    kb, cb = np.unique(keys[1], return_counts=True)
    i = np.minimum(np.searchsorted(kb, keys[0]), kb.size - 1)
    met = int(np.where(kb[i] == keys[0], cb[i], 0).sum())
    colliding = (groups[0].shape[0] + groups[1].shape[0]) / (2 * n_words)
    print(
        f"# python benchmarks/pprl_relay_memory.py --records {args.records} --parties {args.parties} "
        f"--chunk {args.chunk}"
    )
    print(
        f"records {m[a]} / {m[b]}, bands {cfg.bands} x {cfg.bits} bits, exact passes {W - cfg.bands}, words per party"
    )
    print(f"{n_words}, positions in a shared word {colliding:.1%}, pairs met {met} (chunks of {args.chunk}), ")
    print(f"candidate pairs {len(cands)}")
    print()
    print("| step | peak MiB | bytes per word |")
    print("|---|---|---|")
    left_row = "left party: words, orders, groups, relay_candidates"
    print(f"| {left_row} | {party_peak / 2**20:.1f} | {party_peak / n_words:.1f} |")
    print(f"| linkage unit: relay_entry of one pair | {lu_peak / 2**20:.1f} | {lu_peak / n_words:.1f} |")


if __name__ == "__main__":
    main()
