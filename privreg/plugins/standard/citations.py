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
SUN24 = Citation(
    authors="Z. Sun, P. Kairouz, H. Sun, A. Gascon, A. T. Suresh",
    title="Private Federated Discovery of Out-of-Vocabulary Words for Gboard",
    year=2024,
    venue="arXiv:2404.11607",
    where="Algorithm 1 (Subset Selection, after Wang et al. 2016 and Ye-Barg 2018)",
    url="https://arxiv.org/abs/2404.11607",
)
WBLJ17 = Citation(
    authors="T. Wang, J. Blocki, N. Li, S. Jha",
    title="Locally Differentially Private Protocols for Frequency Estimation",
    year=2017,
    venue="USENIX Security",
    where="Optimized Unary Encoding: p = 1/2, q = 1/(e^eps + 1)",
)
MT07 = Citation(
    authors="F. McSherry, K. Talwar",
    title="Mechanism Design via Differential Privacy",
    year=2007,
    venue="FOCS",
    where="the exponential mechanism; exact sampling via Canonne-Kamath-Steinke 2020, Algorithm 1",
)
DING21 = Citation(
    authors="Z. Ding, D. Kifer, S. M. Saghaian N. E., T. Steinke, Y. Wang, Y. Xiao, D. Zhang",
    title="The Permute-and-Flip Mechanism is Identical to Report-Noisy-Max with Exponential Noise",
    year=2021,
    venue="arXiv:2105.07260",
    where="main theorem (exponential noise = permute-and-flip); Gumbel noise = exponential mechanism",
)
MS20 = Citation(
    authors="R. McKenna, D. Sheldon",
    title="Permute-and-Flip: A New Mechanism for Differentially Private Selection",
    year=2020,
    venue="NeurIPS",
    where="the permute-and-flip mechanism and its pure epsilon-DP proof",
)
GRS09 = Citation(
    authors="A. Ghosh, T. Roughgarden, M. Sundararajan",
    title="Universally Utility-Maximizing Privacy Mechanisms",
    year=2009,
    venue="STOC",
    where="the geometric mechanism (two-sided); exact sampling: Canonne-Kamath-Steinke 2020",
)
BW18 = Citation(
    authors="B. Balle, Y.-X. Wang",
    title="Improving the Gaussian Mechanism for Differential Privacy: Analytical Calibration and Optimal Denoising",
    year=2018,
    venue="ICML",
    where="Theorem 8 (analytic calibration); sampled as the exact discrete Gaussian of "
    "Canonne-Kamath-Steinke 2020, Algorithm 3",
)
GOPI20 = Citation(
    authors="S. Gopi, P. Gulhane, J. Kulkarni, J. H. Shen, M. Shokouhi, S. Yekhanin",
    title="Differentially Private Set Union",
    year=2020,
    venue="ICML",
    where="Section 5 (Laplace and weighted Gaussian policies, threshold rho); Laplace "
    "thresholding after Korolova et al. 2009",
    url="https://arxiv.org/abs/2002.09745",
)
KOV14 = Citation(
    authors="P. Kairouz, S. Oh, P. Viswanath",
    title="Extremal Mechanisms for Local Differential Privacy",
    year=2014,
    venue="NeurIPS",
    where="k-ary randomized response",
)
NRS07 = Citation(
    authors="K. Nissim, S. Raskhodnikova, A. Smith",
    title="Smooth Sensitivity and Sampling in Private Data Analysis",
    year=2007,
    venue="STOC",
    where="Definitions 2.1-2.2, Proposition 3.4 (median)",
)
OKADA15 = Citation(
    authors="R. Okada, K. Fukuchi, K. Kakizaki, J. Sakuma",
    title="Differentially Private Analysis of Outliers",
    year=2015,
    venue="ECML PKDD",
    where="Theorem 2 (Gaussian mechanism with smooth sensitivity), p = 1",
)
CKS20_GAUSSIAN = Citation(
    authors="C. Canonne, G. Kamath, T. Steinke",
    title="The Discrete Gaussian for Differential Privacy",
    year=2020,
    venue="NeurIPS",
    where="Theorem 14 (privacy), Algorithm 3 (exact sampling)",
)
SMITH11 = Citation(
    authors="A. Smith",
    title="Privacy-preserving statistical estimation with optimal convergence rates",
    year=2011,
    venue="STOC",
    where="Section 3 (the exponential-mechanism quantile); selection of McSherry-Talwar 2007, Theorems 6 and 8",
)
