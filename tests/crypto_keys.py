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
