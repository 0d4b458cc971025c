"""Plugin ``heavy_hitters``: private discovery of out-of-vocabulary words (paper 001).

LDP TrieHH (Sun, Kairouz, Sun, Gascon, Suresh 2024, Algorithm 2) over Subset Selection
reports from the standard plugin, with GreedySampling/RandomSampling, multi-pass runs,
the shuffled central epsilon from :mod:`privreg.accountant.shuffle`, Lemma 1's approximate
k-anonymity, and a simulated keyboard population. Workflow: ``privreg run oov-discovery``.
"""

from privreg.plugins.heavy_hitters.alphabet import END, Alphabet
from privreg.plugins.heavy_hitters.population import PopulationModel, WordLaw, english_word_law
from privreg.plugins.heavy_hitters.privacy import (
    KAnonymity,
    central_epsilon,
    k_anonymity,
    keep_probability_bound,
    local_epsilon,
    triehh_event,
)
from privreg.plugins.heavy_hitters.sampling import SAMPLERS, sample_contributions
from privreg.plugins.heavy_hitters.triehh import LayerStats, LDPTrieHH, TrieHHResult, layer_votes
from privreg.plugins.heavy_hitters.users import Lexicon, UserWords

__all__ = [
    "END",
    "Alphabet",
    "Lexicon",
    "UserWords",
    "SAMPLERS",
    "sample_contributions",
    "LDPTrieHH",
    "LayerStats",
    "TrieHHResult",
    "layer_votes",
    "triehh_event",
    "central_epsilon",
    "local_epsilon",
    "KAnonymity",
    "k_anonymity",
    "keep_probability_bound",
    "WordLaw",
    "english_word_law",
    "PopulationModel",
]
