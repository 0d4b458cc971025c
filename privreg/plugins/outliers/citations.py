"""The papers the ``outliers`` plugin implements or relies on."""

from privreg.core.items import Citation

OKADA15 = Citation(
    authors="R. Okada, K. Fukuchi, K. Kakizaki, J. Sakuma",
    title="Differentially Private Analysis of Outliers",
    year=2015,
    venue="ECML PKDD (arXiv:1507.06763)",
    where="Definitions 7-8, Theorems 4-7, Propositions 1-2, Algorithms 1-3",
    url="https://arxiv.org/abs/1507.06763",
)
NRS07 = Citation(
    authors="K. Nissim, S. Raskhodnikova, A. Smith",
    title="Smooth Sensitivity and Sampling in Private Data Analysis",
    year=2007,
    venue="STOC",
    where="Definition 2.2 (smooth upper bound), Lemma 2.3",
)
MV10 = Citation(
    authors="H. D. Mittelmann, F. Vallentin",
    title="High-Accuracy Semidefinite Programming Bounds for Kissing Numbers",
    year=2010,
    venue="Experimental Mathematics 19(2):175-179",
    where="Table 1 (upper bounds, dimensions 3-24)",
)
CS99 = Citation(
    authors="J. H. Conway, N. J. A. Sloane",
    title="Sphere Packings, Lattices and Groups (3rd edition)",
    year=1999,
    venue="Springer, Grundlehren 290",
    where="Table 1.5 (kissing numbers: best known lattice and nonlattice constructions)",
)
WELZL91 = Citation(
    authors="E. Welzl",
    title="Smallest Enclosing Disks (Balls and Ellipsoids)",
    year=1991,
    venue="New Results and New Trends in Computer Science, LNCS 555",
    where="the randomised incremental algorithm; move-to-front variant after Gaertner 1999",
)
