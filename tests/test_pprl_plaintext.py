"""plaintext_linkage (plugin pprl: plaintext.py; paper 004): the protocol's pipeline without
cryptography links the same groups as a small PPRLProtocol run (same lmin, same greedy
encryptor assignment), and LSH-only blocking (lmin = 0) is an upper bound on the pair
completeness of double blocking with the same J, K."""

from __future__ import annotations

import numpy as np
import pytest
from crypto_keys import cached_keypair

from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.blocking import BlockingConfig, choose_lmin
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.encoding import encode_records
from privreg.plugins.pprl.plaintext import plaintext_linkage
from privreg.plugins.pprl.protocol import LINKAGE_UNIT, PPRLProtocol
from privreg.plugins.pprl.quality import blocking_quality, linkage_quality
from privreg.plugins.pprl.schema import FEBRL_SCHEMA

SECRET = bytes(range(7, 39))  # tests only


def _records(size, parties, corruption, seed):
    pop = synthetic_population(size, rng=InsecureReproducibleRandom(seed=seed))
    data = make_parties(
        pop, parties=parties, corruption=corruption, rng=InsecureReproducibleRandom(seed=seed + 1), overlap=0.6
    )
    return {
        p: encode_records(data.frames[p], schema=FEBRL_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    }


@pytest.fixture(scope="module")
def records():
    return _records(110, 3, 0.3, 31)


def _set(links):
    return {tuple(r) for r in np.asarray(links).tolist()}


@pytest.mark.parametrize("rule", ["star", "all"])
def test_same_links_as_the_protocol(records, rule):
    proto = PPRLProtocol(
        parties=3,
        records=records,
        secret=SECRET,
        keypair=cached_keypair(512, 4),
        insecure_allow_small_keys=True,
        workers=1,
        rule=rule,
        assignment_method="greedy",
        rng=InsecureReproducibleRandom(seed=5),
    )
    lu = run_protocol(proto, transport=InMemoryTransport(keep_payloads=False)).outputs[LINKAGE_UNIT]
    plain = plaintext_linkage(records, secret=SECRET, lmin=lu["lmin"], rule=rule)
    assert plain.lmin == lu["lmin"] and plain.blocks == lu["blocks"]
    assert len(plain.groups) == lu["candidates"] > 0
    assert np.array_equal(plain.assignment.unit_party, lu["assignment"].unit_party)
    assert _set(plain.links) == _set(lu["links"]) and len(plain.links) > 10
    assert set(plain.seconds) == {"lmin", "signatures", "merge", "groups", "assignment", "matching", "total"}


def test_dispersion_lmin_is_the_all_party_rule(records):
    """With lmin=None the dispersion rule runs over all parties (as the protocol's
    dispersion step): same value as choose_lmin under the same random source."""
    cfg = BlockingConfig()
    want = choose_lmin(list(records.values()), config=cfg, secret=SECRET, rng=InsecureReproducibleRandom(seed=9))
    got = plaintext_linkage(records, secret=SECRET, rng=InsecureReproducibleRandom(seed=9))
    assert got.lmin == want.lmin
    fixed = plaintext_linkage(records, secret=SECRET, blocking=BlockingConfig(lmin=2))
    assert fixed.lmin == 2


def test_lsh_only_blocking_bounds_double_blocking():
    recs = _records(160, 3, 0.5, 41)
    entities = {p: r.entities for p, r in recs.items()}
    for lmin in (2, 4, 6):
        double = plaintext_linkage(recs, secret=SECRET, blocking=BlockingConfig(lmin=lmin))
        lsh = plaintext_linkage(recs, secret=SECRET, blocking=BlockingConfig(lmin=0))
        q_double = blocking_quality(double.groups, entities=entities)
        q_lsh = blocking_quality(lsh.groups, entities=entities)
        assert q_lsh.pair_completeness >= q_double.pair_completeness
        assert q_lsh.candidates >= q_double.candidates
        # the "all" rule links a subset of LSH-only candidates: recall at most the bound
        linked = linkage_quality(
            plaintext_linkage(recs, secret=SECRET, blocking=BlockingConfig(lmin=0), rule="all").links,
            entities=entities,
            parties=lsh.parties,
        )
        assert linked.recall <= q_lsh.pair_completeness


def test_block_guard_reports_skipped_blocks(records):
    full = plaintext_linkage(records, secret=SECRET, blocking=BlockingConfig(lmin=0, lsh_bits=6))
    cut = plaintext_linkage(records, secret=SECRET, blocking=BlockingConfig(lmin=0, lsh_bits=6), max_block_products=8)
    assert cut.skipped_blocks > 0 and full.skipped_blocks == 0
    assert len(cut.groups) < len(full.groups)


def test_arguments_are_validated(records):
    with pytest.raises(PrivregTypeError, match="records"):
        plaintext_linkage({"P1": records["P1"]}, secret=SECRET)
    with pytest.raises(PrivregValueError, match="P2"):
        plaintext_linkage({"P1": records["P1"], "X": records["P2"]}, secret=SECRET)
    with pytest.raises(PrivregValueError, match="rule"):
        plaintext_linkage(records, secret=SECRET, rule="some")
    with pytest.raises(PrivregValueError, match="assignment_method"):
        plaintext_linkage(records, secret=SECRET, assignment_method="best")
    with pytest.raises(PrivregTypeError, match="blocking"):
        plaintext_linkage(records, secret=SECRET, blocking={"lmin": 0})
