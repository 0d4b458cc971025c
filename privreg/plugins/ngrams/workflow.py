"""The ``ngrams`` workflow (``privreg run ngrams ...``) and the plugin's demo step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from privreg.core.charging import EventLog
from privreg.core.cost import Cost, Limits
from privreg.core.errors import PrivregValueError
from privreg.core.files import write_text
from privreg.core.params import POSITIVE, Spec
from privreg.core.progress import ProgressCallback, silent
from privreg.core.spark_master import check_master
from privreg.core.text import escape_controls
from privreg.core.validation import split_columns
from privreg.core.workflow import DemoStep, WorkflowContext, WorkflowResult
from privreg.plugins.ngrams.backends import INPUT_FORMATS, LocalBackend, Tokenizer, make_backend
from privreg.plugins.ngrams.dpne import VALID_COUNTS, VARIANTS, ExtractionResult, extract_ngrams, table3
from privreg.plugins.ngrams.engines import LocalNgramEngine, NgramEngine, SparkNgramEngine
from privreg.plugins.ngrams.levels import PRUNINGS
from privreg.plugins.ngrams.noise_plan import METHODS
from privreg.plugins.ngrams.partitions import PARTITION_BYTES, PartitionedCorpus
from privreg.plugins.ngrams.spamassassin import bundled_path
from privreg.readers import compression

__all__ = ["ngrams_workflow", "demo_steps", "run_extraction", "estimate_ngrams"]

_NAMES = {"dpne": "DPNE", "dpsu-all": "DPSU-all", "dpsu-even": "DPSU-even", "dpsu-single": "DPSU-single"}


def run_extraction(
    *,
    context: WorkflowContext,
    input: Path | None,
    backend: str,
    tokenizer: Tokenizer,
    user_column: str = "user_id",
    text_column: str = "text",
    format: str | None = None,
    spark_master: str = "local[2]",
    workers: int = 1,
    columns: Sequence[str] | None = None,
    curator: bool = False,
    **options: Any,
) -> ExtractionResult:
    """Read (user, text) records on ``backend``, tokenize them and run
    :func:`~privreg.plugins.ngrams.dpne.extract_ngrams` with ``options``, charging
    ``context.charger`` and drawing noise from ``context.rng``. ``columns`` names the
    columns of a CSV file without a header row (local backend only). The exact token
    count is echoed only for a ``curator`` (the data holder: it is not a DP release).

    The local backend streams the file into user partitions on disk
    (:meth:`PartitionedCorpus.from_file`): memory is bounded by a partition and the count
    tables, not by the file; ``workers`` processes tokenize and run the per-partition passes."""
    path = bundled_path() if input is None else Path(input)
    fmt = "jsonl" if input is None else format
    be = make_backend(backend) if backend == "local" else make_backend(backend, master=spark_master)
    engine: NgramEngine | None = None
    corpus: PartitionedCorpus | None = None
    try:
        context.echo(f"ngrams: reading {path.name} on the {backend} backend")
        if isinstance(be, LocalBackend):
            corpus = PartitionedCorpus.from_file(
                path,
                tokenizer=tokenizer,
                user_column=user_column,
                text_column=text_column,
                format=fmt,
                workers=workers,
                backend=be,
                columns=columns,
            )
            engine = LocalNgramEngine(corpus, be, workers=workers)
        else:
            records = be.read_records(path, user_column=user_column, text_column=text_column, format=fmt)
            engine = SparkNgramEngine(be, be.tokenize(records, tokenizer))  # type: ignore[attr-defined]
        if curator:
            context.echo(f"ngrams: {engine.tokens_total:,} tokens (--curator: exact, not private)")
        return extract_ngrams(engine, charger=context.charger, rng=context.rng, echo=context.echo, **options)
    finally:
        if engine is not None:
            engine.close()
        if corpus is not None:
            corpus.close()
        be.close()


def _progress(context: WorkflowContext, flag: bool) -> ProgressCallback:
    """The run's progress callback; the deprecated ``--progress`` adds a note and, for a
    Python caller who set no callback, shows progress on stderr as the flag used to."""
    if not flag:
        return context.progress
    context.echo("ngrams: NOTE: --progress is deprecated and will be removed: every run shows its progress")
    if context.progress is not silent:
        return context.progress
    from privreg.progress import console_reporter

    return console_reporter()


def _check_combination(
    *,
    method: str,
    length: int | None,
    max_n: int,
    schedule: str,
    decay: float | None,
    valid_count: str,
    sample_rate: float | None,
    backend: str,
    spark_master: str,
    workers: int,
    columns: str = "",
) -> None:
    """Refuse a parameter given without the setting it applies to (it would be ignored)."""
    if method == "dpsu-single" and length is None:
        raise PrivregValueError("method dpsu-single needs --length k (the one n-gram length to extract)")
    if length is not None and method != "dpsu-single":
        raise PrivregValueError(
            f"parameter length applies only to --method dpsu-single; got it with --method {method}: drop --length"
        )
    if length is not None and length > max_n:
        raise PrivregValueError(f"parameter length = {length} exceeds max_n = {max_n}; pass --length <= --max-n")
    if method != "dpne" and (schedule != "equal" or decay is not None):
        raise PrivregValueError(
            f"parameters schedule and decay apply only to --method dpne; got them with --method {method}"
        )
    if decay is not None and schedule != "geometric":
        raise PrivregValueError("parameter decay applies only to --schedule geometric: pass it, or drop --decay")
    if sample_rate is not None and valid_count != "estimate":
        raise PrivregValueError(
            "parameter sample_rate applies only to --valid-count estimate: pass it, or drop --sample-rate"
        )
    if backend != "spark" and spark_master != "local[2]":
        raise PrivregValueError("parameter spark_master applies only to --backend spark: pass it, or drop it")
    if backend == "spark":
        check_master(spark_master)  # malformed or unreachable: refused now, not by Spark minutes later
    if backend != "local" and workers != 1:
        raise PrivregValueError("parameter workers applies only to --backend local (Spark has its own executors)")
    if backend != "local" and columns:
        raise PrivregValueError(
            "parameter columns (a CSV file without a header row) applies only to --backend local; add a header row"
        )


def estimate_ngrams(input: Path | None, *, max_n: int, workers: int, limits: Limits) -> Cost:
    """Peak memory and time of :func:`ngrams_workflow` from the input's size: ``B``
    expanded bytes (a compressed file counted four times its size, at most
    ``--max-input-gib``), about ``B / 5`` tokens. Memory: each worker's partition
    (``8 x PARTITION_BYTES``), the driver's merged count tables (24 bytes per token at
    most) and 96 MiB of libraries; time: about 1.2 us per token per 9 lengths (12 s for 1e7
    tokens at ``T = 9``, ``benchmarks/ngrams.py``) and 10 ns per input byte."""
    path = bundled_path() if input is None else Path(input)
    if not path.is_file():
        raise PrivregValueError(f"input {str(path)!r} is not a file")
    size = path.stat().st_size
    expanded = min(size * (4 if compression(path) else 1), limits.max_input_bytes)
    tokens = expanded / 5
    memory = (96 << 20) + workers * 8 * PARTITION_BYTES + 24 * tokens
    seconds = 1.2e-6 * tokens * max(1.0, max_n / 9) / max(1, min(workers, 2)) + 1e-8 * expanded
    return Cost(memory_bytes=memory, seconds=seconds, basis=f"{size} bytes of input, T = {max_n}, {workers} worker(s)")


def ngrams_workflow(
    *,
    context: WorkflowContext,
    input: Annotated[
        Path | None,
        Spec(
            doc="CSV (header row unless --columns), JSONL or Parquet file of (user, text) rows, or a mail archive "
            "(SpamAssassin layout: ham messages, one user per sender); default: bundled SpamAssassin ham slice"
        ),
    ] = None,
    format: Annotated[
        str | None, Spec(doc="input format (default: from the file suffix)", choices=list(INPUT_FORMATS))
    ] = None,
    columns: Annotated[
        str, Spec(doc="comma-separated names of the columns of a CSV file without a header row (default: it has one)")
    ] = "",
    user_column: Annotated[str, Spec(doc="column holding the user id")] = "user_id",
    text_column: Annotated[str, Spec(doc="column holding the text")] = "text",
    epsilon: Annotated[float, Spec(doc="privacy parameter epsilon of the whole extraction", **POSITIVE)] = 4.0,
    delta: Annotated[
        float,
        Spec(
            doc="privacy parameter delta of the whole extraction (half to the Gaussians, half to rho_1)",
            minimum=0,
            exclusive_minimum=True,
            maximum=0.5,
        ),
    ] = 1e-7,
    max_n: Annotated[int, Spec(doc="T: the longest n-gram length extracted", minimum=1, maximum=64)] = 9,
    max_keys: Annotated[
        int,
        Spec(
            doc="Delta_k: the most distinct k-grams one user contributes, for every length k",
            minimum=1,
            maximum=1_000_000,
        ),
    ] = 300,
    method: Annotated[
        str, Spec(doc="dpne, or a DPSU baseline of Table 3 (dpsu-single needs --length)", choices=list(METHODS))
    ] = "dpne",
    length: Annotated[
        int | None, Spec(doc="the one n-gram length of dpsu-single (only with it; <= max_n)", minimum=1, maximum=64)
    ] = None,
    schedule: Annotated[
        str,
        Spec(
            doc="sigma_k schedule of DPNE: equal, or geometric sigma_k = c sigma_(k-1) (needs --decay)",
            choices=["equal", "geometric"],
        ),
    ] = "equal",
    decay: Annotated[
        float | None,
        Spec(
            doc="c of the geometric schedule, 0 < c < 1 (only with --schedule geometric)",
            minimum=0,
            exclusive_minimum=True,
            maximum=1,
        ),
    ] = None,
    eta: Annotated[
        float,
        Spec(
            doc="tolerated fraction of spurious n-grams (sets rho_k, k >= 2)",
            minimum=0,
            exclusive_minimum=True,
            maximum=0.5,
        ),
    ] = 0.01,
    pruning: Annotated[
        str,
        Spec(doc="valid k-grams: both = (S1 x S(k-1)) n (S(k-1) x S1), single = S(k-1) x S1", choices=list(PRUNINGS)),
    ] = "both",
    variant: Annotated[
        str,
        Spec(
            doc="scalable (Appendix A, V_k implicit) or explicit (Algorithm 1, histogram over all of V_k)",
            choices=list(VARIANTS),
        ),
    ] = "scalable",
    valid_count: Annotated[
        str,
        Spec(
            doc="|V_k| exactly (default) or by EstimateValidKgrams (Algorithm 3, as the paper)",
            choices=list(VALID_COUNTS),
        ),
    ] = "exact",
    sample_rate: Annotated[
        float | None,
        Spec(
            doc="p of EstimateValidKgrams (default: about 2^20 draws; only with --valid-count estimate)",
            minimum=0,
            exclusive_minimum=True,
            maximum=1,
        ),
    ] = None,
    backend: Annotated[
        str,
        Spec(
            doc="local (numpy/pandas, in-process) or spark (PySpark; pip install privreg[spark], Java 17)",
            choices=["local", "spark"],
        ),
    ] = "local",
    spark_master: Annotated[str, Spec(doc="Spark master URL (only with --backend spark)")] = "local[2]",
    token_pattern: Annotated[
        str, Spec(doc="regular expression matching one token (never the empty string)")
    ] = r"[\w']+",  # noqa: S107 -- a regex
    lowercase: Annotated[bool, Spec(doc="lower-case text before tokenizing")] = True,
    progress: Annotated[
        bool,
        Spec(
            doc="deprecated, to be removed: every run now shows its progress on stderr (PRIVREG_PROGRESS=off "
            "silences it)"
        ),
    ] = False,
    workers: Annotated[
        int,
        Spec(
            doc="processes that tokenize and run the per-partition passes (local backend; at most --max-workers)",
            minimum=1,
            maximum=1024,
        ),
    ] = 1,
    curator: Annotated[
        bool,
        Spec(
            doc="the data holder's view: also print and record the corpus's exact token count (not a DP release: "
            "private against no one who sees it)"
        ),
    ] = False,
) -> WorkflowResult:
    """Differentially private n-gram extraction (Kim-Gopi-Kulkarni-Yekhanin 2021, paper 002):
    DPNE (Algorithm 1, or the scalable Algorithm 2 of Appendix A) or a DPSU baseline
    (Table 3), on (user, text) records from a CSV, JSONL or Parquet file (default: the
    bundled SpamAssassin ham slice, one user per sender).

    Guarantee: (epsilon, delta)-DP for adding or removing one user with all their text.
    Each user contributes at most ``max_keys`` (Delta_k) distinct n-grams per length, with
    DPSU's weighted Gaussian policy; noise is calibrated by Theorem 2.1 (sigma*, sigma_k,
    rho_1) and the whole plan is charged as one block before any noise is drawn (a
    Gaussian event per length, plus ApproxDP(0, delta/2) for the DPSU threshold). The output,
    n-grams per length, is downward closed with pruning='both' (Proposition 2.1); the
    expected number of spurious k-grams is at most eta min(|S_(k-1)|, |V_k|).

    Writes ``ngrams-<k>.txt`` (one n-gram per line), ``table.txt`` (counts per length in
    the shape of the paper's Table 3) and ``result.json``; with a plain event log as the
    charger also ``ledger.jsonl`` (the CLI keeps its own ``ledger.sqlite``).

    Nothing printed or recorded depends on the data beyond the releases: the cost
    estimate reads the input's size in bytes only (public), and the corpus's exact token
    count is shown only with ``curator`` (the data holder's view).

    Released n-grams are listed in sorted order (a function of the released sets, never of
    the input's row order). Timing depends on the data: it grows with the tokens and the
    distinct n-grams (``benchmarks/ngrams.py``: about 12 s for 1e7 tokens), and with the
    sizes of the released sets, so an observer of the running time learns the corpus's
    scale. Run where timing is not observable.
    """
    if user_column == text_column:  # each text would be its own user: no per-user bound at all
        raise PrivregValueError(
            f"parameters user_column and text_column both name column {user_column!r}; name the column of user "
            f"ids and the column of texts"
        )
    _check_combination(
        method=method,
        length=length,
        max_n=max_n,
        schedule=schedule,
        decay=decay,
        valid_count=valid_count,
        sample_rate=sample_rate,
        backend=backend,
        spark_master=spark_master,
        workers=workers,
        columns=columns,
    )
    names = split_columns("columns", columns) or None
    if names and input is None:
        raise PrivregValueError("parameter columns names the columns of --input; pass --input too, or drop --columns")
    context.check_workers("workers", workers)
    try:
        tokenizer = Tokenizer(pattern=token_pattern, lowercase=lowercase)
    except PrivregValueError as exc:
        raise PrivregValueError(f"parameter token_pattern: {exc}") from None
    context.require("ngrams", estimate_ngrams(input, max_n=max_n, workers=workers, limits=context.limits))
    result = run_extraction(
        context=context,
        input=input,
        backend=backend,
        tokenizer=tokenizer,
        user_column=user_column,
        text_column=text_column,
        format=format,
        spark_master=spark_master,
        workers=workers,
        columns=names,
        curator=curator,
        epsilon=epsilon,
        delta=delta,
        max_n=max_n,
        max_keys=max_keys,
        method=method,
        length=length,
        schedule=schedule,
        decay=decay,
        eta=eta,
        pruning=pruning,
        variant=variant,
        valid_count_mode=valid_count,
        sample_rate=sample_rate,
        progress=_progress(context, progress),
    )
    counts = result.counts
    table = table3({_NAMES[method]: counts}, max_n)
    plan = result.plan
    outputs: dict[str, Path] = {}
    for k, grams in sorted(result.ngrams.items()):
        out = context.output_path(f"ngrams-{k}.txt")
        if out is not None:
            # one n-gram a line: a token pattern may match control characters (\n too)
            lines = (escape_controls(g, keep="", backslash=True) + "\n" for g in grams)
            write_text(out, "".join(lines), "output")
            outputs[f"ngrams-{k}"] = out
    metrics = {
        "method": method,
        "epsilon": epsilon,
        "delta": delta,
        "max_n": max_n,
        **({"tokens": result.tokens} if curator else {}),
        "counts": {str(k): c for k, c in counts.items()},
        "total": sum(counts.values()),
        "sigma_star": plan.paper.sigma_star,
        "rho_1": plan.paper.rho_1,
        "sigmas": {str(k): r.sigma for k, r in result.lengths.items()},
        "rhos": {str(k): r.rho for k, r in result.lengths.items()},
        "valid": {str(k): r.valid for k, r in result.lengths.items() if r.valid is not None},
        "applied_epsilon": plan.applied_epsilon,
        "verified_by": plan.verified_by,
        "charged": result.charged,
        "verified_epsilon": plan.verified_epsilon,
    }
    for name, text in (("table.txt", table + "\n"), ("result.json", json.dumps(metrics, indent=2) + "\n")):
        out = context.output_path(name)
        if out is not None:
            write_text(out, text, "output")
            outputs[name.split(".")[0]] = out
    if isinstance(context.charger, EventLog):
        out = context.output_path("ledger.jsonl")
        if out is not None:
            outputs["ledger"] = context.charger.write_jsonl(out)
    examples = []
    for k in sorted(result.ngrams, reverse=True):
        if result.ngrams[k]:
            examples = result.ngrams[k][:3]
            break
    corpus = f"{result.tokens:,} tokens (--curator: exact, not private)" if curator else "the input"
    summary = (
        f"{_NAMES[method]} on {corpus}, epsilon = {epsilon:g}, delta = {delta:g}, "
        f"T = {max_n}, Delta = {max_keys}, eta = {eta:g}\n\n{table}\n\n"
        f"Theorem 2.1: sigma* = {plan.paper.sigma_star:.6g}, rho_1 = {plan.paper.rho_1:.6g}; "
        f"the plan's {result.charged} release(s) charged as one block before any noise (a length whose "
        f"V_k is empty is skipped, already paid for); the whole plan verified by the {plan.verified_by} accountant "
        f"(epsilon {plan.verified_epsilon:.9g} at delta {delta:g})."
        + (f"\nlongest released n-grams: {'; '.join(examples)}" if examples else "")
    )
    return WorkflowResult(summary=summary, metrics=metrics, outputs=outputs)


def _demo(ctx: WorkflowContext) -> str:
    result = run_extraction(  # the bundled slice is public: its token count is no secret
        context=ctx, input=None, backend="local", tokenizer=Tokenizer(), epsilon=2.0, delta=1e-7, max_n=5, max_keys=20
    )
    table = table3({"DPNE": result.counts}, 5)
    longest = next((result.ngrams[k][:4] for k in sorted(result.ngrams, reverse=True) if result.ngrams[k]), [])
    return (
        f"DPNE (paper 002) on a SpamAssassin ham slice (795 senders, each a user), {result.tokens:,} tokens; "
        f"epsilon 2, delta 1e-7, T = 5, Delta = 20. Few users, so only n-grams shared by dozens of "
        f"senders survive:\n{table}\ne.g. {'; '.join(longest) or '-'}"
    )


def demo_steps() -> list[DemoStep]:
    return [DemoStep(title="DP n-gram extraction (DPNE) on SpamAssassin ham", run=_demo, order=20)]
