"""Hook implementations of the ``spam`` plugin (entry point ``spam``)."""

from __future__ import annotations

from pathlib import Path

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, Param, RegistryItem
from privreg.core.workflow import DemoStep
from privreg.plugins.spam.citations import PSR12
from privreg.plugins.spam.features import HASHES
from privreg.plugins.spam.reduction import REDUCERS
from privreg.plugins.spam.training_config import REVEALS
from privreg.plugins.spam.workflow import demo_steps, spam_filter

_PARAMS = (
    Param(name="input", type=Path, default=None,
          doc="SpamAssassin tarball (folders easy-ham-1/2, hard-ham-1, spam-1/2); default "
              "../shared/data/spamassassin.tar.gz when present, else the bundled slice"),
    Param(name="bundled", type=bool, default=False, doc="use the bundled 80-message slice"),
    Param(name="train", type=int, default=None, minimum=1,
          doc="training messages (default 3000 as in the paper, or half of a smaller corpus)"),
    Param(name="test", type=int, default=None, minimum=1, doc="test messages (default 3000, or the rest)"),
    Param(name="space", type=int, default=10_000, minimum=2,
          doc="hash space of the character 4-grams (the paper: 10^6 reduced to 10^4)"),
    Param(name="hash", type=str, default="modulo", choices=list(HASHES),
          doc="modulo (the paper: 32-bit 4-gram mod space) or mix (a fixed 64-bit mixing first)"),
    Param(name="max_active", type=int, default=None, minimum=1,
          doc="keep at most this many distinct 4-grams per message (public bound for DP)"),
    Param(name="reduction", type=str, default="none", choices=sorted(REDUCERS),
          doc="dimensionality reduction of Section 6.4 (pca is the data-dependent baseline)"),
    Param(name="reduced_dim", type=int, default=1000, minimum=1, doc="target dimension of the reduction"),
    Param(name="batch_size", type=int, default=100, minimum=1, doc="K: messages per training batch (eq. (2))"),
    Param(name="eta", type=float, default=3e-4, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="step size applied to the batch sum of gradients"),
    Param(name="lam", type=float, default=0.0, minimum=0, doc="L2 regularisation lambda (sign corrected)"),
    Param(name="epochs", type=int, default=1, minimum=1, doc="passes over the training data"),
    Param(name="period", type=float, default=64.0, minimum=4,
          doc="period P of the private sigmoid approximation (a power of two; exact for |w.x| << P/2)"),
    Param(name="harmonics", type=int, default=19, minimum=1,
          doc="highest odd harmonic of the approximation (Bob encrypts harmonics+1 values per message)"),
    Param(name="reveal", type=str, default="final", choices=list(REVEALS),
          doc="final: Bob learns only the final model; every-batch: w after every batch (the paper)"),
    Param(name="key_bits", type=int, default=2048, minimum=128, doc="Paillier modulus bits (>= 2048 unless insecure)"),
    Param(name="insecure_small_keys", type=bool, default=False,
          doc="allow keys below 2048 bits (paper reproduction at 256/1024 bits; INSECURE)"),
    Param(name="dp", type=str, default="none", choices=["none", "gradient"],
          doc="gradient: Gaussian noise on every batch gradient, charged to the budget (model is (eps, delta)-DP)"),
    Param(name="epsilon", type=float, default=1.0, minimum=0, exclusive_minimum=True,
          doc="epsilon of the whole training when dp=gradient (the run's budget)"),
    Param(name="delta", type=float, default=1e-6, minimum=0, exclusive_minimum=True, maximum=0.5,
          doc="delta of the whole training when dp=gradient"),
    Param(name="private_eval", type=int, default=None, minimum=0,
          doc="test messages classified by the private evaluation protocol (default: all)"),
    Param(name="eval_weight_bits", type=int, default=8, minimum=0, maximum=32,
          doc="fractional bits of the weights in the evaluation (sets the comparison length)"),
    Param(name="sigma", type=int, default=40, minimum=20, maximum=128, doc="statistical security parameter"),
    Param(name="workers", type=int, default=None, minimum=1, doc="worker processes for Paillier batches"),
)


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="spam-filter",
            kind="workflow",
            summary="private training and evaluation of a logistic-regression spam filter (Paillier, DGK)",
            citation=PSR12,
            factory=spam_filter,
            example=Example(params={
                "bundled": True, "train": 20, "test": 20, "space": 128, "hash": "mix", "max_active": 32,
                "batch_size": 10, "eta": 0.05, "period": 32.0, "harmonics": 11, "key_bits": 256,
                "insecure_small_keys": True, "dp": "gradient", "epsilon": 1.0, "delta": 1e-6, "private_eval": 4,
                "workers": 1}),
            params=_PARAMS,
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()
