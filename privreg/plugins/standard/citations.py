"""The papers the standard plugin implements."""

from privreg.core.items import Citation

DMNS06 = Citation(
    authors="C. Dwork, F. McSherry, K. Nissim, A. Smith",
    title="Calibrating Noise to Sensitivity in Private Data Analysis",
    year=2006,
    venue="TCC",
    where="Definition 2, Proposition 1",
)
CKS20 = Citation(
    authors="C. Canonne, G. Kamath, T. Steinke",
    title="The Discrete Gaussian for Differential Privacy",
    year=2020,
    venue="NeurIPS",
    where="Algorithms 1-2 (exact discrete Laplace sampling)",
)
KOV14 = Citation(
    authors="P. Kairouz, S. Oh, P. Viswanath",
    title="Extremal Mechanisms for Local Differential Privacy",
    year=2014,
    venue="NeurIPS",
    where="k-ary randomized response",
)
