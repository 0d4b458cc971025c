"""Workflow ``privreg run pprl``: MP-SPPRL (paper 004) end to end on simulated parties.

One process plays every data party and the linkage unit (the protocol itself runs with
the parties as separate objects that only exchange messages; ``TcpTransport`` puts them in
separate processes). The data come with ground truth, so the run reports recall,
precision and error rate of the linked groups, the pair completeness of blocking, and the
phase times.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from privreg.core.cost import Cost
from privreg.core.errors import PrivregValueError
from privreg.core.files import read_bytes, write_text
from privreg.core.params import Spec
from privreg.core.workflow import DemoStep, WorkflowContext, WorkflowResult
from privreg.crypto import MAX_KEY_BITS, MIN_KEY_BITS
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.mpc import run_protocol
from privreg.plugins.pprl.blocking import BlockingConfig
from privreg.plugins.pprl.datasets import (
    ENTITY,
    LinkageData,
    febrl_population,
    load_febrl,
    load_pseudopeople,
    make_parties,
    synthetic_population,
)
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.kdf import MAX_SECRET_FILE_BYTES, check_secret_file
from privreg.plugins.pprl.matching import RULES
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, PPRLProtocol
from privreg.plugins.pprl.quality import blocking_quality, linkage_quality
from privreg.plugins.pprl.schema import FEBRL_SCHEMA, pseudopeople_schema
from privreg.timing import PhaseTimer

__all__ = ["DATASETS", "pprl_workflow", "prepare_parties", "demo_steps", "estimate_pprl"]

#: ``--data`` choices.
DATASETS = ("synthetic", "febrl", "febrl4", "pseudopeople")


def prepare_parties(*, data: str, parties: int, records: int, corruption: float, rng: Any) -> tuple[LinkageData, Any]:
    """The parties' record frames (with ground truth) and the encoding schema.

    ``synthetic``: a generated population of ``records`` people, copied to ``parties``
    parties and corrupted (FEBRL-style edits on ``corruption`` of each party's records);
    ``febrl``: the same over the FEBRL 4 population (original records); ``febrl4``: the
    two FEBRL 4 files as they are (2 parties, 5,000 records each, true links);
    ``pseudopeople``: its census, social security and W-2 samples (3 parties, matched on
    names: the social security source has no address).
    """
    if data == "synthetic":
        frame = synthetic_population(records, rng=rng)
        return make_parties(
            frame, parties=parties, corruption=corruption, rng=rng, fields=list(FEBRL_SCHEMA.columns)
        ), FEBRL_SCHEMA
    if data == "febrl":
        frame = febrl_population(4)
        if records < len(frame):
            frame = frame.iloc[:records]
        return make_parties(
            frame, parties=parties, corruption=corruption, rng=rng, fields=list(FEBRL_SCHEMA.columns)
        ), FEBRL_SCHEMA
    if data == "febrl4":
        return load_febrl(4), FEBRL_SCHEMA
    if data == "pseudopeople":
        return load_pseudopeople(), pseudopeople_schema(matching="names")
    raise PrivregValueError(f"data must be one of {list(DATASETS)}; got {data!r}.")


def _secret(path: Path | None, rng: Any) -> bytes:
    if path is None:
        return rng.random_bytes(32)
    p = Path(path)
    if not p.is_file():
        raise PrivregValueError(f"parameter secret_file {str(p)!r} is not a file; {_KEY_HINT}")
    if p.stat().st_size > MAX_SECRET_FILE_BYTES:  # never read a large file whole
        return check_secret_file(b"\0" * (MAX_SECRET_FILE_BYTES + 1), name="secret_file")
    return check_secret_file(read_bytes(p, "secret_file"), name="secret_file")


_KEY_HINT = "generate one with: head -c 32 /dev/urandom > secret.bin"


def estimate_pprl(*, records: int, parties: int, key_bits: int, workers: int | None) -> Cost:
    """Peak memory and time of :func:`pprl_workflow` from its parameters: each party's
    records (about 4 KB each with their Bloom filters and block keys) and 256 MiB of
    libraries; time: about 30 Paillier operations per record and party at 3 ms each for a
    2048-bit key (growing with the cube of the key size), over the workers, plus key
    generation (2 s at 2048 bits, growing with the fourth power)."""
    rows = records * parties
    scale = key_bits / 2048
    cpus = max(1, min(workers or (os.cpu_count() or 1), os.cpu_count() or 1))
    return Cost(
        memory_bytes=4096 * rows + (256 << 20),
        seconds=30 * rows * 3e-3 * scale**3 / cpus + 2.0 * scale**4,
        basis=f"{parties} parties x {records} records, {key_bits}-bit key",
    )


def pprl_workflow(
    *,
    context: WorkflowContext,
    data: Annotated[
        str,
        Spec(
            choices=DATASETS,
            doc="synthetic (generated, no extra packages), febrl (FEBRL 4 population corrupted for --parties "
            "parties), febrl4 (its two files, 2 parties) or pseudopeople (census/SSA/W-2, 3 parties); "
            "febrl* and pseudopeople need pip install 'privreg[pprl]'",
        ),
    ] = "synthetic",
    parties: Annotated[int, Spec(minimum=3, maximum=9, doc="data parties (only for synthetic/febrl; 3-9)")] = 3,
    records: Annotated[
        int, Spec(minimum=10, maximum=1_000_000, doc="population size (only for synthetic/febrl)")
    ] = 1000,
    corruption: Annotated[
        float,
        Spec(
            minimum=0,
            maximum=1,
            doc="fraction of each party's records with FEBRL-style edits (the paper: 0.3 and 0.75)",
        ),
    ] = 0.3,
    lsh_groups: Annotated[int, Spec(minimum=1, maximum=64, doc="J: LSH groups (the paper: 3)")] = 3,
    lsh_bits: Annotated[int, Spec(minimum=1, maximum=64, doc="K: bits per LSH key (the paper: 20)")] = 20,
    suffix_count: Annotated[int, Spec(minimum=1, maximum=64, doc="x: suffix lengths lmin..lmin+x-1")] = 2,
    lmin: Annotated[
        int | None,
        Spec(
            minimum=0,
            maximum=1024,
            doc="shortest suffix (0: no suffix blocking; default: the dispersion rule of Section 4.2.2)",
        ),
    ] = None,
    window: Annotated[
        int | None, Spec(minimum=2, maximum=1_000_000, doc="sliding-window size (default: the paper's)")
    ] = None,
    threshold: Annotated[int, Spec(minimum=0, maximum=100_000, doc="T: largest Hamming distance of a match")] = 3,
    rule: Annotated[
        str,
        Spec(
            choices=RULES,
            doc="star: the paper's verdict (encrypting party's record close to every other); all: every pair",
        ),
    ] = "star",
    key_bits: Annotated[
        int,
        Spec(
            minimum=MIN_INSECURE_KEY_BITS, maximum=MAX_KEY_BITS, doc="Paillier modulus bits (>= 2048 unless insecure)"
        ),
    ] = MIN_KEY_BITS,
    insecure_small_keys: Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE)")] = False,
    secret_file: Annotated[
        Path | None,
        Spec(
            doc="file of the data parties' shared secret: 32 to 4096 random bytes, not text (head -c 32 "
            "/dev/urandom > secret.bin); default: a fresh one"
        ),
    ] = None,
    max_block_products: Annotated[
        int | None,
        Spec(
            minimum=1,
            maximum=1_000_000_000,
            doc="skip a final block that would yield more candidate groups than this (reported)",
        ),
    ] = 10_000,
    workers: Annotated[
        int | None, Spec(minimum=1, maximum=1024, doc="worker processes for Paillier batches (at most --max-workers)")
    ] = None,
) -> WorkflowResult:
    """Link the records of several parties with MP-SPPRL (Tong et al. 2019, paper 004):
    keyed Bloom filters, double blocking (Hamming LSH, then suffix blocking), the
    sliding-window merge at the linkage unit and Paillier secure Hamming distances
    (Algorithm 1) with early termination.

    Security: semi-honest parties, no collusion of the linkage unit with a data party
    (:class:`~privreg.plugins.pprl.protocol.PPRLProtocol` states what each party learns).
    No differential privacy is claimed, so nothing is charged to the budget. The shared
    secret is drawn from the run's random source unless ``secret_file`` holds one (32 to
    4096 random bytes, not text: :func:`~privreg.plugins.pprl.kdf.check_secret_file`).

    Timing depends on the records (block sizes, candidate pairs, early termination), as
    the transcript does; nothing here hides it.
    """
    rng = context.rng
    if data in ("febrl4", "pseudopeople") and (parties != 3 or records != 1000 or corruption != 0.3):
        raise PrivregValueError(
            f"parameters parties, records and corruption apply only to --data synthetic or febrl; --data {data} "
            f"has its own parties and records: drop them"
        )
    context.check_workers("workers", workers)
    if key_bits < MIN_KEY_BITS and not insecure_small_keys:
        raise PrivregValueError(
            f"key_bits={key_bits} is below {MIN_KEY_BITS}; pass insecure_small_keys=true to run with an "
            f"insecure key (tests and demos only)."
        )
    secret = _secret(secret_file, rng)  # checked before any work
    fixed = {"febrl4": (2, 5000), "pseudopeople": (3, 10_000)}
    n_parties, n_records = fixed.get(data, (parties, records))
    context.require("pprl", estimate_pprl(records=n_records, parties=n_parties, key_bits=key_bits, workers=workers))
    timer = PhaseTimer()
    linkage, schema = prepare_parties(data=data, parties=parties, records=records, corruption=corruption, rng=rng)
    encoded = {
        p: encode_records(linkage.frames[p], schema=schema, secret=secret, party=p, entity_column=ENTITY)
        for p in linkage.parties
    }
    t_encode = timer.lap("encode")[0]
    sizes = ", ".join(f"{p}: {len(e)}" for p, e in encoded.items())
    context.echo(f"pprl: {linkage.source or data}; records {sizes}; generating a {key_bits}-bit key ...")
    config = BlockingConfig(
        lsh_groups=lsh_groups, lsh_bits=lsh_bits, suffix_count=suffix_count, lmin=lmin, window=window
    )
    proto = PPRLProtocol(
        parties=linkage.parties,
        records=encoded,
        secret=secret,
        blocking=config,
        threshold=threshold,
        rule=rule,
        key_bits=key_bits,
        insecure_allow_small_keys=insecure_small_keys,
        max_block_products=max_block_products,
        rng=rng,
        workers=workers,
    )
    with timer.phase("protocol"):
        result = run_protocol(proto)
    wall = timer.wall["protocol"]
    lu = result.outputs[LINKAGE_UNIT]
    entities = list(encoded.values())  # encoded with ENTITY: quality reads each one's entities
    linked = linkage_quality(lu["links"], entities=entities, parties=linkage.parties)
    blocked = blocking_quality(lu["groups"], entities=entities, parties=linkage.parties)
    bs = lu["block_stats"]
    metrics: dict[str, Any] = {
        "data": data,
        "source": linkage.source,
        "parties": list(linkage.parties),
        "records": {p: len(e) for p, e in encoded.items()},
        "true_groups": linked.true_groups,
        "linked_groups": linked.linked,
        "correct": linked.true_linked,
        "recall": linked.recall,
        "precision": linked.precision,
        "error_rate": linked.error_rate,
        "candidates": lu["candidates"],
        "final_blocks": lu["blocks"],
        "lmin": lu["lmin"],
        "skipped_blocks": lu["skipped_blocks"],
        "reduction_ratio": blocked.reduction_ratio,
        "pair_completeness": blocked.pair_completeness,
        "pairs_quality": blocked.pairs_quality,
        "block_size": {"min": bs.min, "median": bs.median, "mean": bs.mean, "max": bs.max},
        "lsh_groups": lsh_groups,
        "lsh_bits": lsh_bits,
        "threshold": threshold,
        "rule": rule,
        "key_bits": key_bits,
        "encode_seconds": t_encode,
        "protocol_seconds": wall,
        "phase_seconds": dict(lu["timings"]),
        "comparisons": lu["counts"].comparisons,
        "required_pairs": lu["counts"].required_pairs,
        "encrypted": dict(lu["counts"].encrypted),
    }
    phases = "\n".join(f"    {k:<24} {s:8.2f} s" for k, s in lu["timings"].items())
    summary = (
        f"MP-SPPRL on {linkage.source or data}: {len(linkage.parties)} parties ({sizes}), "
        f"{key_bits}-bit Paillier key\n"
        f"  blocking: J = {lsh_groups}, K = {lsh_bits}, lmin = {lu['lmin']}, {lu['blocks']} final blocks, "
        f"{lu['candidates']} candidate groups ({lu['skipped_blocks']} oversized blocks skipped)\n"
        f"    final block sizes min/median/mean/max {bs.min}/{bs.median:g}/{bs.mean:.1f}/{bs.max}; reduction ratio "
        f"{blocked.reduction_ratio:.6f}, pair completeness {blocked.pair_completeness:.3f}, pairs quality "
        f"{blocked.pairs_quality:.4f}\n"
        f"  matching: T = {threshold} ({rule} rule); distances computed {lu['counts'].comparisons} of "
        f"{lu['counts'].required_pairs} required\n"
        f"  linked {linked.linked} groups of {linked.true_groups} true ones: recall {linked.recall:.3f}, "
        f"precision {linked.precision:.3f}, error rate {linked.error_rate:.3f}\n"
        f"  time: encoding {t_encode:.2f} s, protocol {wall:.2f} s; linkage unit phases:\n{phases}\n"
        f"  traffic per step:\n{_indent(result.transcript.step_table(), 4)}"
    )
    outputs = {}
    out = context.output_path("pprl.json")
    if out is not None:
        write_text(out, json.dumps(metrics, indent=2, default=str) + "\n", "output")
        outputs["result"] = out
    return WorkflowResult(summary=summary, metrics=metrics, outputs=outputs)


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _demo_step(ctx: WorkflowContext) -> str:
    res = pprl_workflow(
        context=ctx, data="synthetic", parties=3, records=150, corruption=0.3, lsh_groups=8, lsh_bits=12, workers=1
    )
    m = res.metrics
    return (
        f"3 parties ({', '.join(str(x) for x in m['records'].values())} generated person records, 30% "
        f"corrupted), keyed Bloom filters, double blocking\n"
        f"  (J = 8, K = 12) and Paillier secure Hamming distances at 2048 bits, T = 3 as in the paper:\n"
        f"  {m['candidates']} candidate groups, {m['linked_groups']} linked of {m['true_groups']} true, recall "
        f"{m['recall']:.2f}, precision {m['precision']:.2f}, in {m['protocol_seconds']:.1f} s\n"
        f"  (T = 3 caps recall on corrupted records: benchmarks/pprl_quality.py). The linkage unit saw\n"
        f"  keyed block tokens, masked suffixes and distances, never a filter (the transcript tests check it)."
    )


def demo_steps() -> list[DemoStep]:
    return [
        DemoStep(title="Record linkage (paper 004): MP-SPPRL with Paillier Hamming distances", run=_demo_step, order=50)
    ]
