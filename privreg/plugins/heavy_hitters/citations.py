"""The paper the ``heavy_hitters`` plugin implements."""

from __future__ import annotations

from privreg.core.items import Citation

__all__ = ["SUN24_TRIEHH"]

SUN24_TRIEHH = Citation(
    authors="Z. Sun, P. Kairouz, H. Sun, A. Gascon, A. T. Suresh",
    title="Private Federated Discovery of Out-of-Vocabulary Words for Gboard",
    year=2024,
    venue="arXiv:2404.11607",
    where="Algorithm 2 (LDP TrieHH), Theorems 1-2, Lemma 1, Section 4",
    url="https://arxiv.org/abs/2404.11607",
)
