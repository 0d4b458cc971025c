"""Hook implementations of the ``pprl`` plugin (entry point ``pprl``)."""

from __future__ import annotations

from pathlib import Path

from privreg.core.hookspecs import hookimpl
from privreg.core.items import Example, Param, RegistryItem
from privreg.core.workflow import DemoStep
from privreg.plugins.pprl.citations import TONG19
from privreg.plugins.pprl.matching import RULES
from privreg.plugins.pprl.protocol import PPRLProtocol
from privreg.plugins.pprl.workflow import DATASETS, demo_steps, pprl_workflow

_PARAMS = (
    Param(name="data", type=str, default="synthetic", choices=list(DATASETS),
          doc="synthetic (generated, no extra packages), febrl (FEBRL 4 population corrupted for --parties "
              "parties), febrl4 (its two files, 2 parties) or pseudopeople (census/SSA/W-2, 3 parties); "
              "febrl* and pseudopeople need pip install 'privreg[pprl]'"),
    Param(name="parties", type=int, default=3, minimum=3, maximum=9, doc="data parties for synthetic/febrl (3-9)"),
    Param(name="records", type=int, default=1000, minimum=10, doc="population size for synthetic/febrl"),
    Param(name="corruption", type=float, default=0.3, minimum=0, maximum=1,
          doc="fraction of each party's records with FEBRL-style edits (the paper: 0.3 and 0.75)"),
    Param(name="lsh_groups", type=int, default=3, minimum=1, doc="J: LSH groups (the paper: 3)"),
    Param(name="lsh_bits", type=int, default=20, minimum=1, doc="K: bits per LSH key (the paper: 20)"),
    Param(name="suffix_count", type=int, default=2, minimum=1, doc="x: suffix lengths lmin..lmin+x-1"),
    Param(name="lmin", type=int, default=None, minimum=0,
          doc="shortest suffix (0: no suffix blocking; default: the dispersion rule of Section 4.2.2)"),
    Param(name="window", type=int, default=None, minimum=2, doc="sliding-window size (default: the paper's)"),
    Param(name="threshold", type=int, default=3, minimum=0, doc="T: largest Hamming distance of a match"),
    Param(name="rule", type=str, default="star", choices=list(RULES),
          doc="star: the paper's verdict (encrypting party's record close to every other); all: every pair"),
    Param(name="key_bits", type=int, default=2048, minimum=128, doc="Paillier modulus bits (>= 2048 unless insecure)"),
    Param(name="insecure_small_keys", type=bool, default=False, doc="allow keys below 2048 bits (INSECURE)"),
    Param(name="secret_file", type=Path, default=None,
          doc="file holding the data parties' shared secret (>= 16 random bytes); default: a fresh one"),
    Param(name="max_block_products", type=int, default=10_000, minimum=1,
          doc="skip a final block that would yield more candidate groups than this (reported)"),
    Param(name="workers", type=int, default=None, minimum=1, doc="worker processes for Paillier batches"),
)


@hookimpl
def privreg_register_workflows() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="pprl",
            kind="workflow",
            summary="multi-party privacy-preserving record linkage: Bloom filters, double blocking, "
                    "Paillier Hamming matching (MP-SPPRL)",
            citation=TONG19,
            factory=pprl_workflow,
            example=Example(params={"data": "synthetic", "parties": 3, "records": 60, "lsh_groups": 6,
                                    "lsh_bits": 10, "key_bits": 512, "insecure_small_keys": True, "workers": 1}),
            params=_PARAMS,
            charges=False,  # a cryptographic protocol: no differentially private release
        ),
    ]


@hookimpl
def privreg_register_protocols() -> list[RegistryItem]:
    return [
        RegistryItem(
            name="mp-spprl",
            kind="protocol",
            summary="MP-SPPRL between n data parties and a linkage unit (blocking signatures, Paillier Hamming)",
            citation=TONG19,
            factory=PPRLProtocol,
            example=Example(params={"parties": 3, "key_bits": 512, "insecure_allow_small_keys": True}),
            params=(
                Param(name="parties", type=int, default=3, minimum=2, doc="number of data parties (P1..Pn)"),
                Param(name="threshold", type=int, default=3, minimum=0, doc="T: largest Hamming distance of a match"),
                Param(name="rule", type=str, default="star", choices=list(RULES),
                      doc="star (the paper's verdict) or all (every pair within T)"),
                Param(name="layout", type=str, default="slots", choices=["slots", "bits"],
                      doc="ciphertext layout of the filters (slots: many filters per ciphertext)"),
                Param(name="key_bits", type=int, default=2048, minimum=128,
                      doc="Paillier modulus bits of the linkage unit's key"),
                Param(name="insecure_allow_small_keys", type=bool, default=False,
                      doc="allow keys below 2048 bits (INSECURE; tests only)"),
            ),
        ),
    ]


@hookimpl
def privreg_demo_steps() -> list[DemoStep]:
    return demo_steps()
