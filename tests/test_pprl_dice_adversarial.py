"""Adversarial checks of the recommended record-linkage protocol (dice_protocol.py):
careless inputs, hostile messages and what the parties learn beyond their claims."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from crypto_keys import cached_dgk_keypair, cached_keypair

from privreg.core.errors import ProtocolError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.crypto.channel import RoleParty
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.pprl.bands import BandConfig
from privreg.plugins.pprl.clk import FEBRL_CLK_SCHEMA, dice, encode_clks
from privreg.plugins.pprl.datasets import ENTITY, make_parties, synthetic_population
from privreg.plugins.pprl.dice_protocol import LINKAGE_UNIT, DiceLinkageProtocol

SECRET = bytes(range(7, 39))  # tests only
BANDS = BandConfig(bands=40, bits=12, min_shared=2)


@pytest.fixture(scope="module")
def keys():
    kp = cached_keypair(512, 4)
    dk = cached_dgk_keypair()
    return kp, dk


@pytest.fixture(scope="module")
def records():
    pop = synthetic_population(30, rng=InsecureReproducibleRandom(seed=31))
    data = make_parties(pop, parties=3, corruption=0.4, rng=InsecureReproducibleRandom(seed=32), overlap=0.7)
    return {
        p: encode_clks(data.frames[p], schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=p, entity_column=ENTITY)
        for p in data.parties
    }


def encode(party, rows):
    cols = list(FEBRL_CLK_SCHEMA.columns)
    frame = pd.DataFrame([{c: r.get(c, "") for c in cols} for r in rows], columns=cols)
    return encode_clks(frame, schema=FEBRL_CLK_SCHEMA, secret=SECRET, party=party)


class _Tap:
    """A channel that passes every outgoing payload through ``fn(sender, to, step, payload)``."""

    def __init__(self, ch, fn):
        self._ch, self._fn = ch, fn
        self.party, self.parties = ch.party, ch.parties

    async def send(self, to, payload, *, step):
        await self._ch.send(to, self._fn(self.party, to, step, payload), step=step)

    async def recv(self, frm, *, step=None):
        return await self._ch.recv(frm, step=step)


class _Tampered(DiceLinkageProtocol):
    def parties(self):
        return [RoleParty(p.name, lambda ch, p=p: p.run(_Tap(ch, self.tamper))) for p in super().parties()]


def protocol(records, keys, tamper=None, **kw):
    kp, dk = keys
    kw.setdefault("rng", InsecureReproducibleRandom(seed=1))
    kw.setdefault("bands", BANDS)
    cls = DiceLinkageProtocol if tamper is None else _Tampered
    proto = cls(
        parties=tuple(records),
        records=records,
        secret=SECRET,
        keypair=kp,
        dgk_keypair=dk,
        insecure_allow_small_keys=True,
        workers=1,
        **kw,
    )
    proto.tamper = tamper
    return proto


def run(records, keys, tamper=None, **kw):
    return run_protocol(protocol(records, keys, tamper, **kw), transport=InMemoryTransport(keep_payloads=True))


def _on(sender, step, fn, to=None):
    def tamper(frm, dst, st, payload):
        if frm == sender and st == step and (to is None or dst == to):
            return fn(copy.deepcopy(payload))
        return payload

    return tamper


# ------------------------------------------------------------------ careless inputs


def test_records_with_every_field_missing_are_not_linked(keys):
    # dice() of two empty filters is 0; the secure decision said 0/0 >= 0.75
    recs = {
        "P1": encode("P1", [{}, {"surname": "smith", "given_name": "john"}]),
        "P2": encode("P2", [{}, {"surname": "jones", "given_name": "mary"}]),
    }
    assert dice(recs["P1"].match_filters[:1], recs["P2"].match_filters[:1])[0] == 0.0
    out = run(recs, keys)
    # the empty CLKs got random band tokens: not even a candidate pair (the full records differ)
    assert out.outputs[LINKAGE_UNIT]["candidate_count"] == 0
    assert out.outputs[LINKAGE_UNIT]["groups"] == []
    # an empty record against a full one stays below every level too
    recs["P2"] = encode("P2", [{"surname": "smith", "given_name": "john"}, {}])
    out = run(recs, keys, levels=(0.8, 0.95))
    assert out.outputs[LINKAGE_UNIT]["groups"] == [[("P1", 1), ("P2", 0)]]


# ------------------------------------------------------------------ a hostile linkage unit


def test_a_deal_with_swapped_roles_is_refused_naming_the_linkage_unit(keys):
    # equal record counts, so the pairs stay in range: without a role check both parties
    # of the pair would wait for each other's shares forever (a DeadlockError in memory,
    # a hang over a network)
    same = [{"surname": "smith", "given_name": "john"}, {"surname": "smyth", "given_name": "jon"}]
    recs = {"P1": encode("P1", same), "P2": encode("P2", same)}

    def swap(deals):
        for d in deals:
            d["role"] = "right" if d["role"] == "left" else "left"
        return deals

    with pytest.raises(ProtocolError, match=r"'linkage_unit'.*role") as err:
        run(recs, keys, _on(LINKAGE_UNIT, "deal", swap))
    assert "deadlock" not in str(err.value)


@pytest.mark.parametrize(
    "bad",
    [
        lambda r: r.astype(float) + 0.5,
        lambda r: np.ones((2, 2), dtype=bool),
    ],
    ids=["float", "bool"],
)
def test_a_result_that_is_not_integer_indices_is_refused(records, keys, bad):
    with pytest.raises(ProtocolError, match="'linkage_unit' sent a malformed result"):
        run(records, keys, _on(LINKAGE_UNIT, "result", bad, to="P1"))


# ------------------------------------------------------------------ what a data party learns


def test_group_ids_do_not_reveal_the_other_parties_groups(records, keys):
    # ids were positions in the groups sorted by first member: P2 learned how many groups
    # there are and, since the groups with a P1 record come first, which of its own groups
    # hold a record of P1
    out = run(records, keys)
    groups = out.outputs[LINKAGE_UNIT]["group_indices"]
    links = out.outputs["P2"]["links"]
    gid = dict(zip(links[:, 1].tolist(), links[:, 0].tolist()))
    with_p1 = [gid[r] for g in groups for q, r in g if q == 1 and any(x == 0 for x, _ in g)]
    without = [gid[r] for g in groups for q, r in g if q == 1 and all(x != 0 for x, _ in g)]
    assert with_p1 and without
    assert not max(with_p1) < min(without)
    assert max(links[:, 0]) >= len(groups)  # no bound on the number of groups
    assert list(links[:, 1]) == sorted(links[:, 1])  # and no order of the groups


def test_learns_names_what_refine_and_popcount_messages_tell_the_parties(keys):
    # the "refine" message lists, per peer, the candidate pairs accepted at the threshold
    # that lie in a conflicting cluster: a data party learns those decisions (and the
    # conflict); with bands=None it learns the other parties' median popcounts, and the
    # linkage unit learns the number of bands, a function of the largest one
    same = [{"surname": "smith", "given_name": "john", "date_of_birth": "19800101"}]
    recs = {"P1": encode("P1", same * 2), "P2": encode("P2", same)}
    out = run(recs, keys, bands=None)
    got = [m for m in out.transcript.received_by("P2") if m.step == "refine"]
    assert [r.tolist() for r in got[0].payload] == [[0, 1]]  # both pairs: accepted, in conflict
    assert any(m.step == "popcount" for m in out.transcript.received_by("P2"))
    proto = protocol(recs, keys, blocking="linkage-unit")  # the number of bands: only its tokens show it
    learns = proto.learns()
    assert "accepted" in learns["P2"] and "median popcount" in learns["P2"]
    assert "number of bands" in learns[LINKAGE_UNIT]
