"""Hook implementations of the ``spam`` plugin (entry point ``spam``)."""

from __future__ import annotations

from privreg.core.deployment import Deployment
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, RegistryItem
from privreg.core.params import params_of
from privreg.core.workflow import DemoStep
from privreg.plugins.spam.citations import PSR12
from privreg.plugins.spam.deployment import SpamDeployment
from privreg.plugins.spam.workflow import demo_steps, run_spam, spam_filter


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="spam-filter",
            summary="private training and evaluation of a logistic-regression spam filter (Paillier, DGK)",
            citation=PSR12,
            factory=spam_filter,
            example=Example(
                params={
                    "bundled": True,
                    "train": 20,
                    "test": 20,
                    "space": 128,
                    "hash": "mix",
                    "max_active": 32,
                    "batch_size": 10,
                    "eta": 0.05,
                    "period": 32.0,
                    "harmonics": 11,
                    "key_bits": 256,
                    "insecure_small_keys": True,
                    "dp": "gradient",
                    "epsilon": 1.0,
                    "delta": 1e-6,
                    "private_eval": 4,
                    "workers": 1,
                }
            ),
            params=params_of(run_spam),  # spam_filter passes its options on to run_spam
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()


@hookimpl
def privreg_register_deployments() -> list[Deployment]:
    return [SpamDeployment()]
