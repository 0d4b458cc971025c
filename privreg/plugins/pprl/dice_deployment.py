"""``privreg party`` for the recommended record linkage (``clk-dice``): each data party and
the linkage unit in its own process.

A data party's inputs are its records (a CSV with the FEBRL columns, an optional ``id``
column naming the records; see :func:`~privreg.plugins.pprl.deployment.read_records`) and
the data parties' shared secret (32 to 4096 random bytes agreed out of band, never given
to the linkage unit). The linkage unit has no input. Outputs: each data party
``links.csv`` (group id, its own record id) and ``result.json``; the linkage unit
``groups.csv`` (group id, party, record index) and ``result.json`` (counts and phase
timings) -- what each learns by :meth:`DiceLinkageProtocol.learns`, nothing more.

Declared sizes: ``options.records`` lists every data party's record count, as for
``mp-spprl`` (:mod:`~privreg.plugins.pprl.deployment`): it is in the options digest, each
party's input must hold exactly its count, and every message is bounded per kind from
these counts, the CLK length and the key size
(:mod:`~privreg.plugins.pprl.message_bounds`).

``options.pad`` (default :data:`~privreg.plugins.pprl.dice_protocol.DEFAULT_PAD` under
``blocking = "linkage-unit"`` and ``"relay"``, 0 under ``"parties"``, where it must stay 0): the fraction
of records with no candidate at a peer that the linkage unit gives dummy candidates
(:mod:`~privreg.plugins.pprl.padding`); ``options.blocking`` (default
:data:`~privreg.plugins.pprl.dice_protocol.DEFAULT_BLOCKING`): who forms the candidate
pairs, the linkage unit from every party's band tokens, each pair of data parties among
themselves (:mod:`~privreg.plugins.pprl.party_blocking`), or each pair of data parties from
the collisions the linkage unit finds among unlinked tokens
(:mod:`~privreg.plugins.pprl.relay_blocking`); ``options.comparison`` (default
:data:`~privreg.plugins.pprl.dice_protocol.DEFAULT_COMPARISON`, ``"dealer"``): how each
threshold decision is computed, by a circuit on Beaver triples the linkage unit deals
(:mod:`privreg.crypto.dealer_compare`, no key) or by Paillier and DGK (``"dgk"``, the
previous mode); all in the options digest like the rest.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from privreg.core.deployment import Deployment
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import atomic_write, read_bytes, write_text
from privreg.core.params import Spec, check_params
from privreg.core.protocol import Protocol
from privreg.core.randomness import RandomSource
from privreg.crypto import MIN_KEY_BITS
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, encode_clks
from privreg.plugins.pprl.deployment import (
    check_record_count,
    declared_records,
    example_parties,
    example_record_counts,
    party_list,
    read_records,
    record_counts,
)
from privreg.plugins.pprl.dice_protocol import (
    BLOCKINGS,
    COMPARISONS,
    DEFAULT_BLOCKING,
    DEFAULT_COMPARISON,
    DEFAULT_PAD,
    LINKAGE_UNIT,
    DiceLinkageProtocol,
)
from privreg.plugins.pprl.kdf import check_secret_file

__all__ = ["DiceDeployment"]

_OPTIONS: tuple[str, ...] = (
    "parties",
    "records",
    "threshold",
    "key_bits",
    "insecure_small_keys",
    "max_records",
    "pad",
    "blocking",
    "comparison",
)


@check_params
def _options(
    *,
    threshold: Annotated[
        float,
        Spec(minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True, doc="Dice threshold of a match"),
    ] = 0.75,
    key_bits: Annotated[int, Spec(minimum=MIN_INSECURE_KEY_BITS, doc="Paillier and DGK modulus bits")] = MIN_KEY_BITS,
    insecure_small_keys: Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE; tests only)")] = False,
    max_records: Annotated[
        int, Spec(minimum=1, maximum=1_000_000, doc="most records a data party may declare (options.records)")
    ] = 10_000,
    pad: Annotated[
        float,
        Spec(
            minimum=0,
            maximum=1,
            doc="fraction of records with no candidate at a peer given dummy candidates (membership padding)",
        ),
    ] = DEFAULT_PAD,
    blocking: Annotated[
        str, Spec(choices=BLOCKINGS, doc="who forms the candidate pairs: the linkage unit or the data parties")
    ] = DEFAULT_BLOCKING,
    comparison: Annotated[
        str, Spec(choices=COMPARISONS, doc="threshold decisions: dealt Beaver triples (dealer) or Paillier and DGK")
    ] = DEFAULT_COMPARISON,
) -> dict[str, Any]:
    if key_bits < MIN_KEY_BITS and not insecure_small_keys:
        raise PrivregValueError(
            f"options.key_bits = {key_bits} is below {MIN_KEY_BITS}; set insecure_small_keys = true for tests only."
        )
    if blocking == "parties" and pad:
        raise PrivregValueError(
            f"options.pad = {pad} applies to blocking = 'linkage-unit' or 'relay' only (under 'parties' the data "
            f"parties compute their candidates themselves, so dummies hide nothing); set pad = 0 or leave it out."
        )
    return {
        "threshold": threshold,
        "key_bits": key_bits,
        "insecure_small_keys": insecure_small_keys,
        "max_records": max_records,
        "pad": pad,
        "blocking": blocking,
        "comparison": comparison,
    }


class DiceDeployment(Deployment):
    """The recommended profile: data parties and a linkage unit as separate processes."""

    name = "clk-dice"
    summary = "record linkage by secure Dice decisions: n data parties (records CSV, shared secret), a linkage unit"

    def options(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(raw, Mapping):
            raise PrivregTypeError(f"[options] must be a table; got {raw!r}.")
        rest = dict(raw)
        names = party_list(rest.pop("parties", ["P1", "P2", "P3"]))
        records = rest.pop("records", None)
        if rest.get("blocking", DEFAULT_BLOCKING) == "parties":
            rest.setdefault("pad", 0.0)  # padding is for linkage-unit blocking only
        try:
            options = {"parties": names, **_options(**rest)}
        except TypeError as exc:  # an unknown keyword: name the allowed ones
            if "unexpected keyword" not in str(exc):
                raise
            raise PrivregValueError(f"[options]: {exc}; the options of clk-dice are: {', '.join(_OPTIONS)}.") from None
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
            secret = check_secret_file(read_bytes(inputs["secret"], "inputs.secret"), name="inputs.secret")
            frame = read_records(Path(inputs["records"]), FEBRL_CLK_SCHEMA.columns)
            check_record_count(len(frame), party, options)
            records[party] = encode_clks(frame, schema=FEBRL_CLK_SCHEMA, secret=secret, party=party)
        return DiceLinkageProtocol(
            parties=options["parties"],
            records=records,
            secret=secret,
            threshold=options["threshold"],
            filter_length=FEBRL_CLK_SCHEMA.filter_length,
            key_bits=options["key_bits"],
            insecure_allow_small_keys=options["insecure_small_keys"],
            max_records=options["max_records"],
            record_counts=record_counts(options),
            exact_passes=len(FEBRL_CLK_SCHEMA.exact),
            pad=options["pad"],
            blocking=options["blocking"],
            comparison=options["comparison"],
            rng=rng,
            workers=1,
        )

    def write_outputs(self, *, party: str, output: Any, directory: Path) -> dict[str, Path]:
        result = directory / "result.json"
        if party == LINKAGE_UNIT:
            groups = directory / "groups.csv"
            with atomic_write(groups, "party output", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["group", "party", "record"])
                for gid, group in zip(output["group_ids"], output["groups"]):
                    w.writerows([int(gid), p, int(r)] for p, r in group)
            summary = {
                "linked_groups": len(output["groups"]),
                "candidates": output["candidate_count"],
                "dummy_pairs": output["dummy_pairs"],
                "accepted_pairs": output["accepted"],
                "refined_pairs": output["refined"],
                "decisions": output["decisions"],
                "bands": output["bands"],
                "phase_seconds": output["timings"],
            }
            write_text(result, json.dumps(summary, indent=2, default=str) + "\n", "party output")
            return {"groups": groups, "result": result}
        links = directory / "links.csv"
        ids = output["ids"]
        with atomic_write(links, "party output", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["group", "record"])
            w.writerows(sorted((int(g), ids[int(r)]) for g, r in np.asarray(output["links"])))
        write_text(
            result,
            json.dumps({"linked_records": len(output["links"]), "seconds": output["timings"]}, indent=2) + "\n",
            "party output",
        )
        return {"links": links, "result": result}

    def score(
        self, *, outputs: Mapping[str, Path], truth: Path, options: Mapping[str, Any]
    ) -> list[tuple[str, float | int]]:
        """Group and pairwise recall/precision of the data parties' ``links.csv`` against
        a truth CSV (party, id, entity); groups hold two or more records
        (:func:`~privreg.plugins.pprl.scoring.score_linkage`)."""
        from privreg.plugins.pprl.scoring import score_linkage

        return score_linkage(outputs=outputs, truth=truth, parties=options["parties"], full_groups=False)

    def example(self, directory: Path, *, options: Mapping[str, Any], seed: int) -> dict[str, dict[str, Path]]:
        """Synthetic FEBRL-like records for every data party (30 % corrupted), a shared
        secret, and ``truth.csv`` (for evaluation only; no party reads it)."""
        return example_parties(directory, parties=options["parties"], max_records=options["max_records"], seed=seed)
