"""Workflow ``oov-discovery``: LDP TrieHH on a simulated keyboard population.

Sun et al. 2024 (arXiv:2404.11607), Section 4 in miniature: simulate users typing
English words for ``days`` days (:mod:`privreg.plugins.heavy_hitters.population`), run
LDP TrieHH (Algorithm 2, one or more passes) and report the discovered out-of-vocabulary
words, their coverage, per-layer statistics, the item-level local epsilon (Theorem 1),
the central epsilon after shuffling (Theorem 2, computed by an accountant from the charged
event) and Lemma 1's approximate k-anonymity.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from typing import Annotated, Any

import attrs

from privreg.accountant.shuffle import DEFAULT_SHUFFLE_BOUND, SHUFFLE_BOUNDS
from privreg.core.cost import Cost
from privreg.core.errors import PrivregValueError
from privreg.core.files import atomic_write, write_text
from privreg.core.params import POSITIVE, Spec
from privreg.core.text import escape_controls
from privreg.core.workflow import WorkflowContext, WorkflowResult
from privreg.plugins.heavy_hitters.population import PopulationModel, english_word_law, english_words_loaded
from privreg.plugins.heavy_hitters.privacy import central_epsilon, k_anonymity, local_epsilon
from privreg.plugins.heavy_hitters.sampling import SAMPLERS
from privreg.plugins.heavy_hitters.triehh import VOTE_METHODS, LDPTrieHH, TrieHHResult

__all__ = ["oov_discovery", "format_layers", "estimate_oov"]


def estimate_oov(algorithm: LDPTrieHH, *, days: int, oov_per_day: float, vocabulary: int, votes: str) -> Cost:
    """Peak memory and time of :func:`oov_discovery`, from its parameters: a layer's
    ``T = N * days * oov_per_day`` simulated tokens (about 120 bytes each at the peak,
    one layer in memory at a time), the lexicon (``1.5 * vocabulary`` words with personal
    words, about ``250 + 8 * depth`` bytes each), the largest layer's vote table, and with
    ``votes=reports`` the ``N B d`` report items. Time: about 1.5 us per simulated token of
    the run, 30 us per lexicon word and 0.1 us per report item; plus 96 MiB and 5 s to
    load wordfreq's English list unless this process has it already. Measured on the defaults
    scaled down (``tests/test_cost.py``): within [1, 4] x the tracemalloc peak."""
    layers = algorithm.depth * algorithm.passes
    per_layer = algorithm.users_per_layer * days * oov_per_day
    widest = algorithm.largest_layer_candidates
    items = 0.0
    if votes == "reports":
        d = algorithm.randomizer(widest).subset_size
        items = float(algorithm.users_per_layer) * algorithm.contribution_bound * d
    memory = 120 * per_layer + (250 + 8 * algorithm.depth) * 1.5 * vocabulary + 16 * widest + 16 * items + (8 << 20)
    seconds = 1.5e-6 * per_layer * layers + 3e-5 * vocabulary + 1e-7 * items * layers
    if not english_words_loaded():  # wordfreq's list, loaded once per process
        memory, seconds = memory + (96 << 20), seconds + 5.0
    basis = (
        f"{algorithm.users_per_layer} users x {days} days x {oov_per_day:g} words/day per layer, "
        f"{layers} layers, {vocabulary} words"
    )
    return Cost(memory_bytes=memory, seconds=seconds, basis=basis)


def format_layers(result: TrieHHResult) -> str:
    """The per-layer statistics as a fixed-width table."""
    head = (
        f"{'pass':>4} {'layer':>5} {'users':>9} {'real reports':>12} {'|Z_i|':>9} {'d':>6} "
        f"{'tau_i':>7} {'|P_i|':>6} {'new':>5} {'seconds':>8}"
    )
    rows = [head]
    for s in result.layers:
        rows.append(
            f"{s.pass_index:>4} {s.layer:>5} {s.users:>9} {s.real_reports:>12} {s.candidates:>9} "
            f"{s.subset_size:>6} {s.threshold:>7} {s.kept:>6} {s.new_words:>5} {s.seconds:>8.2f}"
        )
    return "\n".join(rows)


def oov_discovery(
    *,
    context: WorkflowContext,
    epsilon: Annotated[
        float, Spec(doc="item-level local epsilon of every Subset Selection report (Theorem 1)", **POSITIVE)
    ] = 10.0,
    delta: Annotated[
        float,
        Spec(
            doc="delta of the central (eps', delta) after shuffling (Theorem 2)",
            minimum=0,
            exclusive_minimum=True,
            maximum=0.5,
        ),
    ] = 1e-10,
    users_per_layer: Annotated[
        int,
        Spec(doc="N: fresh users per trie layer (a run uses N * depth * passes users)", minimum=1, maximum=100_000_000),
    ] = 20_000,
    contribution_bound: Annotated[
        int, Spec(doc="B: reports per user (distinct prefixes, padded with the dummy gamma)", minimum=1, maximum=1000)
    ] = 2,
    max_prefixes: Annotated[int, Spec(doc="eta_max: prefixes kept per layer", minimum=1, maximum=1_000_000)] = 1000,
    depth: Annotated[int, Spec(doc="D: trie depth (longest word found: D characters)", minimum=1, maximum=64)] = 15,
    passes: Annotated[
        int,
        Spec(doc="tries built one after another on disjoint users; earlier words become known", minimum=1, maximum=100),
    ] = 2,
    sampler: Annotated[
        str,
        Spec(doc="local sampler: greedy (most typed prefixes) or random (uniform distinct prefixes)", choices=SAMPLERS),
    ] = "random",
    days: Annotated[
        int, Spec(doc="T: days of typing per simulated user (at most 100 years)", minimum=1, maximum=36_500)
    ] = 60,
    vocabulary: Annotated[
        int,
        Spec(doc="words of the simulated law (the most frequent English words, wordfreq)", minimum=2, maximum=300_000),
    ] = 30_000,
    known_words: Annotated[
        int,
        Spec(
            doc="size of the known vocabulary V (the most frequent words); the rest are targets",
            minimum=0,
            maximum=299_999,
        ),
    ] = 1000,
    oov_per_day: Annotated[
        float,
        Spec(
            doc="out-of-vocabulary words a simulated user types per day (Poisson mean)",
            minimum=0,
            exclusive_minimum=True,
            maximum=10_000,
        ),
    ] = 0.5,
    personal_share: Annotated[
        float,
        Spec(
            doc="share of a user's unknown words that are their own bursty words (typos, names)", minimum=0, maximum=1
        ),
    ] = 0.5,
    shuffle_bound: Annotated[
        str,
        Spec(
            doc="amplification bound for the central epsilon (fmt21-numerical holds for every randomizer; "
            "fmt23-numerical is refused unless every layer's reports hold one item, d = 1)",
            choices=SHUFFLE_BOUNDS,
        ),
    ] = DEFAULT_SHUFFLE_BOUND,
    votes: Annotated[
        str,
        Spec(
            doc="aggregate: each layer's vote sum sampled directly (same law up to float rounding); "
            "reports: every report drawn by the exact sampler (slower, O(N B d))",
            choices=list(VOTE_METHODS),
        ),
    ] = "aggregate",
    show: Annotated[int, Spec(doc="discovered words printed per pass", minimum=0, maximum=1_000_000)] = 25,
) -> WorkflowResult:
    """Discover out-of-vocabulary words with LDP TrieHH (Sun et al. 2024, Algorithm 2)
    on a simulated population, and report coverage and privacy.

    Guarantee: every report is ``epsilon``-LDP at item level (Theorem 1); the heavy hitters
    and every intermediate prefix set are item-level ``(eps', delta)``-DP once the
    ``users_per_layer * contribution_bound`` reports of a layer are shuffled or securely
    aggregated (Theorem 2). One ``Shuffled`` event is charged for the whole run (each user
    reports in exactly one layer of one pass), before any noise is drawn; ``eps'`` is what
    the basic accountant gives for that event at ``delta``, with the amplification bound
    ``shuffle_bound``. A charger must be able to account shuffled events at ``delta`` (a
    budget session needs ``event_delta``). Users are synthetic (wordfreq English
    frequencies, the ``known_words`` most frequent words known); coverage is measured on
    the simulation's law (an infinitely large test population).

    Timing depends on the simulated population and on the released prefix sets (the
    candidates of each layer); heavy hitters are listed by pass and layer in trie order,
    a function of released votes only.
    """
    if known_words >= vocabulary:
        raise PrivregValueError(f"known_words ({known_words}) must be below vocabulary ({vocabulary})")
    algorithm = LDPTrieHH(
        epsilon=epsilon,
        users_per_layer=users_per_layer,
        contribution_bound=contribution_bound,
        max_prefixes=max_prefixes,
        depth=depth,
        sampler=sampler,
        passes=passes,
        shuffle_bound=shuffle_bound,
        votes=votes,
    )
    context.require(
        "oov-discovery",
        estimate_oov(algorithm, days=days, oov_per_day=oov_per_day, vocabulary=vocabulary, votes=votes),
    )
    context.echo(f"oov-discovery: loading the {vocabulary} most frequent English words (wordfreq)")
    model = PopulationModel(
        law=english_word_law(vocabulary),
        known_words=known_words,
        days=days,
        oov_per_day=oov_per_day,
        personal_share=personal_share,
        depth=depth,
        personal_pool=max(1000, vocabulary // 2),
    )
    _ = model.lexicon.codes  # encode before the progress bar starts
    context.echo(
        f"oov-discovery: {algorithm.users_needed} simulated users in {depth * passes} layers "
        f"of {users_per_layer}, {contribution_bound} reports each"
    )
    groups = model.groups(users_per_layer, depth * passes, context.rng)
    result = algorithm.run(
        groups,
        model.lexicon,
        model.known,
        charger=context.charger,
        rng=context.rng,
        echo=context.echo,
        label="oov-discovery",
        progress=context.progress,
    )
    central = central_epsilon(result.event, delta)
    local = local_epsilon(result.event)
    anonymity = k_anonymity(
        epsilon=epsilon,
        users_per_layer=users_per_layer,
        contribution_bound=contribution_bound,
        max_prefixes=max_prefixes,
        alphabet_size=algorithm.alphabet.size,
    )
    coverage = model.coverage(result.heavy_hitters)
    by_pass = [model.coverage(sum(result.per_pass[: i + 1], ())) for i in range(len(result.per_pass))]
    metrics: dict[str, Any] = {
        "heavy_hitters": len(result.heavy_hitters),
        "coverage": coverage,
        "coverage_by_pass": by_pass,
        "local_epsilon": local,
        "central_epsilon": central,
        "delta": delta,
        "shuffle_bound": result.event.bound,
        "num_reports_per_layer": result.event.num_reports,
        "users": result.users,
        "k_anonymity": anonymity.k,
        "k_anonymity_alpha": anonymity.alpha,
        "layers": [attrs.asdict(s) for s in result.layers],
    }
    outputs = _write(context, result, metrics)
    return WorkflowResult(summary=_summary(result, metrics, anonymity, show), metrics=metrics, outputs=outputs)


def _shown(word: str) -> str:
    """A discovered word as printed and written: ``string.printable`` holds control
    characters (tab, newline, CR, VT, FF), escaped as ``\\xNN``, and ``\\`` as ``\\\\``."""
    return escape_controls(word, keep="", backslash=True)


def _write(context: WorkflowContext, result: TrieHHResult, metrics: Mapping[str, Any]) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    words = context.output_path("heavy_hitters.txt")
    if words is None:
        return outputs
    # the folder exists now: the other files go next to it
    write_text(words, "".join(f"{_shown(w)}\n" for w in result.heavy_hitters), "output")
    layers = words.with_name("layers.csv")
    with atomic_write(layers, "output", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[f.name for f in attrs.fields(type(result.layers[0]))])
        writer.writeheader()
        writer.writerows(attrs.asdict(s) for s in result.layers)
    summary = words.with_name("result.json")
    write_text(summary, json.dumps({k: v for k, v in metrics.items() if k != "layers"}, indent=2) + "\n", "output")
    return {"heavy_hitters": words, "layers": layers, "result": summary}


def _summary(result: TrieHHResult, metrics: Mapping[str, Any], anonymity: Any, show: int) -> str:
    lines = [
        f"LDP TrieHH: {metrics['heavy_hitters']} words discovered from {metrics['users']} users "
        f"({len(result.per_pass)} pass(es))"
    ]
    for i, words in enumerate(result.per_pass, 1):
        shown = ", ".join(map(_shown, words[:show])) + (" ..." if len(words) > show else "")
        lines.append(f"  pass {i}: {len(words)} words: {shown}")
    steps = ", ".join(f"after pass {i}: {100 * c:.1f}%" for i, c in enumerate(metrics["coverage_by_pass"], 1))
    lines.append(
        f"coverage of out-of-vocabulary contributions: {100 * metrics['coverage']:.1f}%"
        + (f" ({steps})" if len(result.per_pass) > 1 else "")
    )
    lines.append(format_layers(result))
    lines.append(
        f"privacy: item-level eps = {metrics['local_epsilon']:g}-LDP per report (Theorem 1); "
        f"central eps' = {metrics['central_epsilon']:.4f} at delta = {metrics['delta']:g} after shuffling "
        f"n = N*B = {metrics['num_reports_per_layer']} reports per layer ({metrics['shuffle_bound']}, "
        f"Theorem 2; one charge for the run)"
    )
    if metrics["central_epsilon"] >= metrics["local_epsilon"]:
        lines.append("  (no amplification at this size: shuffling helps once N*B is large against e^eps)")
    head = f"approximate k-anonymity (Lemma 1, alpha = {anonymity.alpha:g}, s = eta_max |X| + 1 = {anonymity.s}): "
    if anonymity.d <= 2:
        lines.append(head + f"nothing certified: reports hold d = {anonymity.d} items, the lemma needs d >= 3")
    elif anonymity.k is None:
        lines.append(head + f"nothing certified: even Pr(f(0) >= tau) <= {anonymity.certified:.3g} exceeds 1 - alpha")
    else:
        lines.append(head + f"k = {anonymity.k} (Pr(f(k) >= tau) <= {anonymity.certified:.3g})")
    return "\n".join(lines)
