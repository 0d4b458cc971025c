"""A synthetic multi-user corpus for scale: Zipf vocabulary, Markov phrases, heavy-tailed users.

No Reddit-sized text is available offline, so scale tests and benchmarks generate one:

* **vocabulary**: ``vocab_size`` words with Zipf(``zipf_s``) unigram frequencies;
* **Markov phrases**: each word has ``branching`` successors (drawn from the Zipf
  unigram law) with probabilities proportional to ``1/j^successor_s``; text follows this
  first-order chain and restarts from the unigram law with probability ``restart``, so
  popular long n-grams (chains of likely successors) are shared by many users while most
  long n-grams are rare -- the structure DPNE's pruning exploits;
* **heavy-tailed activity**: tokens per user ~ ``min_tokens`` + a discrete Pareto tail
  with index ``activity_alpha`` (capped at ``max_tokens``); each user's text is split
  into records of ``record_length`` tokens (n-grams never cross records).

Everything is vectorised (one chain step for all records at once), so millions of users
are a matter of seconds. The generator uses numpy's seeded Generator: this is *data*, not
privacy noise. :func:`synthetic_corpus` returns a :class:`~privreg.plugins.ngrams.backends.TokenCorpus`;
:func:`write_records` writes (user_id, text) rows as JSONL, CSV or Parquet for the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np

from privreg.core import validation as v
from privreg.core.errors import PrivregValueError
from privreg.plugins.ngrams.backends.base import detect_format
from privreg.plugins.ngrams.backends.tokens import TokenCorpus

__all__ = ["SyntheticSpec", "synthetic_corpus", "write_records"]


@attrs.frozen(kw_only=True)
class SyntheticSpec:
    """Parameters of the generator (see the module docstring)."""

    users: int = attrs.field(default=10_000, converter=lambda x: v.check_count("users", x))
    vocab_size: int = attrs.field(default=20_000, converter=lambda x: v.check_int("vocab_size", x, minimum=2))
    zipf_s: float = 1.1
    branching: int = attrs.field(default=6, converter=lambda x: v.check_count("branching", x))
    successor_s: float = 1.6
    restart: float = 0.12
    min_tokens: int = 20
    activity_alpha: float = 1.4
    max_tokens: int = 20_000
    record_length: int = attrs.field(default=40, converter=lambda x: v.check_int("record_length", x, minimum=2))
    seed: int = attrs.field(default=0, converter=lambda x: v.check_int("seed", x, minimum=0))

    def __attrs_post_init__(self) -> None:
        if not 0 < self.restart < 1:
            raise PrivregValueError(f"restart must lie in (0, 1); got {self.restart}")
        if self.activity_alpha <= 0 or self.zipf_s <= 0 or self.successor_s <= 0:
            raise PrivregValueError("zipf_s, successor_s and activity_alpha must be > 0")
        if not 1 <= self.min_tokens <= self.max_tokens:
            raise PrivregValueError(f"need 1 <= min_tokens <= max_tokens; got {self.min_tokens}, {self.max_tokens}")


def _cdf(weights: np.ndarray) -> np.ndarray:
    c = np.cumsum(weights, axis=-1)
    return c / c[..., -1:]


def synthetic_corpus(spec: SyntheticSpec | None = None, **overrides: Any) -> TokenCorpus:
    """A corpus drawn from ``spec`` (or ``SyntheticSpec(**overrides)``)."""
    if spec is None:
        spec = SyntheticSpec(**overrides)  # fields of mixed types, validated by SyntheticSpec
    elif overrides:
        spec = attrs.evolve(spec, **overrides)
    gen = np.random.default_rng(spec.seed)
    unigram = _cdf(1.0 / np.arange(1, spec.vocab_size + 1) ** spec.zipf_s)
    succ = np.searchsorted(unigram, gen.random((spec.vocab_size, spec.branching)))
    succ_cdf = _cdf(1.0 / np.arange(1, spec.branching + 1) ** spec.successor_s)
    # tokens per user: discrete Pareto tail
    extra = np.floor(spec.min_tokens * (gen.random(spec.users) ** (-1.0 / spec.activity_alpha) - 1))
    per_user = np.minimum(spec.min_tokens + extra.astype(np.int64), spec.max_tokens)
    n_rec = -(-per_user // spec.record_length)
    rec_len = np.full(int(n_rec.sum()), spec.record_length, dtype=np.int64)
    last = np.cumsum(n_rec) - 1
    rec_len[last] = per_user - (n_rec - 1) * spec.record_length
    rec_user = np.repeat(np.arange(spec.users, dtype=np.int32), n_rec)
    # run one Markov chain per record, all records in lockstep
    n_records = rec_len.size
    width = int(rec_len.max())
    grid = np.empty((width, n_records), dtype=np.int32)
    state = np.searchsorted(unigram, gen.random(n_records))
    grid[0] = state
    for t in range(1, width):
        alive = np.flatnonzero(rec_len > t)
        s = state[alive]
        follow = succ[s, np.searchsorted(succ_cdf, gen.random(alive.size))]
        jump = np.searchsorted(unigram, gen.random(alive.size))
        state[alive] = np.where(gen.random(alive.size) < spec.restart, jump, follow)
        grid[t, alive] = state[alive]
    mask = np.arange(width)[:, None] < rec_len[None, :]
    tokens = grid.T[mask.T]
    ends = np.cumsum(rec_len)
    return TokenCorpus.from_arrays(
        tokens=tokens, user=np.repeat(rec_user, rec_len), record_end=np.repeat(ends, rec_len)
    )


def write_records(corpus: TokenCorpus, path: str | Path, *, format: str | None = None) -> Path:
    """Write ``corpus`` as (user_id, text) rows, one row per record, to a JSONL, CSV or
    Parquet file (by suffix or ``format``)."""
    import pandas as pd

    path = Path(path)
    fmt = detect_format(path, format)
    starts = np.flatnonzero(np.r_[True, corpus.record_end[1:] != corpus.record_end[:-1]])
    words = corpus.vocab[corpus.tokens].astype(str)
    texts = [" ".join(words[a:b]) for a, b in zip(starts.tolist(), corpus.record_end[starts].tolist())]
    df = pd.DataFrame({"user_id": corpus.users[corpus.user[starts]].astype(str), "text": texts})
    if fmt == "jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    elif fmt == "csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path
