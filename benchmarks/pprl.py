"""Record linkage against the field's reference: privreg's MP-SPPRL (recommended and paper
profiles) and clkhash + anonlink on the same records in one run, one table of linkage
quality, candidate quality, time and what the linkage unit sees.

    python benchmarks/pprl.py [--data all | febrl3x5000,febrl4,synthetic] [--records N] [--seed 1]
                              [--only all | privreg | anonlink] [--quick]
                              [--anonlink-threshold tuned | T]

Data sets (``--data``, comma-separated, default all), ground truth in the column
``entity_id`` (datasets.ENTITY), never given to a method as a field:

* ``febrl3x5000``: the 5,000 FEBRL 4 originals (datasets.febrl_population(4)) copied to 3
  parties by datasets.make_parties with overlap=1.0 (every party holds every entity) and
  30% of each party's records corrupted, with 1-2 FEBRL-style edits each on any of the
  ten FEBRL columns (all of them, so no method gains from a field left clean);
* ``febrl4``: the two FEBRL 4 files as published (datasets.load_febrl(4): 5,000 originals,
  5,000 duplicates with FEBRL's own corruption), true links by entity;
* ``synthetic``: 5,000 people from datasets.synthetic_population, copied and corrupted as
  in ``febrl3x5000``.

``--records N`` keeps the first N entities (``febrl4``: the first N originals and their
duplicates); ``--seed`` seeds the data (benchmark data only, never a key or a secret);
``--quick`` uses 200 records.

Rows, all on the same frames:

(a) privreg, profile ``recommended`` (its defaults: ``blocking="relay"``,
    ``comparison="dealer"``), (a') the same profile in its mode before issue #33
    (:data:`PREVIOUS`: ``blocking="linkage-unit"``, ``comparison="dgk"``), and (b) privreg,
    profile ``paper``: ``privreg.plugins.pprl.workflow.link_frames`` with fresh 2048-bit
    keys where the mode uses any (rng=None: the OS CSPRNG) and workers=None (every usable
    core). Quality, candidates and "linkage unit sees" are the figures link_frames returns;
    the time is measured here around the whole call (key generation, encoding, protocol).
(c) clkhash + anonlink: every party encodes its records as 1024-bit CLKs with
    :data:`CLK_SCHEMA` (clkhash's own linkage-schema format, version 3) under a fresh
    shared secret; the linkage unit scores every cross-party pair with anonlink's candidate
    generation (``find_candidate_pairs``, Dice coefficient, no blocking function), keeps
    the pairs with Dice >= its threshold and groups records with anonlink's greedy
    multi-party solver (``greedy_solve``). Its metrics are computed here (below).

Fair comparison (issue #33). Both methods use the same ten FEBRL fields: privreg's
FEBRL_CLK_SCHEMA weights soc_sec_id 10 (of 103) and runs exact blocking passes on it and
on the date of birth, so :data:`CLK_SCHEMA` encodes soc_sec_id too (anonlink scores every
pair, so it needs no blocking pass). privreg's threshold (0.75) was fixed on design data
(FEBRL 3 and the synthetic generator), never on the evaluation data; anonlink's is tuned
the same way, on a separate split, before the evaluation: for each data set, its
:data:`TUNING` analogue (FEBRL 3's 2,000 originals copied and corrupted like
``febrl3x5000``; FEBRL 3's originals and their first duplicates, two files like FEBRL 4,
for ``febrl4``; a synthetic population of another seed for ``synthetic``) is encoded once,
and the threshold of :data:`THRESHOLD_GRID` with the highest pairwise F1 there (ties: the
one nearest clkhash's tutorial value 0.8) is the one used
(``--anonlink-threshold T`` fixes it instead; the tuning table is printed in the notes,
its time is not in the row).

Metrics. A record is (party, row). A *true group* is the set of records of one entity
across all parties; only true groups of >= 2 records count. An *output group* is a group
of >= 2 records a method links.

* group recall = true groups recovered exactly (equal to an output group) / true groups;
* group precision = output groups equal to a true group / output groups;
* pairwise: the cross-party record pairs inside groups. Pairwise recall = implied pairs of
  one entity / true pairs; pairwise precision = implied pairs of one entity / implied pairs;
* PC (pair completeness) and RR (reduction ratio) describe the candidates before the
  threshold: PC = true candidates / true pairs (groups), RR = 1 - candidates / all
  possible. anonlink scores every cross-party pair, so its PC = 1 and RR = 0 by
  construction and its "candidates" are record pairs; privreg's recommended profile's are
  candidate record pairs after blocking (bands and exact passes), the paper profile's
  candidate groups (one record per party), each with link_frames' own PC and RR.

On these data sets every entity is held by every party, so every true group has one record
per party: the n-party group metrics of privreg.plugins.pprl.quality and the ones here
coincide. privreg.plugins.pprl.quality itself does not fit anonlink's output, whose groups
may span fewer parties than all.

Time: wall s, CPU s (this process and its child processes) and CPU s / core, from
benchmarks/timing.py. anonlink rows time every party's encoding, the candidate generation
and the solver, in one process (clkhash hashes in one process below 10,000 records per
party, its chunk size, and on every core above).

The peers are benchmark-only (``pip install -e '.[bench]'``, then ``pip install --no-deps
'clkhash>=0.18'``: clkhash 0.18 pins cryptography<41, which privreg's cryptography>=42
excludes; CONTRIBUTING.md, "Dependencies").
"""

from __future__ import annotations

import argparse
import array
import base64
import importlib.metadata
import itertools
import json
import platform
import secrets
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from timing import Timing, columns, header, measure, timed, usable_cores

from privreg import __version__
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.plugins.pprl.datasets import (
    ENTITY,
    febrl_population,
    load_febrl,
    make_parties,
    synthetic_population,
)

DATASETS = ("febrl3x5000", "febrl4", "synthetic")
PROFILES = ("recommended", "paper")
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
DICE_THRESHOLD = 0.8  # clkhash's tutorial value; used only with --anonlink-threshold 0.8
#: Thresholds tried on the tuning split (pairwise F1 picks one).
THRESHOLD_GRID = tuple(round(0.70 + 0.01 * k, 2) for k in range(21))
#: The separate split each data set's anonlink threshold is tuned on (module docstring).
TUNING = {"febrl3x5000": "febrl3x3", "febrl4": "febrl3", "synthetic": "synthetic-tuning"}
CLK_BITS = 1024
CLKHASH_CHUNK = 10_000  # clkhash.clk: below this many records a party is hashed in one process
KEY_BITS = 2048
ANONLINK_SEES = "every CLK and every similarity score"
INSTALL = "pip install -e '.[bench]' && pip install --no-deps 'clkhash>=0.18'"


def _text(name: str, n: int, bits: int, *, positional: bool = False) -> dict[str, Any]:
    """A clkhash v3 feature: any string (corrupted values must not fail validation), n-grams,
    ``bits`` insertions for the whole feature, '' = missing."""
    return {
        "identifier": name,
        "format": {"type": "string", "encoding": "utf-8"},
        "hashing": {
            "comparison": {"type": "ngram", "n": n, "positional": positional},
            "strategy": {"bitsPerFeature": bits},
            "missingValue": {"sentinel": ""},
        },
    }


#: The CLK linkage schema, in clkhash's v3 format. Modelled on clkhash's FEBRL tutorial:
#: names carry most weight; bigrams for words; positional unigrams for digit strings (a
#: wrong digit costs one token, a transposition two); the state (a handful of codes) as
#: one exact token with few bits. soc_sec_id is encoded like the date of birth, at 10/12 of
#: its bits, as privreg's FEBRL_CLK_SCHEMA weighs them (privreg also runs an exact pass on
#: it): the same fields for both methods. bitsPerFeature keeps a field's weight independent
#: of its length; 1,160 insertions (fewer where a field is missing) fill about two thirds of
#: 1,024 bits (each row's note prints the measured fill). The hash is clkhash's default
#: (keyed BLAKE2b, not the double hashing the Kroll-Steinmetzer attack exploits); HKDF
#: derives per-field keys from the shared secret with a public salt.
CLK_SCHEMA: dict[str, Any] = {
    "version": 3,
    "clkConfig": {
        "l": CLK_BITS,
        "kdf": {
            "type": "HKDF",
            "hash": "SHA256",
            "salt": base64.b64encode(b"privreg benchmarks/pprl.py").decode(),
            "info": base64.b64encode(b"clk").decode(),
            "keySize": 64,
        },
    },
    "features": [
        _text("given_name", 2, 200),
        _text("surname", 2, 200),
        _text("street_number", 1, 40, positional=True),
        _text("address_1", 2, 100),
        _text("address_2", 2, 40),
        _text("suburb", 2, 100),
        _text("postcode", 1, 100, positional=True),
        {
            "identifier": "state",
            "format": {"type": "string", "encoding": "utf-8"},
            "hashing": {
                "comparison": {"type": "exact"},
                "strategy": {"bitsPerFeature": 20},
                "missingValue": {"sentinel": ""},
            },
        },
        _text("date_of_birth", 1, 200, positional=True),
        _text("soc_sec_id", 1, 170, positional=True),
    ],
}
CLK_COLUMNS = [f["identifier"] for f in CLK_SCHEMA["features"]]


# --- data ---------------------------------------------------------------------------------


def load(name: str, records: int, seed: int) -> dict[str, pd.DataFrame]:
    """The parties' frames of data set ``name`` (module docstring)."""
    rng = InsecureReproducibleRandom(seed=seed)
    if name == "febrl3":  # tuning split of febrl4: FEBRL 3's originals and their first duplicates
        data = load_febrl(3)
        dups = data.frames["B"][data.frames["B"].index.str.endswith("-dup-0")]
        return {"A": data.frames["A"].iloc[:records], "B": dups[dups[ENTITY].isin(set(data.frames["A"][ENTITY]))]}
    if name == "febrl3x3":  # tuning split of febrl3x5000
        population = febrl_population(3).iloc[:records]
        data = make_parties(population, parties=3, corruption=0.3, overlap=1.0, rng=rng, fields=FEBRL_COLUMNS)
        return dict(data.frames)
    if name == "synthetic-tuning":  # tuning split of synthetic: other people (another seed)
        population = synthetic_population(records, rng=InsecureReproducibleRandom(seed=seed + 1000))
        data = make_parties(population, parties=3, corruption=0.3, overlap=1.0, rng=rng, fields=FEBRL_COLUMNS)
        return dict(data.frames)
    if name == "febrl4":
        data = load_febrl(4)
        a = data.frames["A"].iloc[:records]
        b = data.frames["B"]
        return {"A": a, "B": b[b[ENTITY].isin(set(a[ENTITY]))]}
    if name == "febrl3x5000":
        population = febrl_population(4).iloc[:records]
    elif name == "synthetic":
        population = synthetic_population(records, rng=rng)
    else:
        raise ValueError(f"unknown data set {name!r}; choose from {DATASETS}")
    data = make_parties(population, parties=3, corruption=0.3, overlap=1.0, rng=rng, fields=FEBRL_COLUMNS)
    return dict(data.frames)


def entity_labels(frames: Mapping[str, pd.DataFrame]) -> list[np.ndarray]:
    """Per party, in row order, the entity of every record ('' = unlabelled)."""
    return [f[ENTITY].fillna("").astype(str).to_numpy() for f in frames.values()]


# --- metrics ------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def group_quality(groups: Iterable[Iterable[tuple[int, int]]], labels: Sequence[np.ndarray]) -> dict[str, Any]:
    """Group and pairwise recall and precision of output ``groups`` (each an iterable of
    (party index, row) records) against the entity ``labels`` (module docstring)."""
    truth: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for p, column in enumerate(labels):
        for row, e in enumerate(column):
            if e:
                truth[e].add((p, row))
    true_groups = {frozenset(g) for g in truth.values() if len(g) >= 2}
    true_pairs = 0
    for g in true_groups:
        per_party = np.bincount([p for p, _ in g])
        true_pairs += (int(per_party.sum()) ** 2 - int((per_party**2).sum())) // 2

    out = {frozenset(g) for g in map(frozenset, groups) if len(g) >= 2}
    exact = len(out & true_groups)
    implied: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    for g in out:
        implied.update((r, s) for r, s in itertools.combinations(sorted(g), 2) if r[0] != s[0])
    found = sum(1 for r, s in implied if labels[r[0]][r[1]] and labels[r[0]][r[1]] == labels[s[0]][s[1]])
    return {
        "recall": _ratio(exact, len(true_groups)),
        "precision": _ratio(exact, len(out)),
        "pairwise_recall": _ratio(found, true_pairs),
        "pairwise_precision": _ratio(found, len(implied)),
        "true_groups": len(true_groups),
        "groups": len(out),
        "exact": exact,
        "true_pairs": true_pairs,
        "implied_pairs": len(implied),
        "sizes": dict(sorted(Counter(len(g) for g in out).items())),
    }


# --- the methods --------------------------------------------------------------------------


def _link_frames() -> Callable[..., dict[str, Any]]:
    from privreg.plugins.pprl import workflow

    link_frames = getattr(workflow, "link_frames", None)
    if link_frames is None:
        raise SystemExit(
            "privreg rows need privreg.plugins.pprl.workflow.link_frames (issue #20), which this "
            "checkout does not have; run the clkhash + anonlink rows alone with --only anonlink"
        )
    return link_frames


#: The recommended profile's mode before issue #33 (its previous default), for its own row.
PREVIOUS = {"blocking": "linkage-unit", "comparison": "dgk"}


def run_privreg(frames: Mapping[str, pd.DataFrame], profile: str, options: Mapping[str, Any] | None = None) -> dict:
    """One privreg row: link_frames' metrics and the time of the whole call."""
    link_frames = _link_frames()
    clock, res = measure(
        lambda: link_frames(
            frames,
            profile=profile,
            entity_column=ENTITY,
            key_bits=KEY_BITS,
            rng=None,
            workers=None,
            protocol_options=options,
        ),
        cores=usable_cores(),
    )
    row = {k: res[k] for k in ("recall", "precision", "pairwise_recall", "pairwise_precision")}
    mode = ", ".join(f"{k}={v}" for k, v in (options or {}).items())
    row |= {
        "method": f"privreg {profile}" + (f" ({mode})" if mode else ""),
        "pc": res["pair_completeness"],
        "rr": res["reduction_ratio"],
        "candidates": f"{res['candidates']} {'pairs' if profile == 'recommended' else 'groups'}",
        "time": clock,
        "sees": res["linkage_unit_sees"],
        "note": f"protocol {res['protocol_seconds']:.1f} s (link_frames' protocol_seconds)",
    }
    return row


def _peers() -> dict[str, Any]:
    """clkhash and anonlink, imported once; exits with the install line if either is missing."""
    try:
        with warnings.catch_warnings():
            # anonlink 0.15 imports pkg_resources and mypy_extensions.TypedDict, both deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", UserWarning)
            from anonlink.candidate_generation import find_candidate_pairs
            from anonlink.similarities import dice_coefficient_accelerated
            from anonlink.solving import greedy_solve
            from clkhash.clk import generate_clks
            from clkhash.schema import from_json_dict
    except ImportError as e:
        raise SystemExit(f"the clkhash + anonlink rows need both peers ({e}): {INSTALL}") from None
    version = importlib.metadata.version
    return {
        "find_candidate_pairs": find_candidate_pairs,
        "dice": dice_coefficient_accelerated,
        "greedy_solve": greedy_solve,
        "generate_clks": generate_clks,
        "schema": from_json_dict(CLK_SCHEMA),
        "name": f"clkhash {version('clkhash')} + anonlink {version('anonlink')}",
    }


def _encode_anonlink(frames: Mapping[str, pd.DataFrame], peers: dict[str, Any]) -> list[Any]:
    secret = secrets.token_bytes(32)  # shared by the data parties, never by the linkage unit
    return [
        peers["generate_clks"](f[CLK_COLUMNS].astype(str).values.tolist(), peers["schema"], secret)
        for f in frames.values()
    ]


def _above(candidates: Any, threshold: float) -> Any:
    """anonlink's candidate tuple restricted to similarity >= ``threshold`` (same array types)."""
    sims, dsets, recs = candidates
    keep = np.asarray(sims) >= threshold

    def cut(a: array.array) -> array.array:
        return array.array(a.typecode, np.asarray(a)[keep].tolist())

    return cut(sims), tuple(cut(d) for d in dsets), tuple(cut(r) for r in recs)


def tune_anonlink(name: str, records: int, seed: int, peers: dict[str, Any]) -> tuple[float, str]:
    """anonlink's threshold for data set ``name``: the one of :data:`THRESHOLD_GRID` with the
    highest pairwise F1 on its :data:`TUNING` split (never the evaluation data); and a note."""
    frames = load(TUNING[name], records, seed + 1)
    labels = entity_labels(frames)
    clks = _encode_anonlink(frames, peers)
    candidates = peers["find_candidate_pairs"](clks, peers["dice"], min(THRESHOLD_GRID))
    scores = []
    for t in THRESHOLD_GRID:
        q = group_quality(peers["greedy_solve"](_above(candidates, t)), labels)
        r, p = q["pairwise_recall"], q["pairwise_precision"]
        scores.append((2 * r * p / (r + p) if r + p else 0.0, t))
    best = max(scores, key=lambda x: (x[0], -abs(x[1] - DICE_THRESHOLD)))[1]
    table = ", ".join(f"{t:.2f}: {f:.4f}" for f, t in scores)
    return best, f"anonlink threshold {best:.2f} tuned on {TUNING[name]} (pairwise F1 per threshold: {table})"


def run_anonlink(frames: Mapping[str, pd.DataFrame], peers: dict[str, Any], threshold: float) -> dict[str, Any]:
    """One clkhash + anonlink row at ``threshold``: encode, score every cross-party pair,
    greedy-solve."""
    sizes = [len(f) for f in frames.values()]
    cores = 1 if max(sizes) < CLKHASH_CHUNK else usable_cores()
    with timed(cores=cores) as clock:
        t0 = time.perf_counter()
        clks = _encode_anonlink(frames, peers)
        t1 = time.perf_counter()
        candidates = peers["find_candidate_pairs"](clks, peers["dice"], threshold)
        t2 = time.perf_counter()
        groups = peers["greedy_solve"](candidates)
        t3 = time.perf_counter()
    phase = {"encode": t1 - t0, "candidates": t2 - t1, "solve": t3 - t2}
    labels = entity_labels(frames)
    q = group_quality(groups, labels)
    sims, (dset0, dset1), (rec0, rec1) = candidates
    above_true = sum(1 for a, b, i, j in zip(dset0, dset1, rec0, rec1) if labels[a][i] and labels[a][i] == labels[b][j])
    scored = sum(a * b for a, b in itertools.combinations(sizes, 2))
    fill = float(np.mean([c.count() for clk in clks for c in clk])) / CLK_BITS
    row = {k: q[k] for k in ("recall", "precision", "pairwise_recall", "pairwise_precision")}
    row |= {
        "method": f"{peers['name']} at {threshold:.2f}",
        # find_candidate_pairs without a blocking function scores every cross-party pair
        "pc": 1.0 if q["true_pairs"] else float("nan"),
        "rr": 0.0,
        "candidates": f"{scored} pairs",
        "time": clock.timing,
        "sees": ANONLINK_SEES,
        "note": (
            "wall s: " + ", ".join(f"{k} {v:.2f}" for k, v in phase.items()) + f"; CLK fill {fill:.1%}; "
            f"{len(sims)} pairs with Dice >= {threshold:.2f} ({above_true} of the {q['true_pairs']} true pairs); "
            f"output groups by size {q['sizes']}, {q['exact']} exact of {q['true_groups']} true groups"
        ),
    }
    return row


# --- output -------------------------------------------------------------------------------

COLUMNS = [
    "data",
    "method",
    "parties x records",
    "recall",
    "precision",
    "pairwise recall",
    "pairwise precision",
    "PC",
    "RR",
    "candidates",
    *columns("s"),
    "linkage unit sees",
]


def _f(x: float) -> str:
    return "n/a" if x != x else f"{x:.4f}"


def table_row(data: str, shape: str, row: dict[str, Any]) -> str:
    t: Timing = row["time"]
    cells = [
        data,
        row["method"],
        shape,
        *(_f(row[k]) for k in ("recall", "precision", "pairwise_recall", "pairwise_precision", "pc", "rr")),
        row["candidates"],
        *t.cells(".1f"),
        row["sees"],
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="all", help=f"'all' or comma-separated among {', '.join(DATASETS)}")
    ap.add_argument("--records", type=int, default=5000, help="entities per data set (febrl4: originals)")
    ap.add_argument("--seed", type=int, default=1, help="seeds the benchmark data only")
    ap.add_argument("--only", choices=("all", "privreg", "anonlink"), default="all")
    ap.add_argument("--quick", action="store_true", help="200 records per data set")
    ap.add_argument(
        "--anonlink-threshold",
        default="tuned",
        help="'tuned' (on a separate split per data set, module docstring) or a fixed Dice threshold",
    )
    args = ap.parse_args()
    if args.quick:
        args.records = 200
    names = DATASETS if args.data == "all" else tuple(args.data.split(","))
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        ap.error(f"--data: unknown {unknown}; choose 'all' or among {', '.join(DATASETS)}")
    if args.records < 1:
        ap.error("--records must be >= 1")
    if args.anonlink_threshold != "tuned":
        try:
            fixed = float(args.anonlink_threshold)
        except ValueError:
            fixed = float("nan")
        if not 0 < fixed < 1:
            ap.error(
                f"--anonlink-threshold must be 'tuned' or a Dice threshold in (0, 1); got {args.anonlink_threshold}"
            )
    # fail before any work when a requested side is missing
    peers = _peers() if args.only in ("all", "anonlink") else None
    if args.only in ("all", "privreg"):
        _link_frames()

    print(
        f"# python benchmarks/pprl.py --data {','.join(names)} --records {args.records} --seed {args.seed} "
        f"--only {args.only}"
    )
    print(f"# {platform.platform()}, Python {sys.version.split()[0]}, privreg {__version__}")
    if peers is not None:
        print(f"# {peers['name']}; Dice threshold {args.anonlink_threshold}; CLK schema (clkhash v3 format):")
        print("# " + json.dumps(CLK_SCHEMA, separators=(",", ":")))
    cores = usable_cores()
    processes, used = [], []
    if args.only in ("all", "privreg"):
        processes.append(f"privreg rows 1 + {cores} Paillier workers")
        used.append(f"privreg rows {cores}")
    if peers is not None:
        processes.append("anonlink rows 1")
        used.append(f"anonlink rows 1 below {CLKHASH_CHUNK} records per party, else {cores}")
    print()
    print(
        header(
            "## Linkage quality and cost: privreg against clkhash + anonlink, same records per data set",
            processes="; ".join(processes),
            cores="; ".join(used),
        )
    )
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    notes = []
    t0 = time.perf_counter()
    for name in names:
        frames = load(name, args.records, args.seed)
        shape = f"{len(frames)} x " + "/".join(sorted({str(len(f)) for f in frames.values()}))
        runs: list[Callable[[], dict[str, Any]]] = []
        if args.only in ("all", "privreg"):
            runs += [lambda profile=profile: run_privreg(frames, profile) for profile in PROFILES]
            runs.insert(1, lambda: run_privreg(frames, "recommended", PREVIOUS))
        if peers is not None:
            if args.anonlink_threshold == "tuned":
                threshold, note = tune_anonlink(name, args.records, args.seed, peers)
                notes.append(f"- {name}: {note}")
            else:
                threshold = float(args.anonlink_threshold)
            runs.append(lambda threshold=threshold: run_anonlink(frames, peers, threshold))
        for run in runs:
            row = run()
            print(table_row(name, shape, row), flush=True)
            notes.append(f"- {name}, {row['method']}: {row['note']}")
    print()
    print("\n".join(notes))
    print(f"\ntotal benchmark time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
