"""Workflow ``privreg run pprl``: MP-SPPRL (paper 004) end to end on simulated parties.

One process plays every data party and the linkage unit (the protocol itself runs with
the parties as separate objects that only exchange messages; ``TcpTransport`` puts them in
separate processes). The data come with ground truth, so the run reports recall,
precision and error rate of the linked groups, the pair completeness of blocking, and the
phase times.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd

from privreg.core.cost import Cost
from privreg.core.errors import PrivregValueError
from privreg.core.files import read_bytes, write_text
from privreg.core.params import Spec
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.randomness import RandomSource, resolve_random
from privreg.core.spark_master import check_master
from privreg.core.workflow import DemoStep, WorkflowContext, WorkflowResult
from privreg.crypto import MAX_KEY_BITS, MIN_KEY_BITS
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.mpc import InMemoryTransport, run_protocol
from privreg.plugins.pprl.bands import MIN_SHARED
from privreg.plugins.pprl.blocking import BlockingConfig
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, PSEUDOPEOPLE_CLK_SCHEMA, ClkSchema, encode_clks
from privreg.plugins.pprl.datasets import (
    ENTITY,
    LinkageData,
    febrl_population,
    load_febrl,
    load_pseudopeople,
    make_parties,
    synthetic_population,
)
from privreg.plugins.pprl.dice_protocol import DiceLinkageProtocol, run_candidates
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.kdf import MAX_SECRET_FILE_BYTES, check_secret_file
from privreg.plugins.pprl.matching import RULES
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, PPRLProtocol
from privreg.plugins.pprl.quality import blocking_quality, candidate_pair_quality, group_quality, linkage_quality
from privreg.plugins.pprl.schema import FEBRL_SCHEMA, pseudopeople_schema
from privreg.timing import PhaseTimer, process_tree_cpu_seconds

__all__ = ["DATASETS", "PROFILES", "pprl_workflow", "prepare_parties", "demo_steps", "estimate_pprl", "link_frames"]

#: ``--data`` choices.
DATASETS = ("synthetic", "febrl", "febrl4", "pseudopeople")
#: ``--profile`` choices: the recommended protocol (CLKs, Dice) and the paper's MP-SPPRL.
PROFILES = ("recommended", "paper")
#: The paper profile's parameters (MP-SPPRL, paper 004); none applies to the recommended one.
PAPER_DEFAULTS: dict[str, Any] = {
    "lsh_groups": 3,
    "lsh_bits": 20,
    "suffix_count": 2,
    "lmin": None,
    "window": None,
    "threshold": 3,
    "rule": "star",
    "max_block_products": 10_000,
}


def prepare_parties(
    *, data: str, parties: int, records: int, corruption: float, rng: Any, overlap: float = 0.5
) -> tuple[LinkageData, Any]:
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
            frame, parties=parties, corruption=corruption, rng=rng, fields=list(FEBRL_SCHEMA.columns), overlap=overlap
        ), FEBRL_SCHEMA
    if data == "febrl":
        frame = febrl_population(4)
        if records < len(frame):
            frame = frame.iloc[:records]
        return make_parties(
            frame, parties=parties, corruption=corruption, rng=rng, fields=list(FEBRL_SCHEMA.columns), overlap=overlap
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


def estimate_pprl(*, records: int, parties: int, key_bits: int, workers: int | None, profile: str = "paper") -> Cost:
    """Peak memory and time of :func:`pprl_workflow` from its parameters.

    ``paper``: each party's records (about 4 KB each with their Bloom filters and block
    keys) and 256 MiB of libraries; about 30 Paillier operations per record and party at
    3 ms each for a 2048-bit key (growing with the cube of the key size), over the
    workers, plus key generation (2 s at 2048 bits, growing with the fourth power).
    ``recommended``: per pair of parties the masked CLKs and masks in flight (about 32 KB
    per record) and 256 MiB; about 1.5 candidate pairs per record and pair of parties at
    0.5 ms of CPU per secure decision, blocking included (measured 0.45 under the default
    ``comparison="dealer"``, which needs no key: ``benchmarks/pprl_decisions.py``), over the
    workers."""
    rows = records * parties
    scale = key_bits / 2048
    cpus = max(1, min(workers or (os.cpu_count() or 1), os.cpu_count() or 1))
    if profile == "recommended":
        pairs = parties * (parties - 1) // 2
        return Cost(
            memory_bytes=32 * 1024 * records * pairs + (256 << 20),
            seconds=1.5 * records * pairs * 0.5e-3 / cpus,
            basis=f"{parties} parties x {records} records, {key_bits}-bit keys, recommended profile",
        )
    return Cost(
        memory_bytes=4096 * rows + (256 << 20),
        seconds=30 * rows * 3e-3 * scale**3 / cpus + 2.0 * scale**4,
        basis=f"{parties} parties x {records} records, {key_bits}-bit key",
    )


def pprl_workflow(
    *,
    context: WorkflowContext,
    profile: Annotated[
        str,
        Spec(
            choices=PROFILES,
            doc="recommended (CLKs, keyed LSH bands, secure Dice >= 0.75 decisions, group solver) or paper "
            "(MP-SPPRL as published: 100-bit filters, double blocking, Paillier Hamming distances, T = 3)",
        ),
    ] = "recommended",
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
            doc="fraction of each party's records with FEBRL-style edits on names and address (the paper: 0.3 "
            "and 0.75)",
        ),
    ] = 0.3,
    overlap: Annotated[
        float,
        Spec(
            minimum=0,
            maximum=1,
            doc="fraction of the population held by every party (only for synthetic/febrl; 1: every party holds "
            "everyone)",
        ),
    ] = 0.5,
    lsh_groups: Annotated[
        int | None, Spec(minimum=1, maximum=64, doc="paper profile: J, LSH groups (the paper: 3)")
    ] = None,
    lsh_bits: Annotated[
        int | None, Spec(minimum=1, maximum=64, doc="paper profile: K, bits per LSH key (the paper: 20)")
    ] = None,
    suffix_count: Annotated[
        int | None, Spec(minimum=1, maximum=64, doc="paper profile: x, suffix lengths lmin..lmin+x-1 (2)")
    ] = None,
    lmin: Annotated[
        int | None,
        Spec(
            minimum=0,
            maximum=1024,
            doc="paper profile: shortest suffix (0: no suffix blocking; default: the dispersion rule of Section 4.2.2)",
        ),
    ] = None,
    window: Annotated[
        int | None,
        Spec(minimum=2, maximum=1_000_000, doc="paper profile: sliding-window size (default: the paper's)"),
    ] = None,
    threshold: Annotated[
        int | None, Spec(minimum=0, maximum=100_000, doc="paper profile: T, largest Hamming distance of a match (3)")
    ] = None,
    rule: Annotated[
        str | None,
        Spec(
            choices=RULES,
            doc="paper profile: star (the paper's verdict: encrypting party's record close to every other) or all",
        ),
    ] = None,
    key_bits: Annotated[
        int,
        Spec(
            minimum=MIN_INSECURE_KEY_BITS,
            maximum=MAX_KEY_BITS,
            doc="Paillier (and DGK) modulus bits (>= 2048 unless insecure)",
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
            doc="paper profile: skip a final block that would yield more candidate groups than this (10,000)",
        ),
    ] = None,
    workers: Annotated[
        int | None, Spec(minimum=1, maximum=1024, doc="worker processes for the cryptography (at most --max-workers)")
    ] = None,
    backend: Annotated[
        str,
        Spec(
            choices=["local", "spark"],
            doc="recommended profile: local (in-process) or spark (band tokens, candidate pairs and the "
            "cryptography's batches on Spark; pip install privreg[spark], Java 17)",
        ),
    ] = "local",
    spark_master: Annotated[str, Spec(doc="Spark master URL (only with --backend spark)")] = "local[2]",
) -> WorkflowResult:
    """Link the records of several parties (paper 004, and the recommended profile).

    ``profile="recommended"`` (default): CLKs (:mod:`~privreg.plugins.pprl.clk`), keyed LSH
    bands (:mod:`~privreg.plugins.pprl.bands`), a secure ``Dice >= 0.75`` decision per
    candidate pair and a greedy group solver
    (:class:`~privreg.plugins.pprl.dice_protocol.DiceLinkageProtocol`): the linkage unit
    learns only the decisions. ``profile="paper"``: MP-SPPRL as published (Tong et al. 2019):
    keyed Bloom filters, double blocking, the sliding-window merge and Paillier secure
    Hamming distances (Algorithm 1), which the linkage unit learns.

    Security: semi-honest parties, no collusion of the linkage unit with a data party (each
    protocol's ``caveats`` and ``learns()`` say what each party learns). No differential
    privacy is claimed, so nothing is charged to the budget. The shared secret is drawn from
    the run's random source unless ``secret_file`` holds one (32 to 4096 random bytes, not
    text: :func:`~privreg.plugins.pprl.kdf.check_secret_file`).

    Timing depends on the records (candidate pairs, blocks), as the transcript does;
    nothing here hides it.
    """
    rng = context.rng
    if data in ("febrl4", "pseudopeople") and (parties != 3 or records != 1000 or corruption != 0.3 or overlap != 0.5):
        raise PrivregValueError(
            f"parameters parties, records, corruption and overlap apply only to --data synthetic or febrl; "
            f"--data {data} has its own parties and records: drop them"
        )
    paper = {
        "lsh_groups": lsh_groups,
        "lsh_bits": lsh_bits,
        "suffix_count": suffix_count,
        "lmin": lmin,
        "window": window,
        "threshold": threshold,
        "rule": rule,
        "max_block_products": max_block_products,
    }
    given = sorted(k for k, x in paper.items() if x is not None)
    if profile == "recommended" and given:
        raise PrivregValueError(
            f"parameters {', '.join(given)} apply only to --profile paper (the recommended profile fixes its own "
            f"blocking and threshold): drop them or pass profile=paper"
        )
    settings = {k: PAPER_DEFAULTS[k] if x is None else x for k, x in paper.items()}
    if backend != "spark" and spark_master != "local[2]":
        raise PrivregValueError("parameter spark_master applies only to --backend spark: pass it, or drop it")
    if backend == "spark":
        check_master(spark_master)  # malformed or unreachable: refused now, not by Spark minutes later
    if backend == "spark" and profile != "recommended":
        raise PrivregValueError("parameter backend=spark applies only to --profile recommended: drop it")
    context.check_workers("workers", workers)
    if key_bits < MIN_KEY_BITS and not insecure_small_keys:
        raise PrivregValueError(
            f"--key-bits {key_bits} is below {MIN_KEY_BITS}; pass --insecure-small-keys (insecure_small_keys=true "
            f"in Python or privreg party) to run with an insecure key (tests and demos only)."
        )
    secret = _secret(secret_file, rng)  # checked before any work
    fixed = {"febrl4": (2, 5000), "pseudopeople": (3, 10_000)}
    n_parties, n_records = fixed.get(data, (parties, records))
    context.require(
        "pprl",
        estimate_pprl(records=n_records, parties=n_parties, key_bits=key_bits, workers=workers, profile=profile),
    )
    linkage, schema = prepare_parties(
        data=data, parties=parties, records=records, corruption=corruption, rng=rng, overlap=overlap
    )
    clk_schema = PSEUDOPEOPLE_CLK_SCHEMA if data == "pseudopeople" else FEBRL_CLK_SCHEMA
    sizes = ", ".join(f"{p}: {len(linkage.frames[p])}" for p in linkage.parties)
    context.echo(f"pprl ({profile}): {linkage.source or data}; records {sizes}; generating {key_bits}-bit keys ...")
    metrics, transcript = _link(
        linkage.frames,
        linkage.parties,
        profile=profile,
        entity_column=ENTITY,
        paper_schema=schema,
        clk_schema=clk_schema,
        secret=secret,
        settings=settings,
        key_bits=key_bits,
        insecure=insecure_small_keys,
        rng=rng,
        workers=workers,
        spark_master=spark_master if backend == "spark" else None,
        progress=context.progress,
    )
    metrics = {"data": data, "source": linkage.source, "backend": backend, **metrics}
    summary = _summary(metrics, linkage.source or data, sizes, transcript)
    outputs = {}
    out = context.output_path("pprl.json")
    if out is not None:
        write_text(out, json.dumps(metrics, indent=2, default=str) + "\n", "output")
        outputs["result"] = out
    return WorkflowResult(summary=summary, metrics=metrics, outputs=outputs)


def link_frames(
    frames: Mapping[str, pd.DataFrame],
    *,
    profile: str = "recommended",
    entity_column: str = ENTITY,
    key_bits: int = MIN_KEY_BITS,
    rng: RandomSource | None = None,
    workers: int | None = None,
    secret: bytes | None = None,
    insecure_small_keys: bool = False,
    progress: ProgressCallback | None = None,
    protocol_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Link the parties' FEBRL-column ``frames`` (``{party: DataFrame}``, ground truth in
    ``entity_column``) with ``profile``; returns the workflow's metrics (recall,
    precision, pairwise figures, pair completeness, reduction ratio, timings, what the
    linkage unit sees). For benchmarks and notebooks; the secret is fresh unless given.
    ``progress`` (a :data:`~privreg.core.progress.ProgressCallback`) hears of the
    encoding and the protocol's phases (counts only); it changes no result.
    ``protocol_options``: keyword arguments for the recommended profile's
    :class:`DiceLinkageProtocol` (e.g. ``{"blocking": "linkage-unit", "comparison": "dgk"}``
    for the mode before issue #33), validated there."""
    if profile not in PROFILES:
        raise PrivregValueError(f"profile must be one of {list(PROFILES)}; got {profile!r}")
    progress = check_progress("progress", progress)
    rng_ = resolve_random(rng)
    metrics, _ = _link(
        frames,
        tuple(frames),
        profile=profile,
        entity_column=entity_column,
        paper_schema=FEBRL_SCHEMA,
        clk_schema=FEBRL_CLK_SCHEMA,
        secret=rng_.random_bytes(32) if secret is None else secret,
        settings=dict(PAPER_DEFAULTS),
        key_bits=key_bits,
        insecure=insecure_small_keys,
        rng=rng,
        workers=workers,
        progress=progress,
        protocol_options=protocol_options,
    )
    return metrics


def _link(
    frames: Mapping[str, pd.DataFrame],
    parties: Sequence[str],
    *,
    profile: str,
    entity_column: str,
    paper_schema: Any,
    clk_schema: ClkSchema,
    secret: bytes,
    settings: Mapping[str, Any],
    key_bits: int,
    insecure: bool,
    rng: RandomSource | None,
    workers: int | None,
    spark_master: str | None = None,
    progress: ProgressCallback | None = None,
    protocol_options: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    with contextlib.ExitStack() as stack:
        blocking = None
        if spark_master is not None:  # blocking and every crypto batch on Spark
            from privreg.crypto.parallel import use_executor
            from privreg.plugins.pprl.spark import SparkBlocking, SparkChunkExecutor

            blocking = stack.enter_context(SparkBlocking(master=spark_master, driver_memory="8g"))
            stack.enter_context(use_executor(SparkChunkExecutor(blocking.spark)))
        return _link_here(
            frames,
            parties,
            profile=profile,
            entity_column=entity_column,
            paper_schema=paper_schema,
            clk_schema=clk_schema,
            secret=secret,
            settings=settings,
            key_bits=key_bits,
            insecure=insecure,
            rng=rng,
            workers=workers,
            blocking=blocking,
            progress=progress,
            protocol_options=protocol_options,
        )


def _link_here(
    frames: Mapping[str, pd.DataFrame],
    parties: Sequence[str],
    *,
    profile: str,
    entity_column: str,
    paper_schema: Any,
    clk_schema: ClkSchema,
    secret: bytes,
    settings: Mapping[str, Any],
    key_bits: int,
    insecure: bool,
    rng: RandomSource | None,
    workers: int | None,
    blocking: Any = None,
    progress: ProgressCallback | None = None,
    protocol_options: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    if protocol_options and profile != "recommended":
        raise PrivregValueError(f"protocol_options apply to the recommended profile only; got profile={profile!r}")
    timer = PhaseTimer()
    cpu0 = _cpu()
    encoding = PhaseProgress(progress, "encoding", total=len(parties), unit="party")
    encoded: dict[str, Any] = {}
    if profile == "recommended":
        for p in parties:
            encoded[p] = encode_clks(frames[p], schema=clk_schema, secret=secret, party=p, entity_column=entity_column)
            encoding.advance()
        t_encode = timer.lap("encode")[0]
        proto: Any = DiceLinkageProtocol(
            parties=parties,
            records=encoded,
            secret=secret,
            filter_length=clk_schema.filter_length,
            key_bits=key_bits,
            insecure_allow_small_keys=insecure,
            rng=rng,
            workers=workers,
            blocking_backend=blocking,
            progress=progress,
            **dict(protocol_options or {}),
        )
    else:
        for p in parties:
            encoded[p] = encode_records(
                frames[p], schema=paper_schema, secret=secret, party=p, entity_column=entity_column
            )
            encoding.advance()
        t_encode = timer.lap("encode")[0]
        proto = PPRLProtocol(
            parties=parties,
            records=encoded,
            secret=secret,
            blocking=BlockingConfig(
                lsh_groups=settings["lsh_groups"],
                lsh_bits=settings["lsh_bits"],
                suffix_count=settings["suffix_count"],
                lmin=settings["lmin"],
                window=settings["window"],
            ),
            threshold=settings["threshold"],
            rule=settings["rule"],
            key_bits=key_bits,
            insecure_allow_small_keys=insecure,
            max_block_products=settings["max_block_products"],
            rng=rng,
            workers=workers,
            progress=progress,
        )
    with timer.phase("protocol"):
        # payloads are not kept: the traffic tables need only sizes, and at 3 x 100,000
        # records a second decoded copy of every message grew past 19 GB
        result = run_protocol(proto, transport=InMemoryTransport(keep_payloads=False))
    lu = result.outputs[LINKAGE_UNIT]
    entities = list(encoded.values())
    common: dict[str, Any] = {
        "profile": profile,
        "parties": list(parties),
        "records": {p: len(e) for p, e in encoded.items()},
        "key_bits": key_bits,
        "encode_seconds": t_encode,
        "protocol_seconds": timer.wall["protocol"],
        "cpu_seconds": _cpu() - cpu0,
        "phase_seconds": dict(lu["timings"]),
    }
    if profile == "recommended":
        idx = {p: i for i, p in enumerate(parties)}
        cands: dict[tuple[int, int], np.ndarray] = {
            (min(idx[a], idx[b]), max(idx[a], idx[b])): _oriented(c, idx[a] > idx[b])
            for (a, b), c in run_candidates(result.outputs, parties).items()
        }
        gq = group_quality(lu["group_indices"], entities=entities, parties=parties)
        cq = candidate_pair_quality(cands, entities=entities, parties=parties)
        metrics = {
            **common,
            "true_groups": gq.true_groups,
            "linked_groups": gq.groups,
            "correct": gq.exact,
            "recall": gq.recall,
            "precision": gq.precision,
            "pairwise_recall": gq.pairwise.recall,
            "pairwise_precision": gq.pairwise.precision,
            "candidates": cq.pairs,
            "pair_completeness": cq.recall,
            "reduction_ratio": cq.reduction_ratio,
            "accepted_pairs": lu["accepted"],
            "refined_pairs": lu["refined"],
            "decisions": lu["decisions"],
            "dummy_pairs": lu["dummy_pairs"],  # membership padding: decided, then discarded
            "skipped_blocks": lu["skipped_blocks"],
            # K is agreed by the data parties (the linkage unit sees only J token columns)
            "bands": {
                "bands": result.outputs[parties[0]]["bands"],
                "bits": result.outputs[parties[0]]["band_bits"],
                "min_shared": MIN_SHARED,
            },
            "dice_threshold": float(proto.threshold),
            "levels": [float(x) for x in proto.levels],
            "linkage_unit_sees": proto.learns()[LINKAGE_UNIT],
        }
        return metrics, result.transcript
    linked = linkage_quality(lu["links"], entities=entities, parties=parties)
    blocked = blocking_quality(lu["groups"], entities=entities, parties=parties)
    bs = lu["block_stats"]
    metrics = {
        **common,
        "true_groups": linked.true_groups,
        "linked_groups": linked.linked,
        "correct": linked.true_linked,
        "recall": linked.recall,
        "precision": linked.precision,
        "pairwise_recall": linked.pairwise.recall,
        "pairwise_precision": linked.pairwise.precision,
        "error_rate": linked.error_rate,
        "candidates": lu["candidates"],
        "final_blocks": lu["blocks"],
        "lmin": lu["lmin"],
        "skipped_blocks": lu["skipped_blocks"],
        "reduction_ratio": blocked.reduction_ratio,
        "pair_completeness": blocked.pair_completeness,
        "pairs_quality": blocked.pairs_quality,
        "block_size": {"min": bs.min, "median": bs.median, "mean": bs.mean, "max": bs.max},
        **{k: settings[k] for k in ("lsh_groups", "lsh_bits", "threshold", "rule")},
        "comparisons": lu["counts"].comparisons,
        "required_pairs": lu["counts"].required_pairs,
        "encrypted": dict(lu["counts"].encrypted),
        "linkage_unit_sees": PAPER_LU_SEES,
    }
    return metrics, result.transcript


#: What the paper profile's linkage unit sees (for reports).
PAPER_LU_SEES = (
    "keyed LSH tokens and masked suffixes (block memberships), the candidate groups and the exact Hamming distance "
    "of every compared pair"
)


def _oriented(c: np.ndarray, swap: bool) -> np.ndarray:
    return c[:, ::-1] if swap else c


def _cpu() -> float:
    """CPU seconds of this process, its reaped children and its live worker processes."""
    return process_tree_cpu_seconds()


def _summary(m: Mapping[str, Any], source: str, sizes: str, transcript: Any) -> str:
    phases = "\n".join(f"    {k:<24} {s:8.2f} s" for k, s in m["phase_seconds"].items())
    head = (
        f"{'Recommended profile' if m['profile'] == 'recommended' else 'MP-SPPRL (paper profile)'} on {source}: "
        f"{len(m['parties'])} parties ({sizes}), {m['key_bits']}-bit keys\n"
    )
    if m["profile"] == "recommended":
        body = (
            f"  CLKs of {FEBRL_CLK_SCHEMA.filter_length} bits; bands J = {m['bands']['bands']}, K = "
            f"{m['bands']['bits']}, candidates share >= {m['bands']['min_shared']} band keys\n"
            f"  blocking: {m['candidates']} candidate pairs, pair completeness {m['pair_completeness']:.4f}, "
            f"reduction ratio {m['reduction_ratio']:.6f}\n"
            f"  matching: secure Dice >= {m['dice_threshold']:g} decisions ({m['decisions']} in all, "
            f"{m['refined_pairs']} pairs decided again at {', '.join(f'{x:g}' for x in m['levels'])}); "
            f"{m['accepted_pairs']} accepted\n"
        )
    else:
        bs = m["block_size"]
        body = (
            f"  blocking: J = {m['lsh_groups']}, K = {m['lsh_bits']}, lmin = {m['lmin']}, {m['final_blocks']} final "
            f"blocks, {m['candidates']} candidate groups ({m['skipped_blocks']} oversized blocks skipped)\n"
            f"    final block sizes min/median/mean/max {bs['min']}/{bs['median']:g}/{bs['mean']:.1f}/{bs['max']}; "
            f"reduction ratio {m['reduction_ratio']:.6f}, pair completeness {m['pair_completeness']:.3f}\n"
            f"  matching: T = {m['threshold']} ({m['rule']} rule); distances computed {m['comparisons']} of "
            f"{m['required_pairs']} required\n"
        )
    return (
        head
        + body
        + f"  linked {m['linked_groups']} groups of {m['true_groups']} true ones: recall {m['recall']:.3f}, precision "
        f"{m['precision']:.3f}; pairwise recall {m['pairwise_recall']:.3f}, precision {m['pairwise_precision']:.3f}\n"
        f"  the linkage unit saw: {m['linkage_unit_sees']}\n"
        f"  time: encoding {m['encode_seconds']:.2f} s, protocol {m['protocol_seconds']:.2f} s wall; "
        f"{m['cpu_seconds']:.1f} CPU s in all; linkage unit phases:\n{phases}\n"
        f"  traffic per step:\n{_indent(transcript.step_table(), 4)}"
    )


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _demo_step(ctx: WorkflowContext) -> str:
    res = pprl_workflow(context=ctx, data="synthetic", parties=3, records=300, corruption=0.3, workers=1)
    m = res.metrics
    return (
        f"3 parties ({', '.join(str(x) for x in m['records'].values())} generated person records, 30% corrupted), "
        f"the recommended profile:\n"
        f"  1024-bit CLKs, keyed LSH bands, one secure Dice >= {m['dice_threshold']:g} decision per candidate pair "
        f"(a circuit on Beaver triples the linkage unit deals):\n"
        f"  {m['candidates']} candidate pairs, {m['linked_groups']} groups linked of {m['true_groups']} true, recall "
        f"{m['recall']:.2f}, precision {m['precision']:.2f}, in {m['protocol_seconds']:.1f} s\n"
        f"  (the paper's MP-SPPRL: --profile paper). The linkage unit received no filter, popcount or distance,\n"
        f"  but the band tokens two records share estimate their similarity (tests/test_pprl_leakage.py)."
    )


def demo_steps() -> list[DemoStep]:
    return [
        DemoStep(
            title="Record linkage (paper 004 and the recommended profile): secure Dice decisions",
            run=_demo_step,
            order=50,
        )
    ]
