"""Plugin ``ngrams``: differentially private n-gram extraction (paper 002).

Kim, Gopi, Kulkarni, Yekhanin (2021), "Differentially Private n-gram Extraction",
NeurIPS. DPSU with the weighted Gaussian policy (Algorithm 6), DPNE (Algorithm 1) and its
scalable version (Appendix A, Algorithms 2-5), the DPSU baselines of Table 3, on the
local (numpy/pandas) or Spark backend of :mod:`privreg.plugins.ngrams.backends`.
"""
