"""Cached Paillier test keys (seeded, below 2048 bits: explicitly insecure, tests only)."""

from functools import cache

from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto import generate_paillier_keypair


@cache
def cached_keypair(bits: int = 512, seed: int = 0):
    """A reproducible key pair; generation opts in to small keys and a seeded source."""
    return generate_paillier_keypair(
        n_bits=bits, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=seed)
    )


@cache
def cached_dgk_keypair(bits: int = 512, seed: int = 5):
    """A reproducible DGK key pair (t = 40, 16-bit comparisons: the linkage tests' key)."""
    from privreg.crypto.dgk import generate_dgk_keypair

    return generate_dgk_keypair(
        n_bits=bits, t=40, comparison_bits=16, insecure_allow_small_keys=True, rng=InsecureReproducibleRandom(seed=seed)
    )
