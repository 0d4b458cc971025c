"""``privreg party`` for MP-SPPRL: each data party and the linkage unit in its own process.

A data party's inputs are its records (a CSV with the FEBRL columns: given_name, surname,
street_number, address_1, address_2, suburb, postcode, state, date_of_birth, soc_sec_id;
an ``id`` column, when present, names the records) and the data parties' shared secret
(a file of 32 to 4096 random bytes, agreed out of band; never given to the linkage
unit). The linkage unit has no input. Outputs: each data party ``links.csv`` (group id,
its own record id), the linkage unit ``groups.csv`` (group id and one record index per
party) and ``result.json`` (counts, blocking statistics and phase timings) -- what each
learns by :meth:`PPRLProtocol.learns`, nothing more.

Declared sizes: ``options.records`` lists every data party's record count (in the order
of ``options.parties``; each party's input must hold exactly its count, and
``max_records`` caps them). Like every option it is in the options digest the parties
compare before the protocol starts, so a party that declares other counts is refused
there; every message is then bounded per kind by formulas in these counts, the filter
bits and the key size (:mod:`~privreg.plugins.pprl.message_bounds`), and a peer's larger
frame is refused from its header. So the record counts are public to every party of the
run (the linkage unit learned them from the signatures anyway; each data party now also
learns the others').
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd

from privreg.core import validation as v
from privreg.core.deployment import Deployment
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import atomic_write, read_bytes, write_text
from privreg.core.params import Spec, check_params
from privreg.core.protocol import Protocol
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource
from privreg.crypto import MIN_KEY_BITS
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.plugins.pprl.blocking import BlockingConfig
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.kdf import check_secret_file
from privreg.plugins.pprl.matching import RULES
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, PPRLProtocol
from privreg.plugins.pprl.schema import FEBRL_SCHEMA
from privreg.readers import read_table

__all__ = [
    "PPRLDeployment",
    "check_record_count",
    "declared_records",
    "example_parties",
    "example_record_counts",
    "party_list",
    "read_records",
    "record_counts",
]

ID_COLUMN = "id"


def party_list(parties: Any) -> list[str]:
    """``options.parties``: 2 to 9 distinct data-party names other than the linkage unit."""
    if isinstance(parties, str) or not isinstance(parties, Sequence):
        raise PrivregTypeError(f'options.parties must be a list of names; got {parties!r}, e.g. ["P1", "P2"].')
    names = [v.check_name("options.parties entry", p) for p in parties]
    if not 2 <= len(names) <= 9 or len(set(names)) != len(names) or LINKAGE_UNIT in names:
        raise PrivregValueError(
            f"options.parties must name 2 to 9 distinct data parties other than {LINKAGE_UNIT!r}; got {names}."
        )
    return names


def declared_records(value: Any, names: Sequence[str], max_records: int) -> list[int] | None:
    """``options.records``: the run's declared record count of every data party, in the
    order of ``options.parties`` (None: not declared yet), each 1..``max_records``."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != len(names):
        raise PrivregValueError(
            f"options.records must list the record count of every data party, in the order of options.parties "
            f"{list(names)}: {len(names)} counts, e.g. records = [120, 98, 131]."
        )
    out = []
    for p, n in zip(names, value):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_records:
            raise PrivregValueError(
                f"options.records gives party {p!r} {n!r} records; give a count from 1 to options.max_records = "
                f"{max_records}."
            )
        out.append(n)
    return out


def record_counts(options: Mapping[str, Any]) -> dict[str, int]:
    """``{data party: declared records}`` of a run's options; an error names the fix when
    the options declare none."""
    if options.get("records") is None:
        raise PrivregValueError(
            "options.records is missing: declare every data party's record count, in the order of options.parties "
            "(e.g. records = [120, 98, 131]), the same at every party; the run's message bounds are derived from "
            "it. privreg party init writes it for its example inputs."
        )
    return dict(zip(options["parties"], options["records"]))


def check_record_count(frame_rows: int, party: str, options: Mapping[str, Any]) -> None:
    """A data party's input holds exactly its declared record count."""
    declared = record_counts(options)[party]
    if frame_rows != declared:
        raise PrivregValueError(
            f"inputs.records holds {frame_rows} records, but options.records declares {declared} for {party!r}; "
            f"declare {frame_rows} for {party!r} in options.records at every party."
        )


def example_record_counts(options: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Path]]) -> dict[str, Any]:
    """``options`` with ``records`` set to the example inputs' record counts."""
    counts = [len(read_records(Path(inputs[p]["records"]))) for p in options["parties"]]
    out = dict(options)
    out["records"] = declared_records(counts, options["parties"], options["max_records"])
    return out


@check_params
def _options(
    *,
    threshold: Annotated[int, Spec(minimum=0, doc="T: largest Hamming distance of a match")] = 3,
    rule: Annotated[str, Spec(choices=RULES, doc="star (the paper) or all")] = "star",
    lsh_groups: Annotated[int, Spec(minimum=1, maximum=256, doc="J: LSH groups")] = 3,
    lsh_bits: Annotated[int, Spec(minimum=1, maximum=64, doc="K: bits per LSH key")] = 20,
    suffix_count: Annotated[int, Spec(minimum=1, maximum=16, doc="x: suffix lengths")] = 2,
    lmin: Annotated[int | None, Spec(minimum=0, maximum=64, doc="shortest suffix (default: Section 4.2.2)")] = None,
    window: Annotated[int | None, Spec(minimum=2, doc="sliding-window size (default: the paper's)")] = None,
    key_bits: Annotated[int, Spec(minimum=MIN_INSECURE_KEY_BITS, doc="Paillier modulus bits")] = MIN_KEY_BITS,
    insecure_small_keys: Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE; tests only)")] = False,
    max_records: Annotated[
        int, Spec(minimum=1, maximum=1_000_000, doc="most records a data party may declare (options.records)")
    ] = 10_000,
    max_block_products: Annotated[int | None, Spec(minimum=1, doc="skip larger final blocks")] = 10_000,
) -> dict[str, Any]:
    if key_bits < MIN_KEY_BITS and not insecure_small_keys:
        raise PrivregValueError(
            f"options.key_bits = {key_bits} is below {MIN_KEY_BITS}; set insecure_small_keys = true for tests only."
        )
    return {
        "threshold": threshold,
        "rule": rule,
        "lsh_groups": lsh_groups,
        "lsh_bits": lsh_bits,
        "suffix_count": suffix_count,
        "lmin": lmin,
        "window": window,
        "key_bits": key_bits,
        "insecure_small_keys": insecure_small_keys,
        "max_records": max_records,
        "max_block_products": max_block_products,
    }


def read_records(path: Path, columns: Sequence[str] = FEBRL_SCHEMA.columns) -> pd.DataFrame:
    """A data party's records: the encoded ``columns`` (FEBRL columns; missing ones are
    empty), as strings (empty cells ``""``); other columns are not read into the
    encoding. The CSV file (with a header row) is read by :func:`privreg.readers.read_table`."""
    if not Path(path).is_file():
        raise PrivregValueError(f"inputs.records: no file at {path}.")
    table = read_table(path, None, format="csv", what="inputs.records")
    if not set(columns) & set(table):
        raise PrivregValueError(f"inputs.records: {path} has none of the columns {list(columns)}.")
    frame = pd.DataFrame({c: pd.Series([x or "" for x in cells], dtype=object) for c, cells in table.items()})
    for col in columns:
        if col not in frame.columns:
            frame[col] = ""
    if ID_COLUMN in frame.columns:
        if not frame[ID_COLUMN].is_unique:
            raise PrivregValueError(f"inputs.records: the {ID_COLUMN!r} column of {path} repeats an id.")
        frame = frame.set_index(ID_COLUMN)
    return frame[list(columns)]


class PPRLDeployment(Deployment):
    """MP-SPPRL (paper 004): data parties and a linkage unit as separate processes."""

    name = "mp-spprl"
    summary = "MP-SPPRL record linkage: n data parties (records CSV, shared secret) and a linkage unit"

    def options(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(raw, Mapping):
            raise PrivregTypeError(f"[options] must be a table; got {raw!r}.")
        rest = dict(raw)
        names = party_list(rest.pop("parties", ["P1", "P2", "P3"]))
        records = rest.pop("records", None)
        try:
            options = {"parties": names, **_options(**rest)}
        except TypeError as exc:  # an unknown keyword: name the allowed ones
            if "unexpected keyword" not in str(exc):
                raise
            raise PrivregValueError(
                f"[options]: {exc}; the options of mp-spprl are: parties, records, threshold, rule, lsh_groups, "
                f"lsh_bits, suffix_count, lmin, window, key_bits, insecure_small_keys, max_records, max_block_products."
            ) from None
        options["records"] = declared_records(records, names, options["max_records"])
        return options

    def example_options(self, options: Mapping[str, Any], inputs: Mapping[str, Mapping[str, Path]]) -> dict[str, Any]:
        return example_record_counts(options, inputs)

    def parties(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        return (LINKAGE_UNIT, *options["parties"])

    def inputs(self, party: str, options: Mapping[str, Any]) -> Mapping[str, str]:
        if party == LINKAGE_UNIT:
            return {}
        return {
            "records": "CSV of this party's records (FEBRL columns, optional id column)",
            "secret": "the data parties' shared secret (32-4096 random bytes, e.g. head -c 32 /dev/urandom)",
        }

    def protocol(
        self, *, party: str, inputs: Mapping[str, Path], options: Mapping[str, Any], rng: RandomSource
    ) -> Protocol:
        records: dict[str, Any] = {}
        secret = None
        if party != LINKAGE_UNIT:
            # the same rule as the pprl workflow's --secret-file: 32-4096 random bytes, not text
            secret = check_secret_file(read_bytes(inputs["secret"], "inputs.secret"), name="inputs.secret")
            frame = read_records(Path(inputs["records"]))
            check_record_count(len(frame), party, options)
            records[party] = encode_records(frame, schema=FEBRL_SCHEMA, secret=secret, party=party)
        blocking = BlockingConfig(
            lsh_groups=options["lsh_groups"],
            lsh_bits=options["lsh_bits"],
            suffix_count=options["suffix_count"],
            lmin=options["lmin"],
            window=options["window"],
        )
        return PPRLProtocol(
            parties=options["parties"],
            records=records,
            secret=secret,
            blocking=blocking,
            threshold=options["threshold"],
            rule=options["rule"],
            key_bits=options["key_bits"],
            insecure_allow_small_keys=options["insecure_small_keys"],
            max_block_products=options["max_block_products"],
            max_records=options["max_records"],
            record_counts=record_counts(options),
            max_filter_bits=max(FEBRL_SCHEMA.blocking.filter_length, FEBRL_SCHEMA.matching.filter_length),
            rng=rng,
            workers=1,
        )

    def write_outputs(self, *, party: str, output: Any, directory: Path) -> dict[str, Path]:
        result = directory / "result.json"
        if party == LINKAGE_UNIT:
            groups = directory / "groups.csv"
            with atomic_write(groups, "party output", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["group", *output["parties"]])
                for g, row in enumerate(np.asarray(output["links"])):
                    w.writerow([g, *(int(x) for x in row)])
            bs = output["block_stats"]
            summary = {
                "linked_groups": int(np.asarray(output["links"]).shape[0]),
                "candidates": output["candidates"],
                "final_blocks": output["blocks"],
                "skipped_blocks": output["skipped_blocks"],
                "lmin": output["lmin"],
                "block_size": {"min": bs.min, "median": bs.median, "mean": bs.mean, "max": bs.max},
                "comparisons": output["counts"].comparisons,
                "required_pairs": output["counts"].required_pairs,
                "phase_seconds": output["timings"],
            }
            write_text(result, json.dumps(summary, indent=2, default=str) + "\n", "party output")
            return {"groups": groups, "result": result}
        links = directory / "links.csv"
        with atomic_write(links, "party output", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["group", "record"])
            rows = sorted((int(g), rid) for (g, _), rid in zip(np.asarray(output["links"]), output["ids"]))
            w.writerows(rows)
        write_text(
            result,
            json.dumps(
                {
                    "linked_records": len(output["links"]),
                    "encrypted": output["encrypted"],
                    "seconds": output["timings"],
                },
                indent=2,
                default=str,
            )
            + "\n",
            "party output",
        )
        return {"links": links, "result": result}

    def score(
        self, *, outputs: Mapping[str, Path], truth: Path, options: Mapping[str, Any]
    ) -> list[tuple[str, float | int]]:
        """Group and pairwise recall/precision of the data parties' ``links.csv`` against
        a truth CSV (party, id, entity); groups hold one record of every data party (paper 004's true groups)
        (:func:`~privreg.plugins.pprl.scoring.score_linkage`)."""
        from privreg.plugins.pprl.scoring import score_linkage

        return score_linkage(outputs=outputs, truth=truth, parties=options["parties"], full_groups=True)

    def example(self, directory: Path, *, options: Mapping[str, Any], seed: int) -> dict[str, dict[str, Path]]:
        """Synthetic FEBRL-like records for every data party (30 % corrupted), a shared
        secret, and ``truth.csv`` (for evaluation only; no party reads it)."""
        return example_parties(directory, parties=options["parties"], max_records=options["max_records"], seed=seed)


def example_parties(
    directory: Path,
    *,
    parties: Sequence[str],
    max_records: int,
    seed: int,
    columns: Sequence[str] = FEBRL_SCHEMA.columns,
) -> dict[str, dict[str, Path]]:
    """Example inputs of a linkage deployment: synthetic FEBRL-like records for every data
    party (30 % of them with edits on ``columns``), written with all ten FEBRL columns; a
    shared secret; and ``truth.csv`` (for evaluation only; no party reads it)."""
    rng = InsecureReproducibleRandom(seed=seed)
    names = list(parties)
    population = synthetic_population(max(10, min(max_records, 200)), rng=rng)
    data = make_parties(
        population, parties=len(names), corruption=0.3, rng=rng, fields=list(columns), party_names=names
    )
    directory.mkdir(parents=True, exist_ok=True)
    secret = directory / "secret.bin"
    secret.write_bytes(rng.random_bytes(32))
    secret.chmod(0o600)
    out: dict[str, dict[str, Path]] = {LINKAGE_UNIT: {}}
    truth_rows = []
    written = [c for c in population.columns if c != ENTITY]
    for p in names:
        frame = data.frames[p]
        path = directory / f"{p}.csv"
        frame[written].rename_axis(ID_COLUMN).reset_index().to_csv(path, index=False)
        truth_rows += [(p, rid, ent) for rid, ent in zip(frame.index, frame[ENTITY])]
        out[p] = {"records": path, "secret": secret}
    with atomic_write(directory / "truth.csv", "example truth", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["party", "id", "entity"])
        w.writerows(truth_rows)
    return out
