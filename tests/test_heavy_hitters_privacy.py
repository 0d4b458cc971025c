"""Privacy of LDP TrieHH (paper 001): the charged event, Theorems 1-2 through the accountant,
Lemma 1's k-anonymity, and the Subset Selection reports of a trie layer (unbiased,
audited).

Statistical tests are seeded (InsecureReproducibleRandom or a seeded numpy generator for
Monte Carlo oracles), hence deterministic; each states its false-alarm rate.
"""

import math

import numpy as np
import pytest
from ldp_helpers import seeded

from privreg import EventLog, LocalDP, Shuffled, WorkflowContext
from privreg.accountant import make_accountant
from privreg.accountant.shuffle import shuffle_epsilon
from privreg.audit import audit_randomizer
from privreg.budget.session import BudgetSession, PrivacyBudget
from privreg.core.errors import BudgetExceededError, PrivregValueError
from privreg.core.registry import load_registry
from privreg.mechanisms.subset_selection import SubsetSelection, uniform_subsets
from privreg.plugins.heavy_hitters import hooks
from privreg.plugins.heavy_hitters.population import PopulationModel, english_word_law
from privreg.plugins.heavy_hitters.privacy import (
    central_epsilon,
    k_anonymity,
    keep_probability_bound,
    local_epsilon,
    triehh_event,
)
from privreg.plugins.heavy_hitters.sampling import sample_contributions
from privreg.plugins.heavy_hitters.triehh import LDPTrieHH, _LayerAllowance, layer_votes
from privreg.testing import CountingRandom

PRODUCTION = dict(epsilon=10.0, users_per_layer=500_000, contribution_bound=60)  # Section 4.1


# --- Theorems 1 and 2 through the accountant -----------------------------------------------


def test_central_epsilon_reported_by_the_workflow_is_the_accountants():
    """The workflow's eps' must be what an accountant gives for the charged events, in an
    EventLog and in a budget session; here eps0 = 3 over N*B = 6000 reports amplifies to
    about 0.42 at delta = 1e-6."""
    item = load_registry(plugins={"heavy_hitters": hooks}, autoload=False).get("oov-discovery")
    params = {**item.example.params, "epsilon": 3.0, "delta": 1e-6, "users_per_layer": 3000, "depth": 3}
    log = EventLog()
    result = item.run(WorkflowContext(charger=log, rng=seeded(4)), params)
    accountant = make_accountant("basic", event_delta=1e-6, neighbouring="replace_one")
    for event in log.events:
        accountant.compose(event)
    reported = result.metrics["central_epsilon"]
    assert reported == accountant.epsilon(1e-6)
    assert reported == shuffle_epsilon(epsilon0=3.0, num_reports=6000, delta=1e-6)
    assert 0.3 < reported < 0.5 and result.metrics["local_epsilon"] == 3.0
    with BudgetSession(
        budget=PrivacyBudget(epsilon=3.0, delta=1e-6, neighbouring="replace_one"), filters=("basic",), event_delta=1e-6
    ) as session:
        again = item.run(WorkflowContext(charger=session, rng=seeded(4)), params)
        assert session.spent().by_filter["basic"] == again.metrics["central_epsilon"] == reported


def test_production_configuration_gets_the_papers_central_epsilon_from_the_accountant():
    """eps0 = 10, n = N*B = 5e5 * 60 = 3e7, delta = 1e-10 (Section 4.1): FMT 2021 numerical
    0.3075 (the paper prints 0.315, the FMT 2021 tool's output; see tests/test_shuffle.py)
    and the closed form 0.7308. The FMT 2023 bound (0.2138) is refused: with eta_max =
    10,000 the deep layers' reports hold d = 46 items, outside the bound's class."""
    trie = LDPTrieHH(**PRODUCTION, max_prefixes=10_000, depth=15, passes=2)
    event = trie.privacy_event()
    assert event == Shuffled(event=LocalDP(epsilon0=10.0, randomizer="subset-selection"), num_reports=30_000_000)
    assert central_epsilon(event, 1e-10) == shuffle_epsilon(epsilon0=10.0, num_reports=30_000_000, delta=1e-10)
    assert central_epsilon(event, 1e-10) == pytest.approx(0.3075, abs=1e-4)
    assert local_epsilon(event) == 10.0
    closed = LDPTrieHH(**PRODUCTION, max_prefixes=10_000, depth=15, shuffle_bound="fmt21-closed-form")
    assert central_epsilon(closed.privacy_event(), 1e-10) == pytest.approx(0.7308, abs=1e-4)
    with pytest.raises(PrivregValueError, match="d=46 >= 2") as info:
        LDPTrieHH(**PRODUCTION, max_prefixes=10_000, depth=15, shuffle_bound="fmt23-numerical")
    assert "shuffle_bound='fmt21-numerical'" in str(info.value)
    assert shuffle_epsilon(
        epsilon0=10.0, num_reports=30_000_000, delta=1e-10, bound="fmt23-numerical"
    ) == pytest.approx(0.2138, abs=1e-4)


# --- the FMT 2023 bound is refused where Subset Selection is outside its class -------------


@pytest.mark.parametrize(
    "max_prefixes, depth, allowed",
    [
        (200, 15, True),  # widest layer 200 * 101 = 20,200 candidates + gamma: d = 1 at eps 10
        (300, 15, False),  # 30,300 + 1: d = ceil(30,301 / (e^10 + 1)) = 2
        (300, 1, True),  # one layer only: |Z_1| = 100 * 101 = 10,100, d = 1
    ],
)
def test_fmt23_is_accepted_exactly_when_every_layer_reports_one_item(max_prefixes, depth, allowed):
    kwargs = dict(
        epsilon=10.0,
        users_per_layer=100,
        contribution_bound=2,
        max_prefixes=max_prefixes,
        depth=depth,
        shuffle_bound="fmt23-numerical",
    )
    widest = SubsetSelection(epsilon=10.0, s=max(100 * 101, max_prefixes * 101 * (depth > 1)) + 1)
    assert widest.admits_fmt23_decomposition is allowed
    assert (widest.subset_size == 1) is allowed
    if allowed:
        assert LDPTrieHH(**kwargs).privacy_event().bound == "fmt23-numerical"
    else:
        with pytest.raises(PrivregValueError, match=r"shuffle_bound='fmt23-numerical'.*fmt21-numerical"):
            LDPTrieHH(**kwargs)
    assert LDPTrieHH(**{**kwargs, "shuffle_bound": "fmt21-numerical"}).privacy_event().bound == "fmt21-numerical"


def test_triehh_event_refuses_fmt23_for_subsets_of_two_or_more():
    ss = SubsetSelection(epsilon=2.0, s=50)  # d = ceil(50 / (e^2 + 1)) = 6
    with pytest.raises(PrivregValueError, match=r"d=6 >= 2.*bound='fmt21-numerical'"):
        triehh_event(randomizer=ss, users_per_layer=10, contribution_bound=2, bound="fmt23-numerical")
    rr = SubsetSelection(epsilon=5.0, s=50)  # d = 1: k-ary randomized response
    assert (
        triehh_event(randomizer=rr, users_per_layer=10, contribution_bound=2, bound="fmt23-numerical").bound
        == "fmt23-numerical"
    )


def test_workflow_refuses_fmt23_before_charging_or_drawing_anything():
    """oov-discovery at eps = 5 over the example's layers (d = 68 in layer 1): refused with
    the parameter, its value and the fix; nothing charged, no randomness drawn."""
    item = load_registry(plugins={"heavy_hitters": hooks}, autoload=False).get("oov-discovery")
    log, rng = EventLog(), CountingRandom(seed=3)
    params = {**item.example.params, "epsilon": 5.0, "shuffle_bound": "fmt23-numerical"}
    with pytest.raises(PrivregValueError) as info:
        item.run(WorkflowContext(charger=log, rng=rng), params)
    message = str(info.value)
    assert "shuffle_bound='fmt23-numerical'" in message and "use shuffle_bound='fmt21-numerical'" in message
    assert len(log.events) == 0 and rng.draws == 0


def test_cli_refuses_fmt23_with_one_line_and_no_ledger_left(capsys, tmp_path):
    from privreg.cli.main import main

    code = main(
        [
            "run",
            "oov-discovery",
            "--epsilon",
            "5",
            "--shuffle-bound",
            "fmt23-numerical",
            "--users-per-layer",
            "100",
            "--depth",
            "3",
            "-o",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("privreg: error:")
    assert "--shuffle-bound fmt23-numerical" in err and "fmt21-numerical" in err
    # nothing was charged, so the failed run removed the ledger it had created (issue #19)
    assert not (tmp_path / "ledger.sqlite").exists()


def test_a_session_must_account_shuffles_at_a_delta():
    """Without event_delta no filter of a budget session can price a Shuffled event: the run
    is refused before any noise (the CLI passes the budget's delta)."""
    trie = LDPTrieHH(epsilon=5.0, users_per_layer=10, contribution_bound=1, max_prefixes=5, depth=2)
    with BudgetSession(budget=PrivacyBudget(epsilon=5.0, delta=1e-6, neighbouring="replace_one")) as session:
        with pytest.raises(BudgetExceededError, match="set event_delta for curve events"):
            trie.run([], trie_lexicon(), np.zeros(3, bool), charger=session, rng=seeded(0))
        assert session.ledger.head()[0] == 0


def trie_lexicon():
    from privreg.plugins.heavy_hitters.users import Lexicon

    return Lexicon(words=["ab", "ba", "b"], depth=2)


# --- Lemma 1 --------------------------------------------------------------------------------


@pytest.mark.slow
def test_lemma_1_bound_holds_against_an_exact_simulation():
    """eta_max = 20, |X| = 10 (s = 201), eps = 2 (d = 24), N*B = 400. tau is simulated
    exactly 2,000 times (sums of 400 uniform 22-subsets of 200 items, then the 20th
    largest) and f(k) by binomials. The certified bound must not be below the simulated
    probability by more than 4.75 standard errors (one-sided, false-alarm rate 1e-6 per k,
    5e-6 in all), and must be informative: within 0.12 of it (the bound's slack here is
    about 0.05; exceeding 0.12 needs a 6-sigma low simulation)."""
    eta, size, eps, users, bound = 20, 10, 2.0, 200, 2
    n, reps = users * bound, 2000
    d = SubsetSelection(epsilon=eps, s=eta * size + 1).subset_size
    subsets = uniform_subsets(reps * n, d - 2, eta * size, seeded(1)).reshape(reps, -1)
    counts = np.bincount(
        (subsets + (eta * size) * np.arange(reps)[:, None]).ravel(), minlength=reps * eta * size
    ).reshape(reps, -1)
    tau = np.sort(counts, axis=1)[:, -eta]
    gen = np.random.default_rng(2)
    ss = SubsetSelection(epsilon=eps, s=eta * size + 1)
    p, q = float(ss.keep_probability), float(ss.other_probability)
    for k in (0, 5, 10, 20, 40):
        f = gen.binomial(k, p, size=reps) + gen.binomial(n - k, q, size=reps)
        simulated = float((f >= tau).mean())
        certified, independent = keep_probability_bound(
            k, epsilon=eps, users_per_layer=users, contribution_bound=bound, max_prefixes=eta, alphabet_size=size
        )
        se = math.sqrt(max(simulated * (1 - simulated), 1e-4) / reps)
        assert simulated <= certified + 4.75 * se, (k, simulated, certified)
        assert certified - simulated < 0.12, (k, simulated, certified)
        assert independent <= certified + 1e-9


def test_k_anonymity_is_the_largest_certified_k():
    config = dict(epsilon=10.0, users_per_layer=500_000, contribution_bound=1, max_prefixes=10_000, alphabet_size=100)
    result = k_anonymity(**config, alpha=0.95)
    assert result.k == 4 and result.certified <= 0.05 and (result.s, result.d) == (1_000_001, 46)
    assert keep_probability_bound(5, **config)[0] > 0.05
    looser = k_anonymity(**config, alpha=0.5)
    assert looser.k > result.k


def test_paper_production_parameters_certify_no_k_at_alpha_095():
    """With B = 60 (n = 3e7) the noise alone passes tau with probability ~0.14: Lemma 1 as
    printed certifies no k at alpha = 0.95 (the paper states k = 45); k = 201 at alpha = 0.05."""
    config = dict(**PRODUCTION, max_prefixes=10_000, alphabet_size=100)
    assert k_anonymity(**config, alpha=0.95).k is None
    assert keep_probability_bound(0, **config)[0] == pytest.approx(0.142, abs=0.002)
    assert keep_probability_bound(45, **config)[0] == pytest.approx(0.323, abs=0.002)
    assert k_anonymity(**config, alpha=0.05).k == 201


def test_lemma_1_gives_nothing_when_reports_hold_at_most_two_items():
    result = k_anonymity(epsilon=10.0, users_per_layer=1000, contribution_bound=1, max_prefixes=10, alphabet_size=101)
    assert result.d == 1 and result.k is None and result.certified == 1.0


# --- the Subset Selection reports of a layer ------------------------------------------------


def _layer(eps, users=2000, bound=40):
    """A trie layer's inputs: simulated users' distinct 3-character prefixes (a random
    code each), RandomSampling with gamma padding."""
    model = PopulationModel(law=english_word_law(5000), known_words=200, depth=4, personal_pool=2000)
    group = model.sample(users, seeded(11))
    candidates = 50 * 101
    codes = (group.words * 7919) % candidates
    inputs = sample_contributions(
        group.owners,
        codes,
        group.counts,
        num_users=users,
        bound=bound,
        sampler="random",
        dummy=candidates,
        rng=seeded(12),
    )
    return SubsetSelection(epsilon=eps, s=candidates + 1), inputs


def test_subset_selection_estimates_are_unbiased_on_a_trie_layer():
    """Domain Z_i U {gamma} with eta_max = 50, |X| = 101 (s = 5051), eps = 4 (d = 91), most
    reports carrying gamma. (1) The standard plugin's estimator on one randomize call:
    every item's estimate within 5.3 exact standard deviations of the truth; (2) the
    chunked vote vector the trie uses: every count within 5.3 standard deviations of its
    mean ``n_j p + (n - n_j) q``. Per item two-sided 1.2e-7, over 2 x 5051 items a
    family-wise false-alarm rate below 1.2e-3."""
    ss, inputs = _layer(4.0)
    truth = np.bincount(inputs, minlength=ss.s)
    assert truth[-1] > inputs.size / 2 and ss.subset_size == 91
    out = ss.randomize(inputs, charger=EventLog(), rng=seeded(13))
    est = ss.estimate(out.reports)
    z = (est.counts - truth) / np.sqrt(ss.variance(truth))
    assert np.abs(z).max() < 5.3
    event = Shuffled(event=LocalDP(epsilon0=4.0, randomizer="subset-selection"), num_reports=inputs.size)
    votes = ss.vote_counts(inputs, charger=_LayerAllowance(event), rng=seeded(14))  # the trie's default
    p, q = float(ss.keep_probability), float(ss.other_probability)
    n = inputs.size
    mean = truth * p + (n - truth) * q
    sd = np.sqrt(truth * p * (1 - p) + (n - truth) * q * (1 - q))
    assert np.abs((votes - mean) / sd).max() < 5.3
    assert votes.sum() == n * ss.subset_size


def test_one_chunk_of_votes_is_the_randomizers_item_counts():
    ss, inputs = _layer(6.0, users=500)
    event = Shuffled(event=LocalDP(epsilon0=6.0, randomizer="subset-selection"), num_reports=inputs.size)
    votes = layer_votes(ss, inputs, charger=_LayerAllowance(event), rng=seeded(5), chunk_size=inputs.size)
    direct = ss.randomize(inputs, charger=EventLog(), rng=seeded(5))
    np.testing.assert_array_equal(votes, ss.item_counts(direct.reports))


@pytest.mark.parametrize("eps, eta, samples", [(10.0, 60, 100_000), (4.0, 20, 40_000)])
def test_layer_randomizer_passes_the_empirical_auditor(eps, eta, samples):
    """audit_randomizer at alpha = 1e-6 (false-alarm rate 1e-6 each) on a real prefix
    against the dummy gamma, the item-level neighbours of Theorem 1. At eps = 10 the
    domain is small enough for d = 1 and the audit has power: its lower bound exceeds 6."""
    ss = SubsetSelection(epsilon=eps, s=eta * 101 + 1)
    result = audit_randomizer(
        ss, neighbours=(np.array([7]), np.array([ss.s - 1])), samples=samples, alpha=1e-6, rng=seeded(21)
    )
    assert result.passed, result
    if ss.subset_size == 1:
        assert result.epsilon_lower_bound > 6.0
