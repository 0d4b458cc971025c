"""The papers the ``spam`` plugin implements or relies on."""

from privreg.core.items import Citation

__all__ = ["PSR12", "DGK07", "LHC06", "CHARIKAR02"]

#: Paper 000 of this project.
PSR12 = Citation(
    authors="M. A. Pathak, M. Sharifi, B. Raj",
    title="Privacy-Preserving Spam Filtering",
    year=2011,
    venue="arXiv:1102.4021",
    where="Sections 3.1, 4.2 (steps 1-12), 4.3, 5.2 eq. (2), 5.3, 6.2-6.4, Tables 2-6",
    url="https://arxiv.org/abs/1102.4021",
)
DGK07 = Citation(
    authors="I. Damgard, M. Geisler, M. Kroigaard",
    title="Efficient and Secure Comparison for On-Line Auctions",
    year=2007,
    venue="ACISP",
    where="the bitwise comparison used by the evaluation protocol (privreg.crypto.compare)",
)
LHC06 = Citation(
    authors="P. Li, T. J. Hastie, K. W. Church",
    title="Very Sparse Random Projections",
    year=2006,
    venue="KDD",
    where="density 1/sqrt(D) random projections (the sparse hyperplanes of the LSH reduction)",
)
CHARIKAR02 = Citation(
    authors="M. Charikar",
    title="Similarity Estimation Techniques from Rounding Algorithms",
    year=2002,
    venue="STOC",
    where="random-hyperplane LSH (paper 000, Section 6.4 item 2)",
)
