"""LDP TrieHH (Sun et al. 2024, arXiv:2404.11607, Algorithm 2) and its multi-pass variant.

The server learns a trie of heavy prefixes layer by layer. In layer ``i`` a fresh group
of ``N`` users sees the extendable prefixes ``P_{i-1}``; every user takes the distinct
length-``(i+1)`` prefixes of their unknown words that extend one of them (``Z_i = P_{i-1}
x X``), keeps ``B`` with the local sampler (padding with the dummy ``gamma``), and sends
``B`` Subset Selection reports over ``Z_i U {gamma}``. The server sums the multi-hot votes,
keeps the ``eta_max`` most voted prefixes, and every kept prefix ending in ``⊥`` is a
heavy hitter. Multi-pass: each later pass runs Algorithm 2 on new users with the earlier
heavy hitters added to the known words.

Implementation notes (each is post-processing of the votes or a public function of
public state, so Theorems 1-2 are unchanged):

* ``P_0 = X`` without ``⊥`` (a lone ``⊥`` would be the empty word), and a kept prefix
  ending in ``⊥`` is reported as a heavy hitter but never extended (a finished word has
  no continuation), so ``Z_i`` only holds extensions of unfinished prefixes.
* Line 23 keeps ``{z : v[z] >= tau_i}``; ties at ``tau_i`` are broken uniformly at random
  so that ``|P_i| <= eta_max``, the per-layer maximum the algorithm's input names.
  Prefixes with fewer than ``min_votes`` votes (default 1) are never kept, which only
  matters when fewer than ``eta_max`` prefixes got any vote (e.g. without noise).

Scale. Only the sum of a layer's votes is kept (the shuffler's or secure aggregation's
role: the server never needs the reports' order). By default it is sampled directly from
the standard plugin's :meth:`SubsetSelection.vote_counts` (the devices' reports simulated
in aggregate); ``votes="reports"`` forms every report chunk by chunk with
``SubsetSelection.randomize`` instead, so the reports of a layer are never all in memory.
Privacy is charged once per run (see :mod:`privreg.plugins.heavy_hitters.privacy`): every
call charges its reports to a per-layer allowance that refuses any report beyond the ``N*B`` the run's event covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from privreg.accountant.shuffle import DEFAULT_SHUFFLE_BOUND, SHUFFLE_BOUNDS
from privreg.core import validation as v
from privreg.core.charging import Charger
from privreg.core.errors import BudgetExceededError, PrivregTypeError, PrivregValueError
from privreg.core.events import PrivacyEvent, Shuffled
from privreg.core.progress import PhaseProgress, ProgressCallback, check_progress
from privreg.core.randomness import RandomSource, resolve_random
from privreg.mechanisms import SubsetSelection, uniform_chunked
from privreg.plugins.heavy_hitters.alphabet import Alphabet
from privreg.plugins.heavy_hitters.privacy import triehh_event
from privreg.plugins.heavy_hitters.sampling import SAMPLERS, contribution_counts, sample_contributions
from privreg.plugins.heavy_hitters.users import Lexicon, UserWords
from privreg.timing import PhaseTimer, process_cpu_seconds

__all__ = ["LDPTrieHH", "LayerStats", "TrieHHResult", "VOTE_METHODS", "layer_votes"]

_NAME = "ldp-triehh"
# share of a group's entries above which _layer_pairs compresses whole arrays by a mask
# (cheaper than gathering by index when most entries stay)
_DENSE_SHARE = 0.5


def _ignore(message: str) -> None:
    """Progress sink of library callers that asked for silence."""


class _LayerAllowance:
    """Charger for the ``randomize`` calls of one layer: accepts the run's own
    ``LocalDP`` event for at most ``num_reports`` reports in all, the reports that the
    ``Shuffled`` event charged for the run covers in this layer; refuses anything else
    before any noise is drawn."""

    def __init__(self, covered: Shuffled) -> None:
        self.covered = covered
        self.used = 0

    def charge(
        self,
        event: PrivacyEvent,
        *,
        mechanism: str,
        parameters: Mapping[str, Any],
        label: str = "",
        randomness: Mapping[str, Any] | None = None,
        stated: PrivacyEvent | None = None,
    ) -> None:
        if event != self.covered.event:
            raise PrivregValueError(
                f"{label or mechanism}: event {event.to_json()} is not the randomizer event the "
                f"run was charged for ({self.covered.event.to_json()})"
            )
        n = int(parameters["num_reports"])
        if self.used + n > self.covered.num_reports:
            raise BudgetExceededError(
                f"{label or mechanism}: {self.used + n} reports in one layer exceed the "
                f"{self.covered.num_reports} (N*B) covered by the charged event"
            )
        self.used += n


#: how a layer's votes are formed: ``aggregate`` samples their sum directly
#: (:meth:`SubsetSelection.vote_counts_from_histogram`), ``reports`` forms every report
#: (:func:`layer_votes`: :meth:`SubsetSelection.randomize`, exact to the bit)
VOTE_METHODS = ("aggregate", "reports")


def layer_votes(
    randomizer: SubsetSelection,
    inputs: np.ndarray,
    *,
    charger: Charger,
    rng: RandomSource,
    chunk_size: int,
    label: str = "",
) -> np.ndarray:
    """Algorithm 2, lines 14-21: the aggregated multi-hot vote vector (length ``s``) of
    one Subset Selection report per entry of ``inputs``, formed ``chunk_size`` at a time
    through ``randomizer.randomize`` (each chunk charged to ``charger``)."""
    votes = np.zeros(randomizer.s, dtype=np.int64)
    for start in range(0, inputs.size, chunk_size):
        out = randomizer.randomize(inputs[start : start + chunk_size], charger=charger, rng=rng, label=label)
        votes += np.bincount(out.reports.ravel(), minlength=randomizer.s)
    return votes


def _layer_pairs(group: UserWords, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(owner, prefix code, count)`` of the entries of ``group`` whose word has a code in
    ``table`` (``-1``: none), in entry order. Where most entries have one (the first
    layers) the arrays are compressed by a mask; where few do (deep layers) only those
    entries are gathered, their owners counted from the CSR offsets."""
    valid = (table >= 0)[group.words]
    if np.count_nonzero(valid) > _DENSE_SHARE * valid.size:
        return group.owners[valid], table[group.words[valid]], group.counts[valid]
    at = np.flatnonzero(valid)
    per_user = np.diff(np.searchsorted(at, group.offsets))
    owners = np.repeat(np.arange(group.num_users, dtype=np.int64), per_user)
    return owners, table[group.words[at]], group.counts[at]


def _votes(x: Any) -> str:
    if x not in VOTE_METHODS:
        raise PrivregValueError(f"votes must be one of {VOTE_METHODS}; got {x!r}")
    return x


@attrs.frozen(kw_only=True)
class LayerStats:
    """What the server saw and decided in one layer (``layer`` is Algorithm 2's ``i``)."""

    pass_index: int
    layer: int
    users: int
    reports: int
    real_reports: int  # reports of a real prefix (the rest carry the dummy gamma)
    candidates: int  # |Z_i|
    subset_size: int  # d of Subset Selection over Z_i U {gamma}
    threshold: int  # tau_i: the eta_max-th largest vote (0 if fewer candidates)
    kept: int  # |P_i|
    new_words: int  # kept prefixes ending in the end symbol
    seconds: float  # wall clock, from the arrival of the layer's group to its decision
    cpu_seconds: float  # this process's CPU time over the same span


@attrs.frozen(kw_only=True)
class TrieHHResult:
    """Heavy hitters (words without the end symbol) in discovery order, per pass, with
    per-layer statistics and the one event charged for the run."""

    heavy_hitters: tuple[str, ...]
    per_pass: tuple[tuple[str, ...], ...]
    layers: tuple[LayerStats, ...]
    event: Shuffled
    users: int


def _sampler(x: Any) -> str:
    if x not in SAMPLERS:
        raise PrivregValueError(f"sampler must be one of {SAMPLERS}; got {x!r}")
    return x


def _bound(x: Any) -> str:
    if x not in SHUFFLE_BOUNDS:
        raise PrivregValueError(f"shuffle_bound must be one of {SHUFFLE_BOUNDS}; got {x!r}")
    return x


@attrs.frozen(kw_only=True)
class LDPTrieHH:
    """LDP TrieHH (Algorithm 2) with ``passes`` passes (Section 3, "Multiple-pass
    algorithm"), over ``alphabet`` (default ``string.printable`` plus ``⊥``).

    Parameters: ``epsilon`` (local, per report), ``users_per_layer`` N,
    ``contribution_bound`` B, ``max_prefixes`` eta_max, ``depth`` D, ``sampler``
    (``"greedy"`` or ``"random"``), ``passes``, ``min_votes`` (see the module notes),
    ``shuffle_bound`` (the amplification bound the charged event names;
    ``"fmt23-numerical"`` is refused at construction unless every layer's reports hold a
    single item, see :attr:`SubsetSelection.admits_fmt23_decomposition`), ``votes``
    (``"aggregate"``, the default: each layer's vote sum is sampled directly, the same
    law as the reports' up to double-precision rounding, in ``O(|Z_i| log |Z_i|)``; or
    ``"reports"``: every report formed by the exact sampler, ``O(N B d)``) and
    ``chunk_size`` (reports per ``randomize`` call with ``votes="reports"``; memory is
    about ``8 d chunk_size`` bytes).

    Guarantees (Sun et al. 2024): item-level ``epsilon``-LDP (Theorem 1) and, with the
    reports shuffled or securely aggregated, central item-level ``(eps', delta)``-DP for
    the heavy hitters and every prefix set, ``eps'`` the shuffle bound for ``N*B``
    reports (Theorem 2). :meth:`run` charges exactly one event, :meth:`privacy_event`,
    before it draws any noise; a run uses ``depth * passes`` disjoint groups of ``N``
    users.
    """

    epsilon: float = attrs.field(converter=lambda x: v.check_epsilon("epsilon", x))
    users_per_layer: int = attrs.field(converter=lambda x: v.check_int("users_per_layer", x, minimum=1))
    contribution_bound: int = attrs.field(converter=lambda x: v.check_int("contribution_bound", x, minimum=1))
    max_prefixes: int = attrs.field(converter=lambda x: v.check_int("max_prefixes", x, minimum=1))
    depth: int = attrs.field(converter=lambda x: v.check_int("depth", x, minimum=1))
    sampler: str = attrs.field(default="greedy", converter=_sampler)
    passes: int = attrs.field(default=1, converter=lambda x: v.check_int("passes", x, minimum=1))
    alphabet: Alphabet = attrs.field(factory=Alphabet, validator=attrs.validators.instance_of(Alphabet))
    min_votes: int = attrs.field(default=1, converter=lambda x: v.check_int("min_votes", x, minimum=1))
    shuffle_bound: str = attrs.field(default=DEFAULT_SHUFFLE_BOUND, converter=_bound)
    chunk_size: int = attrs.field(default=1 << 15, converter=lambda x: v.check_int("chunk_size", x, minimum=1))
    votes: str = attrs.field(default="aggregate", converter=_votes)

    def __attrs_post_init__(self) -> None:
        self.randomizer(self.first_layer_candidates)  # refuse an unrealisable epsilon now
        if self.shuffle_bound == "fmt23-numerical":
            # d grows with the domain, so the largest layer decides: if its reports hold one
            # item every layer's do (k-ary randomized response, inside FMT23's class)
            widest = self.randomizer(self.largest_layer_candidates)
            if not widest.admits_fmt23_decomposition:
                raise PrivregValueError(
                    f"shuffle_bound='fmt23-numerical' (--shuffle-bound fmt23-numerical) does not hold "
                    f"here: with epsilon={self.epsilon}, layers of up to {self.largest_layer_candidates} "
                    f"candidates use Subset Selection with d={widest.subset_size} >= 2 items per report, "
                    f"outside the class the FMT23 bound holds for after its erratum "
                    f"(privreg.accountant.shuffle.admits_fmt23_decomposition rejects it); use "
                    f"shuffle_bound='fmt21-numerical' (the default, valid for every eps0-LDP randomizer)"
                )

    @property
    def first_layer_candidates(self) -> int:
        """``|Z_1| = (|X| - 1) |X|``: every symbol but ``⊥``, extended by every symbol."""
        return (self.alphabet.size - 1) * self.alphabet.size

    @property
    def largest_layer_candidates(self) -> int:
        """The largest ``|Z_i|`` any layer can have: ``|Z_1|``, or ``eta_max |X|`` from
        layer 2 on (at most ``eta_max`` prefixes are extended by every symbol)."""
        later = self.max_prefixes * self.alphabet.size if self.depth >= 2 else 0
        return max(self.first_layer_candidates, later)

    @property
    def users_needed(self) -> int:
        return self.users_per_layer * self.depth * self.passes

    def randomizer(self, candidates: int) -> SubsetSelection:
        """Subset Selection over ``Z_i U {gamma}``: candidates coded ``0 .. |Z_i| - 1``,
        gamma coded ``|Z_i|`` (Algorithm 2, line 16)."""
        return SubsetSelection(epsilon=self.epsilon, s=candidates + 1)

    def privacy_event(self) -> Shuffled:
        """The one event a run charges (see :func:`triehh_event`)."""
        return triehh_event(
            randomizer=self.randomizer(self.first_layer_candidates),
            users_per_layer=self.users_per_layer,
            contribution_bound=self.contribution_bound,
            bound=self.shuffle_bound,
        )

    def run(
        self,
        groups: Iterator[UserWords] | Sequence[UserWords],
        lexicon: Lexicon,
        known: np.ndarray,
        *,
        charger: Charger,
        rng: RandomSource | None = None,
        echo: Callable[[str], None] = _ignore,
        label: str = "",
        progress: ProgressCallback | None = None,
    ) -> TrieHHResult:
        """Run every pass. ``groups`` yields the ``depth * passes`` disjoint user groups
        (exactly ``N`` users each; word ids index ``lexicon``) in the order layers use
        them; ``known`` is the known-word list V as a boolean mask over ``lexicon``.
        Charges :meth:`privacy_event` to ``charger`` first (nothing is drawn if that
        raises), then tells ``echo`` each layer's statistics and ``progress`` (a
        :data:`~privreg.core.progress.ProgressCallback`, phase ``"TrieHH layers"``) each
        layer done; neither changes the result."""
        if not isinstance(charger, Charger):
            raise PrivregTypeError(f"charger must have a charge(event, ...) method; got {charger!r}")
        progress = check_progress("progress", progress)
        rng = resolve_random(rng)
        if not isinstance(lexicon, Lexicon):
            raise PrivregTypeError(f"lexicon must be a Lexicon; got {lexicon!r}")
        if lexicon.alphabet != self.alphabet or lexicon.depth < self.depth:
            raise PrivregValueError(
                f"lexicon must be encoded with this alphabet and depth >= {self.depth}; got depth {lexicon.depth}"
            )
        known = np.asarray(known)
        if known.shape != (len(lexicon),) or known.dtype != bool:
            raise PrivregValueError(f"known must be a boolean mask of length {len(lexicon)}; got {known.shape}")
        event = self.privacy_event()
        charger.charge(
            event,
            mechanism=_NAME,
            label=label or _NAME,
            randomness=rng.describe(),
            parameters=self._ledger_parameters(len(lexicon), int(known.sum())),
        )
        stream = iter(groups)
        known = known.copy()
        found: list[str] = []
        per_pass: list[tuple[str, ...]] = []
        layers: list[LayerStats] = []
        users = 0
        shown = PhaseProgress(progress, "TrieHH layers", total=self.depth * self.passes, unit="layer")
        for pass_index in range(1, self.passes + 1):
            words, stats = self._one_pass(stream, lexicon, known, event, rng, echo, pass_index, label, shown)
            shown.update(pass_index * self.depth)  # a pass may end early: no prefix left to extend
            per_pass.append(tuple(words))
            layers.extend(stats)
            users += sum(s.users for s in stats)
            found.extend(words)
            known[lexicon.ids(words)] = True  # earlier heavy hitters become known words
        shown.finish()
        return TrieHHResult(
            heavy_hitters=tuple(found), per_pass=tuple(per_pass), layers=tuple(layers), event=event, users=users
        )

    def _ledger_parameters(self, lexicon_size: int, known: int) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "users_per_layer": self.users_per_layer,
            "contribution_bound": self.contribution_bound,
            "num_reports_per_layer": self.users_per_layer * self.contribution_bound,
            "max_prefixes": self.max_prefixes,
            "depth": self.depth,
            "passes": self.passes,
            "sampler": self.sampler,
            "alphabet_size": self.alphabet.size,
            "min_votes": self.min_votes,
            "known_words": known,
            "lexicon_size": lexicon_size,
            "composition": "parallel: each user reports in one layer of one pass, each item in "
            "at most one report (Sun et al. 2024, Theorems 1-2)",
        }

    def _one_pass(
        self,
        stream: Iterator[UserWords],
        lexicon: Lexicon,
        known: np.ndarray,
        event: Shuffled,
        rng: RandomSource,
        echo: Callable[[str], None],
        pass_index: int,
        label: str,
        shown: PhaseProgress,
    ) -> tuple[list[str], list[LayerStats]]:
        size, end = self.alphabet.size, self.alphabet.end_code
        chars = self.alphabet.symbols + self.alphabet.end
        codes = lexicon.codes
        # node[w]: position of w's length-i prefix in the extendable prefixes P'_{i-1}
        first = codes[:, 0].astype(np.int64)
        node = np.where((first >= 0) & (first != end), first, -1)
        names = list(self.alphabet.symbols)  # strings of P'_{i-1}
        found: list[str] = []
        stats: list[LayerStats] = []
        timer = PhaseTimer(cpu_clock=process_cpu_seconds)
        for layer in range(1, self.depth + 1):
            if not names:
                break
            group = next(stream, None)
            timer.mark()  # a layer's time starts when its users arrive (drawing them is the caller's)
            if not isinstance(group, UserWords) or group.num_users != self.users_per_layer:
                raise PrivregValueError(
                    f"pass {pass_index} layer {layer}: groups must yield a UserWords of exactly "
                    f"users_per_layer = {self.users_per_layer} users (the charged event assumes "
                    f"N*B reports per layer); got {type(group).__name__}"
                )
            if group.words.size and group.words.max() >= len(lexicon):
                raise PrivregValueError(
                    f"pass {pass_index} layer {layer}: word ids must index the lexicon (< {len(lexicon)})"
                )
            candidates = len(names) * size
            symbol = codes[:, layer].astype(np.int64)
            word_code = np.where((node >= 0) & (symbol >= 0), node * size + symbol, -1)
            # known words contribute nothing: folded into the per-word table, not per entry
            table = np.where(known, -1, word_code)
            ss = self.randomizer(candidates)
            tag = f"{label or _NAME} pass {pass_index} layer {layer}"
            pairs = _layer_pairs(group, table)
            if self.votes == "aggregate":
                counts = contribution_counts(
                    *pairs,
                    num_users=group.num_users,
                    bound=self.contribution_bound,
                    sampler=self.sampler,
                    dummy=candidates,
                    rng=rng,
                )
                votes = ss.vote_counts_from_histogram(counts, charger=_LayerAllowance(event), rng=rng, label=tag)
                real = int(counts[:candidates].sum())
            else:
                inputs = sample_contributions(
                    *pairs,
                    num_users=group.num_users,
                    bound=self.contribution_bound,
                    sampler=self.sampler,
                    dummy=candidates,
                    rng=rng,
                )
                votes = layer_votes(
                    ss, inputs, charger=_LayerAllowance(event), rng=rng, chunk_size=self.chunk_size, label=tag
                )
                real = int((inputs != candidates).sum())
            votes = votes[:candidates]
            kept, tau = self._keep(votes, rng)
            ended = kept % size == end
            words = [names[c // size] for c in kept[ended]]
            found.extend(words)
            extend = kept[~ended]
            names = [names[c // size] + chars[c % size] for c in extend]
            position = np.full(candidates, -1, dtype=np.int64)
            position[extend] = np.arange(extend.size)
            node = np.where(word_code >= 0, position[np.maximum(word_code, 0)], -1)
            seconds, cpu_seconds = timer.lap(f"layer {layer}")
            stats.append(
                LayerStats(
                    pass_index=pass_index,
                    layer=layer,
                    users=group.num_users,
                    reports=group.num_users * self.contribution_bound,
                    real_reports=real,
                    candidates=candidates,
                    subset_size=ss.subset_size,
                    threshold=tau,
                    kept=int(kept.size),
                    new_words=len(words),
                    seconds=seconds,
                    cpu_seconds=cpu_seconds,
                )
            )
            shown.advance()
            echo(
                f"pass {pass_index}/{self.passes} layer {layer}/{self.depth}: "
                f"{group.num_users} users, |Z_i| = {candidates}, d = {ss.subset_size}, "
                f"tau = {tau}, kept {kept.size}, +{len(words)} words"
            )
        return found, stats

    def _keep(self, votes: np.ndarray, rng: RandomSource) -> tuple[np.ndarray, int]:
        """Line 22-23: the (at most) ``eta_max`` most voted codes, sorted, ties at
        ``tau_i`` broken uniformly at random; and ``tau_i``."""
        eta = self.max_prefixes
        tau = int(np.partition(votes, votes.size - eta)[votes.size - eta]) if votes.size >= eta else 0
        floor = max(tau, self.min_votes)
        above = np.flatnonzero(votes > floor)
        at = np.flatnonzero(votes == floor)
        room = eta - above.size
        if at.size > room:
            at = at[np.argsort(uniform_chunked(1 << 62, at.size, rng), kind="stable")[:room]]
        return np.sort(np.concatenate([above, at])), tau
