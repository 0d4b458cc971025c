"""Hook implementations of the ``pprl`` plugin (entry point ``pprl``)."""

from __future__ import annotations

from privreg.core.deployment import Deployment
from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, RegistryItem
from privreg.core.workflow import DemoStep
from privreg.plugins.pprl.citations import TONG19
from privreg.plugins.pprl.deployment import PPRLDeployment
from privreg.plugins.pprl.dice_deployment import DiceDeployment
from privreg.plugins.pprl.dice_protocol import DiceLinkageProtocol
from privreg.plugins.pprl.protocol import PPRLProtocol
from privreg.plugins.pprl.workflow import demo_steps, pprl_workflow


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="pprl",
            summary="multi-party record linkage: CLKs and secure Dice decisions, or MP-SPPRL (--profile paper)",
            citation=TONG19,
            factory=pprl_workflow,
            example=Example(
                params={
                    "data": "synthetic",
                    "parties": 3,
                    "records": 60,
                    "key_bits": 512,
                    "insecure_small_keys": True,
                    "workers": 1,
                }
            ),
            charges=False,  # a cryptographic protocol: no differentially private release
        ),
    ]


@hookimpl
def privreg_register_protocols() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="mp-spprl",
            summary="MP-SPPRL between n data parties and a linkage unit (blocking signatures, Paillier Hamming)",
            citation=TONG19,
            factory=PPRLProtocol,
            example=Example(params={"parties": 3, "key_bits": 512, "insecure_allow_small_keys": True}),
        ),
        RegistryItem(
            name="clk-dice",
            summary="n parties' CLKs linked by secure Dice threshold decisions; the linkage unit learns only those",
            citation=TONG19,
            factory=DiceLinkageProtocol,
            example=Example(params={"parties": 3, "key_bits": 512, "insecure_allow_small_keys": True}),
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()


@hookimpl
def privreg_register_deployments() -> list[Deployment]:
    return [PPRLDeployment(), DiceDeployment()]
