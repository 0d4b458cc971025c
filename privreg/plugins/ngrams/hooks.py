"""Hook implementations of the ``ngrams`` plugin (entry point ``ngrams``)."""

from __future__ import annotations

from pathlib import Path

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Citation, Example, Param, RegistryItem
from privreg.core.workflow import DemoStep
from privreg.plugins.ngrams.dpne import VALID_COUNTS, VARIANTS
from privreg.plugins.ngrams.levels import PRUNINGS
from privreg.plugins.ngrams.noise_plan import METHODS
from privreg.plugins.ngrams.workflow import demo_steps, ngrams_workflow

#: Paper 002.
KGKY21 = Citation(
    authors="Kunho Kim, Sivakanth Gopi, Janardhan Kulkarni, Sergey Yekhanin",
    title="Differentially Private n-gram Extraction",
    year=2021,
    venue="NeurIPS",
    where="Algorithms 1-6, Theorem 2.1, Propositions 2.1-2.2, Table 3",
    url="https://arxiv.org/abs/2108.02831",
)

_PARAMS = (
    Param(name="input", type=Path, default=None,
          doc="CSV (with header), JSONL or Parquet file of (user, text) rows; default: bundled SpamAssassin ham slice"),
    Param(name="format", type=str, default=None, choices=["csv", "jsonl", "parquet"],
          doc="input format (default: from the file suffix)"),
    Param(name="user_column", type=str, default="user_id", doc="column holding the user id"),
    Param(name="text_column", type=str, default="text", doc="column holding the text"),
    Param(name="epsilon", type=float, default=4.0, minimum=0, exclusive_minimum=True,
          doc="privacy parameter epsilon of the whole extraction"),
    Param(name="delta", type=float, default=1e-7, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="privacy parameter delta of the whole extraction (half to the Gaussians, half to rho_1)"),
    Param(name="max_n", type=int, default=9, minimum=1, maximum=64, doc="T: the longest n-gram length extracted"),
    Param(name="max_keys", type=int, default=300, minimum=1,
          doc="Delta_k: the most distinct k-grams one user contributes, for every length k"),
    Param(name="method", type=str, default="dpne", choices=list(METHODS),
          doc="dpne, or a DPSU baseline of Table 3 (dpsu-single needs --length)"),
    Param(name="length", type=int, default=None, minimum=1, doc="the one n-gram length of dpsu-single"),
    Param(name="schedule", type=str, default="equal", choices=["equal", "geometric"],
          doc="sigma_k schedule of DPNE: equal, or geometric sigma_k = c sigma_(k-1) (needs --decay)"),
    Param(name="decay", type=float, default=None, minimum=0, exclusive_minimum=True, maximum=1,
          doc="c of the geometric schedule, 0 < c < 1"),
    Param(name="eta", type=float, default=0.01, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="tolerated fraction of spurious n-grams (sets rho_k, k >= 2)"),
    Param(name="pruning", type=str, default="both", choices=list(PRUNINGS),
          doc="valid k-grams: both = (S1 x S(k-1)) n (S(k-1) x S1), single = S(k-1) x S1"),
    Param(name="variant", type=str, default="scalable", choices=list(VARIANTS),
          doc="scalable (Appendix A, V_k implicit) or explicit (Algorithm 1, histogram over all of V_k)"),
    Param(name="valid_count", type=str, default="exact", choices=list(VALID_COUNTS),
          doc="|V_k| exactly (default) or by EstimateValidKgrams (Algorithm 3, as the paper)"),
    Param(name="sample_rate", type=float, default=None, minimum=0, exclusive_minimum=True, maximum=1,
          doc="p of EstimateValidKgrams (default: about 2^20 draws)"),
    Param(name="backend", type=str, default="local", choices=["local", "spark"],
          doc="local (numpy/pandas, in-process) or spark (PySpark; pip install privreg[spark], Java 17)"),
    Param(name="spark_master", type=str, default="local[2]", doc="Spark master URL when --backend spark"),
    Param(name="token_pattern", type=str, default=r"[\w']+", doc="regular expression matching one token"),
    Param(name="lowercase", type=bool, default=True, doc="lower-case text before tokenizing"),
    Param(name="progress", type=bool, default=False, doc="show a progress bar over lengths (needs tqdm)"),
    Param(name="workers", type=int, default=1, minimum=1,
          doc="processes that tokenize and run the per-partition passes (local backend)"),
)


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="ngrams",
            kind="workflow",
            summary="DP n-gram extraction: DPNE (and DPSU baselines) on (user, text) files, local or Spark",
            citation=KGKY21,
            factory=ngrams_workflow,
            example=Example(params={"epsilon": 4.0, "delta": 1e-7, "max_n": 3, "max_keys": 50}),
            params=_PARAMS,
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()
