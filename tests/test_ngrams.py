"""Plugin ``ngrams`` (paper 002, Kim-Gopi-Kulkarni-Yekhanin 2021) on the local backend.

Statistical tests state their false-alarm rate and use fixed seeds (deterministic).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math

import mpmath
import numpy as np
import pytest
from scipy import special
from unicode_texts import UNICODE_TEXTS

from privreg.accountant import make_accountant
from privreg.core import (
    ApproxDP,
    BudgetExceededError,
    Composed,
    EventLog,
    Gaussian,
    InsecureReproducibleRandom,
    PrivregTypeError,
    PrivregValueError,
    RandomSource,
    WorkflowContext,
)
from privreg.core.registry import load_registry
from privreg.mechanisms import dpsu_threshold
from privreg.noise.gaussian_tail import exact_tail_coin, gaussian_tail_binomial, gaussian_tail_coins
from privreg.plugins.ngrams import hooks
from privreg.plugins.ngrams.backends import (
    LocalBackend,
    LocalPairs,
    TokenCorpus,
    Tokenizer,
    contribution_weights,
    detect_format,
)
from privreg.plugins.ngrams.backends.tokens import Vocabulary, token_fields
from privreg.plugins.ngrams.calibration import calibrate_dpne
from privreg.plugins.ngrams.dpne import extract_ngrams, table3
from privreg.plugins.ngrams.engines import LocalNgramEngine
from privreg.plugins.ngrams.levels import Level, estimate_valid_count, is_valid, valid_count, valid_keys
from privreg.plugins.ngrams.noise_plan import plan_dpne, plan_dpsu_even
from privreg.plugins.ngrams.partitions import PartitionedCorpus
from privreg.plugins.ngrams.synthetic import SyntheticSpec, synthetic_corpus, write_records

# --- Theorem 2.1, computed independently -------------------------------------------------


def _sigma_star(eps: float, delta: float) -> float:
    """Solve Eq. (1) of paper 002 for sigma* with mpmath at 50 digits."""
    mpmath.mp.dps = 50
    phi = mpmath.ncdf
    f = lambda s: phi(-eps * s + 1 / (2 * s)) - mpmath.e**eps * phi(-eps * s - 1 / (2 * s)) - mpmath.mpf(delta) / 2  # noqa: E731
    return float(mpmath.findroot(f, (mpmath.mpf("0.5"), mpmath.mpf("5")), solver="bisect"))


def _rho_1(sigma_1: float, delta: float, max_keys: int) -> float:
    mpmath.mp.dps = 50
    best = -math.inf
    for t in range(1, max_keys + 1):
        p = (1 - mpmath.mpf(delta) / 2) ** (mpmath.mpf(1) / t)
        best = max(best, float(1 / mpmath.sqrt(t) + sigma_1 * mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1)))
    return best


def test_calibration_equals_theorem_2_1_at_the_reference_run():
    """T = 9, eps = 4, delta = 1e-7, Delta = 300 (paper 002, Section 3.1): sigma*, every
    sigma_k (equal and geometric schedules) and rho_1, against an independent mpmath solve."""
    eps, delta, t_max, big_delta = 4.0, 1e-7, 9, 300
    s_star = _sigma_star(eps, delta)
    cal = calibrate_dpne(epsilon=eps, delta=delta, max_n=t_max, delta_1=big_delta)
    assert cal.sigma_star == pytest.approx(s_star, rel=1e-9)
    assert cal.sigma_star == pytest.approx(1.3279035, rel=1e-7)
    for s in cal.sigmas:
        assert s == pytest.approx(math.sqrt(t_max) * s_star, rel=1e-9)
    assert cal.rho_1 == pytest.approx(_rho_1(cal.sigmas[0], delta, big_delta), rel=1e-9)
    assert cal.rho_1 == pytest.approx(25.0851, rel=1e-5)
    geo = calibrate_dpne(epsilon=eps, delta=delta, max_n=t_max, delta_1=big_delta, schedule="geometric", decay=0.8)
    sigma_1 = s_star * math.sqrt(sum(0.8 ** (-2 * j) for j in range(t_max)))
    for k, s in enumerate(geo.sigmas):
        assert s == pytest.approx(sigma_1 * 0.8**k, rel=1e-9)
    assert sum(1 / s**2 for s in geo.sigmas) == pytest.approx(1 / s_star**2, rel=1e-9)
    assert geo.rho_1 == pytest.approx(_rho_1(geo.sigmas[0], delta, big_delta), rel=1e-9)


def test_applied_plan_is_verified_and_within_a_hair_of_the_paper():
    plan = plan_dpne(epsilon=4.0, delta=1e-7, max_n=9, max_keys=(300,) * 9)
    assert plan.verified_epsilon <= 4.0 and plan.verified_by in ("gdp", "pld")
    first = plan.releases[0].event
    assert first == Composed(
        events=(Gaussian(sigma=plan.releases[0].sigma, sensitivity=1.0), ApproxDP(epsilon=0.0, delta=5e-8))
    )
    for k, (r, s) in enumerate(zip(plan.releases, plan.paper.sigmas), 1):
        assert r.lengths == (k,) and s <= r.sigma <= s * (1 + 1e-6)
        if k > 1:
            assert r.event == Gaussian(sigma=r.sigma, sensitivity=1.0) and r.rho is None
    assert plan.releases[0].rho == pytest.approx(plan.paper.rho_1, rel=1e-6)
    # the charged events compose, under PLD, within the budget
    acc = make_accountant("pld")
    for e in plan.events:
        acc.compose(e)
    assert acc.epsilon(1e-7) <= 4.0


def test_dpsu_threshold_matches_calibrate_dpne():
    cal = calibrate_dpne(epsilon=1.0, delta=1e-6, max_n=3, delta_1=50)
    # one implementation (privreg.mechanisms), wired with sigma_1 and delta/2
    assert dpsu_threshold(sigma=cal.sigmas[0], max_keys=50, delta_threshold=5e-7) == cal.rho_1
    even = plan_dpsu_even(epsilon=4.0, delta=1e-7, max_n=3, max_keys=(20, 20, 20))
    assert all(r.event.events[1] == ApproxDP(epsilon=0.0, delta=1e-7 / 6) for r in even.releases)
    assert all(r.rho == dpsu_threshold(sigma=r.sigma, max_keys=20, delta_threshold=1e-7 / 6) for r in even.releases)


# --- backends --------------------------------------------------------------------------


def test_contribution_weights_are_exact_and_norm_bounded():
    w = contribution_weights(300)
    t = np.arange(1, 301)
    assert np.all(t * w[1:].astype(object) ** 2 <= (1 << 20) ** 2)
    assert np.all(w[1:] >= (1 << 20) / np.sqrt(t) - 1)
    assert list(contribution_weights(3, weighting="unit")) == [0, 1, 1, 1]
    with pytest.raises(PrivregValueError, match="weighting"):
        contribution_weights(3, weighting="l1")


def test_bounded_histogram_bounds_each_user_and_ignores_others():
    rng = np.random.default_rng(5)
    user = rng.integers(0, 50, 5000)
    key = rng.integers(0, 400, 5000) * 1_000_003
    tags = np.array([f"user {i}" for i in range(50)], dtype=object)
    be = LocalBackend()
    hist = be.bounded_histogram(LocalPairs(user=user, key=key, users=tags), max_keys=7, secret=bytes([11]) * 32)
    w = contribution_weights(7)
    distinct = {u: set(key[user == u].tolist()) for u in range(50)}
    expected = sum(min(len(s), 7) * int(w[min(len(s), 7)]) for s in distinct.values())
    assert hist.total() == expected and np.all(np.diff(hist.keys) > 0)
    # user 0's kept keys do not depend on the other users, and the others' do not depend on
    # user 0 (even though removing user 0 renumbers the dense user indices)
    alone = be.bounded_histogram(
        LocalPairs(user=user[user == 0], key=key[user == 0], users=tags[:1]), max_keys=7, secret=bytes([11]) * 32
    )
    others = be.bounded_histogram(
        LocalPairs(user=user[user != 0] - 1, key=key[user != 0], users=tags[1:]), max_keys=7, secret=bytes([11]) * 32
    )
    merged = dict(zip(others.keys.tolist(), others.counts.tolist()))
    for k, c in zip(alone.keys.tolist(), alone.counts.tolist()):
        merged[k] = merged.get(k, 0) + c
    assert dict(zip(hist.keys.tolist(), hist.counts.tolist())) == merged
    with pytest.raises(PrivregTypeError, match="LocalPairs"):
        be.bounded_histogram({"user": user}, max_keys=3, secret=bytes([1]) * 32)
    # keys spanning more than 2**40 take the dense-code path: same contribution totals
    wide = be.bounded_histogram(LocalPairs(user=user, key=key * 2**30, users=tags), max_keys=7, secret=bytes([11]) * 32)
    assert wide.total() == hist.total() and wide.keys.size <= 400


def test_vocabulary_shifts_do_not_change_other_users_choice():
    """Adding a user with new tokens renumbers the vocabulary and the users; every other
    user's kept unigrams (Delta = 3) stay the same, so the histograms differ by exactly the
    new user's contribution (the sensitivity argument of Theorem 2.1)."""
    be = LocalBackend()
    import pandas as pd

    base = pd.DataFrame(
        {
            "user": [f"u{i}" for i in range(30)],
            "text": [" ".join(f"t{(i * 7 + j) % 40}" for j in range(12)) for i in range(30)],
        }
    )
    extra = pd.DataFrame({"user": ["a-new-user"], "text": ["aa ab ac t1 t2 zz"]})
    h = {}
    for name, recs in (("D", base), ("D+u", pd.concat([base, extra], ignore_index=True))):
        eng = LocalNgramEngine(be.tokenize(recs, Tokenizer()), be)
        hist = eng.unigram_histogram(max_keys=3, secret=bytes([99]) * 32)
        h[name] = dict(zip(hist.keys.tolist(), hist.counts.tolist()))
    w = int(contribution_weights(3)[3])
    diff = {k: h["D+u"].get(k, 0) - h["D"].get(k, 0) for k in set(h["D"]) | set(h["D+u"])}
    assert sorted(v for v in diff.values() if v) == [w, w, w]


def test_tokenizer_and_reading_every_format(tmp_path):
    corpus = synthetic_corpus(users=40, vocab_size=50, seed=3)
    be = LocalBackend()
    tok = None
    for suffix in ("jsonl", "csv", "parquet"):
        path = write_records(corpus, tmp_path / f"r.{suffix}")
        again = be.tokenize(be.read_records(path), Tokenizer())
        if tok is None:
            tok = again
        assert np.array_equal(again.tokens, tok.tokens) and list(again.vocab) == list(tok.vocab)
        assert np.array_equal(again.record_end, tok.record_end) and np.array_equal(again.user, tok.user)
    assert list(tok.vocab) == list(corpus.vocab[np.unique(corpus.tokens)])
    assert Tokenizer().tokens("It's a Test, isn't it?") == ["it's", "a", "test", "isn't", "it"]
    assert detect_format("x.jsonl.gz") == "jsonl"
    with pytest.raises(PrivregValueError, match="suffix"):
        detect_format("x.txt")
    with pytest.raises(PrivregValueError, match="capturing"):
        Tokenizer(pattern="(a)b")
    with pytest.raises(PrivregValueError, match="columns"):
        be.read_records(write_records(corpus, tmp_path / "c.csv"), user_column="author")


# Python's re/str.lower semantics, pinned: superscripts, fractions, circled and roman
# numerals are word characters; combining marks, ZWJ/ZWNJ, connector punctuation and
# emoji are not (Java's (?U)\w says the opposite on most of these).
UNICODE_TOKENS = [
    ["e", "mc\u00b2", "and", "x\u00b9\u00b2\u00b3", "or", "\u00bd", "\u00be", "of", "\u2153"],
    ["caf\u00e9", "vs", "cafe", "na\u00efve"],
    ["\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4"],
    ["ok", "family", "done"],
    ["\u05e9", "\u05dc\u05d5", "\u05dd", "\u05e2\u05d5\u05dc\u05dd", "\u0645\u0631\u062d\u0628\u0627", "rtl"],
    ["zero", "width", "join", "ner", "non", "joiner"],
    ["no", "break", "narrow"],
    ["\uff11\uff12\uff13", "\uff41\uff42\uff43", "\uff44\uff45\uff46"],
    ["\u03bf\u03b4\u03bf\u03c2", "i", "stanbul", "\u01c6emal", "\u00df", "\u00df"],
    ["\u2460\u2461", "\u217b", "\u0663\u0664", "\u096b\u096c", "a", "b", "snake_case", "it's"],
    ["tab", "here", "new", "line"],
    [],
]


def test_tokenizer_unicode_semantics_are_the_same_on_every_backend():
    """One definition: the pinned tokens of the Unicode texts come out of the Tokenizer,
    the local backend's corpus and the function the Spark backend runs on its executors
    (called here on pandas batches, without a JVM)."""
    import pandas as pd

    from privreg.plugins.ngrams.backends.spark import _tokenize_batches

    tok = Tokenizer()
    assert [tok.tokens(t) for t in UNICODE_TEXTS] == tok.token_lists(UNICODE_TEXTS) == UNICODE_TOKENS
    users = [f"u{i:02d}" for i in range(len(UNICODE_TEXTS))]
    corpus = LocalBackend().tokenize(pd.DataFrame({"user": users, "text": list(UNICODE_TEXTS)}), tok)
    local = {u: corpus.vocab[corpus.tokens[corpus.user == i]].tolist() for i, u in enumerate(corpus.users)}
    batches = [
        pd.DataFrame({"user": users[:5], "text": UNICODE_TEXTS[:5]}),
        pd.DataFrame({"user": users[5:], "text": UNICODE_TEXTS[5:]}),
    ]
    spark = {
        u: list(t)
        for out in _tokenize_batches(iter(batches), tokenizer=tok)
        for u, t in zip(out["user"], out["tokens"])
    }
    assert local == spark == dict(zip(users, UNICODE_TOKENS))


def _brute_bounded(user, key, users, key_names, max_keys, secret):
    """Per-user bounding written the obvious way (Python sets, the standard library's
    HMAC and sorting): each user's distinct keys, the max_keys smallest by
    HMAC-SHA256(secret, message of (user id, key content)), weight W_t."""
    w = contribution_weights(max_keys)
    out: dict[int, int] = {}
    for u in sorted(set(user.tolist())):
        keys = sorted(set(key[user == u].tolist()))

        def tag(k):
            content = (
                f"s{len(key_names[k].encode())}:{key_names[k]}" if key_names is not None else f"n{len(str(k))}:{k}"
            )
            msg = f"s18:privreg.ngrams.keys{len(users[u].encode())}:{users[u]}{content}n1:0".encode()
            return hmac.new(secret, msg, hashlib.sha256).digest()

        kept = sorted(keys, key=tag)[:max_keys]
        for k in kept:
            out[k] = out.get(k, 0) + int(w[len(kept)])
    return out


@pytest.mark.parametrize("with_names", [False, True])
def test_bounded_histogram_equals_per_user_brute_force(with_names):
    """Light users (<= Delta keys, kept whole without tags) and heavy users (keyed
    choice) mixed: the vectorised histogram equals the per-user reference exactly."""
    rng = np.random.default_rng(3)
    sizes = rng.choice([2, 5, 9, 40, 120], size=60)
    user = np.repeat(np.arange(60), sizes)
    key = rng.integers(0, 300, user.size) * 7 + 5
    users = np.array([f"u{i}\u00e9" for i in range(60)], dtype=object)
    names = np.array([f"tok{i}" for i in range(300 * 7 + 5)], dtype=object) if with_names else None
    fields = functools.partial(token_fields, names) if with_names else None
    secret = bytes(range(32))
    hist = LocalBackend().bounded_histogram(
        LocalPairs(user=user, key=key, users=users, key_fields=fields), max_keys=10, secret=secret
    )
    assert dict(zip(hist.keys.tolist(), hist.counts.tolist())) == _brute_bounded(user, key, users, names, 10, secret)


def _shuffled_records(corpus: TokenCorpus, seed: int):
    """The corpus's (user_id, text) records in a random order (users not grouped)."""
    import pandas as pd

    starts = np.flatnonzero(np.r_[True, corpus.record_end[1:] != corpus.record_end[:-1]])
    words = corpus.vocab[corpus.tokens].astype(str)
    texts = [" ".join(words[a:b]) for a, b in zip(starts.tolist(), corpus.record_end[starts].tolist())]
    df = pd.DataFrame({"user_id": corpus.users[corpus.user[starts]].astype(str), "text": texts})
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.fixture(scope="module")
def streamed_inputs(tmp_path_factory):
    """A synthetic corpus written in shuffled record order as JSONL, gzipped JSONL, CSV
    and Parquet, and the one-shot (in-memory) TokenCorpus of the same records."""
    d = tmp_path_factory.mktemp("streamed")
    corpus = synthetic_corpus(users=400, vocab_size=150, min_tokens=10, max_tokens=400, record_length=12, seed=13)
    df = _shuffled_records(corpus, seed=1)
    paths = {"jsonl": d / "r.jsonl", "jsonl.gz": d / "r.jsonl.gz", "csv": d / "r.csv"}
    df.to_json(paths["jsonl"], orient="records", lines=True)
    df.to_json(paths["jsonl.gz"], orient="records", lines=True, compression="gzip")
    df.to_csv(paths["csv"], index=False)
    paths["parquet"] = d / "r.parquet"  # pyarrow is in the test extra
    df.to_parquet(paths["parquet"], index=False)
    be = LocalBackend()
    one_shot = be.tokenize(be.read_records(paths["jsonl"]), Tokenizer())
    return paths, one_shot


def _run(engine, seed=3, **kw):
    options = dict(epsilon=4.0, delta=1e-7, max_n=5, max_keys=8, eta=0.2)
    options.update(kw)
    return extract_ngrams(engine, charger=EventLog(), rng=InsecureReproducibleRandom(seed=seed), **options).ngrams


def test_streamed_partitions_give_exactly_the_one_shot_histograms_and_release(streamed_inputs):
    """Records in random order (users NOT grouped), read 37 rows at a time into 3 user
    partitions on disk, from every format: every histogram (unigram and pruned k-gram,
    with Delta = 8 so that bounding is active) and the whole DPNE release under the same
    seed are identical to the one-shot in-memory path. Splitting a user across chunks or
    partitions would change that user's bounded contribution and fail this test."""
    paths, one_shot = streamed_inputs
    reference = LocalNgramEngine(one_shot)
    ref_uni = reference.unigram_histogram(max_keys=8, secret=bytes([5]) * 32)
    expected = _run(LocalNgramEngine(one_shot))
    assert len(expected[3]) > 0
    for name, path in paths.items():
        with PartitionedCorpus.from_file(path, partitions=3, chunk_records=37) as corpus:
            assert corpus.on_disk and len(corpus.partitions) == 3 and corpus.tokens_total == one_shot.size
            engine = LocalNgramEngine(corpus)
            uni = engine.unigram_histogram(max_keys=8, secret=bytes([5]) * 32)
            assert uni.keys.tolist() == ref_uni.keys.tolist() and uni.counts.tolist() == ref_uni.counts.tolist(), name
            s1 = uni.keys[uni.counts >= np.sort(uni.counts)[-40]]
            for e in (engine, reference):
                e.set_unigrams(s1)
            a = engine.kgram_histogram(2, pruning="both", max_keys=8, secret=bytes([5]) * 32)
            b = reference.kgram_histogram(2, pruning="both", max_keys=8, secret=bytes([5]) * 32)
            assert a.keys.tolist() == b.keys.tolist() and a.counts.tolist() == b.counts.tolist(), name
            assert _run(engine) == expected, name
            tmp = corpus.partitions[0].directory
        assert not tmp.exists(), "closing the corpus deletes its temporary files"
    # in-memory partitions of the TokenCorpus give the same release too
    assert _run(LocalNgramEngine(PartitionedCorpus.from_corpus(one_shot, partitions=4))) == expected
    # the default partition count follows the input size; every user is in exactly one partition
    size = paths["jsonl"].stat().st_size
    with PartitionedCorpus.from_file(paths["jsonl"], partition_bytes=size // 4 + 1, chunk_records=100) as corpus:
        assert len(corpus.partitions) == 4
        assert sum(int(p.load().user_tags.size) for p in corpus.partitions) == one_shot.users.size
        assert _run(LocalNgramEngine(corpus)) == expected


def test_parallel_workers_give_identical_results(streamed_inputs):
    """Two processes tokenizing and running the per-partition passes: token ids are
    assigned in input order by the parent and tables are merged in partition order, so
    the release is the same as with one process."""
    paths, one_shot = streamed_inputs
    expected = _run(LocalNgramEngine(one_shot), seed=8)
    with PartitionedCorpus.from_file(paths["jsonl"], partitions=3, chunk_records=50, workers=2) as corpus:
        assert _run(LocalNgramEngine(corpus, workers=2), seed=8) == expected
    with pytest.raises(PrivregValueError, match="workers"):
        LocalNgramEngine(one_shot, workers=0)


def test_jsonl_rows_do_not_depend_on_chunking(tmp_path):
    """Mixed value types are read per value (pandas would infer a column type per chunk:
    1 in an int chunk reads "1", in a chunk with a null "1.0"); blank lines are skipped;
    bad lines and missing columns are named."""
    path = tmp_path / "mixed.jsonl"
    rows = [
        '{"user_id": 1, "text": "a b"}',
        '{"user_id": null, "text": "c"}',
        "",
        '{"user_id": 2.5, "text": 7}',
        '{"user_id": "x", "text": "d e"}',
        '{"text": "lost"}',
        '{"user_id": 1, "text": "f"}',
    ]
    path.write_text("\n".join(rows) + "\n")
    be = LocalBackend()
    for size in (1, 2, 3, 100):
        df = __import__("pandas").concat(list(be.read_record_chunks(path, chunk_records=size)), ignore_index=True)
        assert df["user"].tolist() == ["1", "2.5", "x", "1"] and df["text"].tolist() == ["a b", "7", "d e", "f"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "a", "text": "b"}\n[1, 2]\n')
    with pytest.raises(PrivregValueError, match="not a JSON object") as bad_line:
        be.read_records(bad)
    assert "line 2" not in str(bad_line.value) and "[1, 2]" not in str(bad_line.value)  # never the data
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"author": "a", "text": "b"}\n')
    with pytest.raises(PrivregValueError, match="author"):
        list(be.tokenize_file(missing, vocabulary=Vocabulary()))


def test_dpsu_histograms_and_releases_do_not_depend_on_the_partitioning(streamed_inputs):
    """The raw (DPSU) histogram with bounding active (Delta = 6) has the same keys and
    counts for 1, 2 and 5 partitions, and DPSU-all under one seed releases the same
    n-grams: ids follow the n-grams' content, not the order partitions are read."""
    _, one_shot = streamed_inputs
    hists, releases = [], []
    for parts in (1, 2, 5):
        engine = LocalNgramEngine(PartitionedCorpus.from_corpus(one_shot, partitions=parts))
        h = engine.raw_histogram((1, 2, 3), max_keys=6, secret=bytes([2]) * 32)
        hists.append((h.keys.tolist(), h.counts.tolist(), engine.labels(h.keys)))
        releases.append(_run(engine, method="dpsu-all", max_n=3, max_keys=6, seed=4))
    assert hists[0] == hists[1] == hists[2] and len(hists[0][0]) > 0
    assert releases[0] == releases[1] == releases[2] and releases[0][3]


def test_dpsu_keys_are_exact(streamed_inputs):
    """The DPSU baselines' raw histogram keys are exact n-gram ids: the histogram without
    bounding equals the brute-force count of distinct (user, n-gram) pairs per n-gram
    string (a hash-keyed histogram could merge n-grams whose hashes collide)."""
    paths, one_shot = streamed_inputs
    with PartitionedCorpus.from_file(paths["csv"], partitions=2, chunk_records=64) as corpus:
        engine = LocalNgramEngine(corpus)
        hist = engine.raw_histogram((1, 2, 3), max_keys=10**6, secret=bytes([1]) * 32)
        got = dict(zip(engine.labels(hist.keys), hist.counts.tolist()))
    users_of: dict[str, set[int]] = {}
    for k in (1, 2, 3):
        p = np.flatnonzero(np.arange(one_shot.size) + k <= one_shot.record_end)
        for g, u in zip(one_shot.decode(p, k), one_shot.user[p].tolist()):
            users_of.setdefault(g, set()).add(u)
    assert len(got) == len(users_of) == hist.keys.size
    # every user keeps all of their n-grams (Delta huge), so the weight is W_t of their count
    distinct_per_user: dict[int, int] = {}
    for users in users_of.values():
        for u in users:
            distinct_per_user[u] = distinct_per_user.get(u, 0) + 1
    w = contribution_weights(max(distinct_per_user.values()))
    expected = {g: sum(int(w[distinct_per_user[u]]) for u in users) for g, users in users_of.items()}
    assert got == expected


# --- coins ------------------------------------------------------------------------------


def test_gaussian_tail_coins_have_the_gaussian_threshold_law():
    """Frequencies against Q((rho - h)/sigma) at five weights; each of the 5 two-sided
    binomial tests at alpha = 2e-7 (family-wise false alarm < 1e-6)."""
    rng = InsecureReproducibleRandom(seed=7)
    scale, rho, sigma, n = 1 << 20, 3.0, 1.5, 40_000
    for h in (0.0, 1.0, 2.5, 3.0, 6.0):
        counts = np.full(n, int(h * scale), dtype=np.int64)
        got = int(gaussian_tail_coins(counts, scale=scale, rho=rho, sigma=sigma, rng=rng).sum())
        p = float(special.ndtr(-(rho - h) / sigma))
        z = (got - n * p) / math.sqrt(n * p * (1 - p))
        assert abs(z) < 5.2, (h, got, n * p)


def test_slow_coin_is_exact_at_the_boundary():
    """The 320-bit path: a word just below / above 2^62 Q(a) decides as the exact
    comparison says."""
    rng = InsecureReproducibleRandom(seed=1)
    with mpmath.workprec(200):
        p = mpmath.erfc(mpmath.mpf(2) / mpmath.sqrt(2)) / 2  # a = (rho - 0)/sigma = 2
        w = int(mpmath.floor(p * mpmath.mpf(2) ** 62))
    assert exact_tail_coin(w - 1, 0, 1 << 20, 2.0, 1.0, rng) is True
    assert exact_tail_coin(w + 1, 0, 1 << 20, 2.0, 1.0, rng) is False
    decided = [exact_tail_coin(w, 0, 1 << 20, 2.0, 1.0, rng) for _ in range(8)]  # refined by more bits
    assert all(isinstance(d, bool) for d in decided)


def test_tail_binomial_mean_and_variance():
    """200 draws of Binomial(10^9, Q(6)) (mean ~0.99): the sum is Binomial(2e11, q); a
    two-sided normal test at alpha ~1e-6."""
    rng = InsecureReproducibleRandom(seed=3)
    n, reps = 10**9, 200
    q = float(special.ndtr(-6.0))
    total = sum(gaussian_tail_binomial(n, rho=6.0, sigma=1.0, rng=rng) for _ in range(reps))
    mean = n * reps * q
    assert abs(total - mean) < 4.9 * math.sqrt(mean)
    assert gaussian_tail_binomial(0, rho=1.0, sigma=1.0, rng=rng) == 0


# --- levels / V_k -----------------------------------------------------------------------


def _levels_from(strings: list[list[str]]) -> tuple[list[Level], list[str]]:
    """Levels of explicitly given downward-closed sets S_1..S_k (lists of n-gram strings)."""
    s1 = sorted(strings[0])
    levels = [Level.unigrams(len(s1))]
    index = [{w: i for i, w in enumerate(s1)}]
    for grams in strings[1:]:
        keys = [index[-1][" ".join(g.split()[:-1])] * len(s1) + index[0][g.split()[-1]] for g in grams]
        lvl = Level.build(np.array(keys, dtype=np.int64), levels[-1])
        names = {}
        for key in lvl.keys.tolist():
            pre, last = divmod(key, len(s1))
            prefix = next(w for w, i in index[-1].items() if i == pre)
            names[prefix + " " + s1[last]] = len(names)
        index.append(names)
        levels.append(lvl)
    return levels, s1


def test_valid_kgrams_count_sample_and_materialise():
    s1 = ["a", "b", "c", "d"]
    s2 = ["a b", "b c", "c d", "b b", "d a"]
    levels, _ = _levels_from([s1, s2])
    # both-side V_3: pairs (u, v) of S_2 with u[1:] = v[:-1]
    brute = {u + " " + v.split()[1] for u in s2 for v in s2 if u.split()[1] == v.split()[0]}
    assert valid_count(levels[1], pruning="both") == len(brute)
    assert valid_count(levels[1], pruning="single") == len(s2) * len(s1)
    assert valid_count(levels[0], pruning="both") == 16
    keys = valid_keys(levels[1], pruning="both", limit=100)
    assert keys.size == len(brute) and np.all(is_valid(keys, levels[1], pruning="both"))
    everything = np.arange(len(s2) * len(s1), dtype=np.int64)
    assert int(is_valid(everything, levels[1], pruning="both").sum()) == len(brute)
    est = estimate_valid_count(levels[1], pruning="both", rate=1.0, rng=InsecureReproducibleRandom(seed=2))
    assert abs(est - len(brute)) <= 8  # 20 draws, p = 1: a binomial estimate of |V_3| = 7
    with pytest.raises(PrivregValueError, match="scalable"):
        valid_keys(levels[1], pruning="both", limit=3)


# --- DPNE end to end --------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_corpus() -> TokenCorpus:
    return synthetic_corpus(users=3000, vocab_size=3000, seed=11)


def _true_ngrams(corpus: TokenCorpus, k: int) -> set[str]:
    p = np.flatnonzero(np.arange(corpus.size) + k <= corpus.record_end)
    return set(corpus.decode(p, k))


def _downward_closed(ngrams: dict[int, list[str]]) -> bool:
    sets = {k: set(v) for k, v in ngrams.items()}
    for k, grams in sets.items():
        for g in grams:
            words = g.split(" ")
            if k > 1 and (" ".join(words[:-1]) not in sets[k - 1] or " ".join(words[1:]) not in sets[k - 1]):
                return False
    return True


@pytest.mark.parametrize("variant", ["scalable", "explicit"])
def test_output_is_downward_closed(small_corpus, variant):
    """Proposition 2.1 (both-side pruning), with eta large so that spurious k-grams occur."""
    res = extract_ngrams(
        LocalNgramEngine(small_corpus),
        charger=EventLog(),
        epsilon=4.0,
        delta=1e-7,
        max_n=5,
        max_keys=30,
        eta=0.3,
        variant=variant,
        rng=InsecureReproducibleRandom(seed=4),
    )
    assert res.counts[3] > 0 and _downward_closed(res.ngrams)
    spurious = set(res.ngrams[2]) - _true_ngrams(small_corpus, 2)
    assert spurious, "eta = 0.3 should produce spurious bigrams, which must still be valid"


@pytest.mark.parametrize("bad", [True, False])
def test_bool_max_keys_is_refused_by_name(small_corpus, bad):
    """A bool is not a contribution bound: refused as the parameter max_keys, before any charge."""
    log = EventLog()
    with pytest.raises(PrivregTypeError, match="max_keys"):
        extract_ngrams(LocalNgramEngine(small_corpus), charger=log, epsilon=4.0, delta=1e-7, max_n=2, max_keys=bad)
    assert not log.charges


def test_the_whole_plan_is_charged_as_one_block_before_any_noise():
    class Counting(RandomSource):
        def __init__(self) -> None:
            self.inner, self.draws = InsecureReproducibleRandom(seed=9), 0

        def randbits(self, k: int) -> int:
            self.draws += 1
            return self.inner.randbits(k)

        def random_bytes(self, n: int) -> bytes:
            self.draws += 1
            return self.inner.random_bytes(n)

    class Refuse(EventLog):
        def __init__(self, rng: Counting, refuse: bool) -> None:
            super().__init__()
            self.rng, self.refuse, self.seen = rng, refuse, []

        def charge(self, event, **kw):  # type: ignore[no-untyped-def]
            self.seen.append(self.rng.draws)
            if self.refuse:
                raise BudgetExceededError("refused")
            super().charge(event, **kw)

    corpus = synthetic_corpus(users=500, vocab_size=300, seed=2)
    rng = Counting()
    charger = Refuse(rng, refuse=True)
    with pytest.raises(BudgetExceededError):
        extract_ngrams(
            LocalNgramEngine(corpus), charger=charger, epsilon=4.0, delta=1e-7, max_n=4, max_keys=20, rng=rng
        )
    assert rng.draws == 0 and charger.seen == [0], "no randomness may be drawn after a refused charge"
    charger = Refuse(Counting(), refuse=False)
    res = extract_ngrams(
        LocalNgramEngine(corpus), charger=charger, epsilon=4.0, delta=1e-7, max_n=4, max_keys=20, rng=charger.rng
    )
    assert charger.seen == [0] and len(charger.charges) == 1 and res.charged == 4
    (charge,) = charger.charges
    assert charge.event == Composed(events=[r.event for r in res.plan.releases])
    assert [r["label"] for r in charge.parameters["releases"]] == [r.label for r in res.plan.releases]


def _sure_unigram_corpus(users: int = 1500) -> tuple[TokenCorpus, set[str]]:
    """10 tokens every user holds (so S_1 is these 10, except with probability < 1e-100)
    and only bigrams (a, b) with b - a in {1, 2} mod 10: 20 of the 100 in V_2 occur."""
    gen = np.random.default_rng(1)
    length = 30
    steps = gen.integers(1, 3, size=(users, length))
    steps[:, :10] = 1  # the first 11 tokens run through all 10: every user holds them
    starts = gen.integers(0, 10, size=(users, 1))
    seq = (starts + np.cumsum(steps, axis=1)) % 10
    tokens = seq.reshape(-1)
    ends = np.repeat(np.arange(1, users + 1) * length, length)
    corpus = TokenCorpus.from_arrays(tokens=tokens, user=np.repeat(np.arange(users), length), record_end=ends)
    return corpus, _true_ngrams(corpus, 2)


@pytest.mark.parametrize("variant", ["scalable", "explicit"])
def test_spurious_bigrams_within_the_paper_bound(variant):
    """Proposition 2.2 with rho_k of Section 2: E[spurious k-grams] <= eta min(|S_(k-1)|,
    |V_k|). Here |S_1| = 10, |V_2| = 100, eta = 0.4: the bound is 4 per run (80 zero-weight
    bigrams, each released w.p. 0.04: mean 3.2). Over R = 25 runs the total S is a sum of
    independent Bernoullis with mean <= 4R = 100 under the bound; reject if S >= 150, whose
    probability is <= exp(-100) (e 100/150)^150 < 1e-6 (Chernoff). A wrong rho_k (e.g.
    eta instead of eta |S_1|/|V_2|) gives a mean of 32 per run and fails."""
    corpus, truth = _sure_unigram_corpus()
    total = 0
    for seed in range(25):
        res = extract_ngrams(
            LocalNgramEngine(corpus),
            charger=EventLog(),
            epsilon=4.0,
            delta=1e-7,
            max_n=2,
            max_keys=100,
            eta=0.4,
            variant=variant,
            rng=InsecureReproducibleRandom(seed=seed),
        )
        assert res.counts[1] == 10
        total += len(set(res.ngrams[2]) - truth)
    assert 40 <= total < 150  # the lower end (p < 1e-6 under the true mean 80) checks they occur at all


@pytest.mark.slow
def test_dpne_beats_dpsu_all_and_even_on_long_ngrams():
    """Table 3's claim on the synthetic corpus (Zipf + Markov, heavy-tailed users): DPNE
    releases more n-grams of length >= 4 than DPSU-all and DPSU-even at the same budget."""
    corpus = synthetic_corpus(users=6000, seed=21)
    counts = {}
    for method in ("dpne", "dpsu-all", "dpsu-even"):
        res = extract_ngrams(
            LocalNgramEngine(corpus),
            charger=EventLog(),
            epsilon=4.0,
            delta=1e-7,
            max_n=7,
            max_keys=50,
            method=method,
            rng=InsecureReproducibleRandom(seed=1),
        )
        counts[method] = sum(c for k, c in res.counts.items() if k >= 4)
    assert counts["dpne"] > 2 * counts["dpsu-all"] and counts["dpne"] > 2 * counts["dpsu-even"], counts
    assert "dpne" in table3({"dpne": {1: 3, 2: 4}}, 2)


def test_single_side_and_geometric_and_estimate_options(small_corpus):
    res = extract_ngrams(
        LocalNgramEngine(small_corpus),
        charger=EventLog(),
        epsilon=4.0,
        delta=1e-7,
        max_n=4,
        max_keys=30,
        pruning="single",
        schedule="geometric",
        decay=0.8,
        valid_count_mode="estimate",
        rng=InsecureReproducibleRandom(seed=5),
    )
    assert res.counts[1] > 0 and res.lengths[2].valid == res.counts[1] ** 2
    assert res.lengths[3].valid == res.counts[2] * res.counts[1]  # single-side: estimate is exact
    assert res.lengths[2].sigma < res.lengths[1].sigma  # geometric decay
    single = extract_ngrams(
        LocalNgramEngine(small_corpus),
        charger=(log := EventLog()),
        epsilon=4.0,
        delta=1e-7,
        max_n=4,
        max_keys=30,
        method="dpsu-single",
        length=3,
        rng=InsecureReproducibleRandom(seed=5),
    )
    assert set(single.ngrams) == {3} and len(log.charges) == 1
    assert all(len(g.split()) == 3 for g in single.ngrams[3])
    with pytest.raises(PrivregValueError, match="length"):
        extract_ngrams(
            LocalNgramEngine(small_corpus), charger=EventLog(), epsilon=1.0, delta=1e-7, max_n=2, method="dpsu-single"
        )
    with pytest.raises(PrivregValueError, match="variant"):
        extract_ngrams(
            LocalNgramEngine(small_corpus), charger=EventLog(), epsilon=1.0, delta=1e-7, max_n=2, variant="fast"
        )


# --- synthetic generator ----------------------------------------------------------------


def test_synthetic_generator_shape():
    spec = SyntheticSpec(users=20_000, seed=4)
    c = synthetic_corpus(spec)
    per_user = np.bincount(c.user, minlength=spec.users)
    assert per_user.min() >= spec.min_tokens and per_user.max() <= spec.max_tokens
    assert per_user.max() > 20 * np.median(per_user)  # heavy tail
    freq = np.sort(np.bincount(c.tokens))[::-1]
    assert freq[0] > 20 * freq[99]  # Zipf-like vocabulary
    assert np.array_equal(synthetic_corpus(spec).tokens, c.tokens)  # deterministic
    with pytest.raises(PrivregValueError, match="restart"):
        SyntheticSpec(restart=1.5)


# --- the workflow ---------------------------------------------------------------------------


def test_workflow_on_the_bundled_slice_and_a_csv(tmp_path):
    reg = load_registry(plugins={"ngrams": hooks}, autoload=False)
    item = reg.get("ngrams")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path / "a")
    res = item.run(ctx, {"epsilon": 4.0, "max_n": 3, "max_keys": 20})
    assert "DPNE" in res.summary and res.metrics["counts"]["1"] > 0
    assert (tmp_path / "a" / "ngrams-1.txt").read_text().count("\n") == res.metrics["counts"]["1"]
    ledger = [json.loads(line) for line in (tmp_path / "a" / "ledger.jsonl").read_text().splitlines()]
    (block,) = ledger  # the whole plan, one block: the 1-gram DPSU block, then a Gaussian per length
    assert block["event"]["kind"] == "composed" and block["event"]["events"][0]["kind"] == "composed"
    assert [e["kind"] for e in block["event"]["events"][1:]] == ["gaussian", "gaussian"]
    corpus = synthetic_corpus(users=300, vocab_size=200, seed=8)
    path = write_records(corpus, tmp_path / "in.csv")
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=1), output_dir=tmp_path / "b")
    res = item.run(ctx, {"input": path, "max_n": 4, "max_keys": 20, "method": "dpsu-even"})
    assert "DPSU-even" in res.summary and len(ctx.charger.charges) == 1  # four releases, one block
    with pytest.raises(PrivregValueError, match="length"):
        item.run(WorkflowContext(), {"method": "dpsu-single"})
    steps = hooks.privreg_demo_steps()
    assert "DPNE" in steps[0].run(WorkflowContext(rng=InsecureReproducibleRandom(seed=2)))
