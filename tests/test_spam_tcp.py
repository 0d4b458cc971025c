"""Paper 000 over the network (plugin ``spam``): the private evaluation protocol with Bob
in a child process and Carol in this one, over the TCP transport on loopback."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np

from privreg.mpc.runtime import run_protocol
from privreg.mpc.tcp import TcpTransport
from privreg.plugins.spam.corpus import bundled_corpus, labels_of, paper_split
from privreg.plugins.spam.evaluation import EvaluationConfig, PrivateEvaluation, expected_labels
from privreg.plugins.spam.features import NgramHasher
from privreg.plugins.spam.logistic import train_logistic

D = 200


def run_bob(q_in, q_out, w, count):
    """Child process: host Bob (model and key) over TCP; report his outputs' keys."""
    try:
        from crypto_keys import cached_keypair

        transport = TcpTransport(local=["bob"], recv_timeout=60.0, insecure_plaintext=True)
        q_out.put(("address", transport.address))
        transport.set_peers(q_in.get(timeout=60))
        cfg = EvaluationConfig(d=D, w_bound=1.0, workers=1)
        res = run_protocol(
            PrivateEvaluation(config=cfg, count=count, keypair=cached_keypair(512, 3), w=w, allow_insecure=True),
            transport=transport,
        )
        q_out.put(("ok", sorted(res.outputs["bob"]), res.transcript.total().ciphertexts))
    except Exception as exc:  # noqa: BLE001 -- any failure goes to the parent process
        q_out.put(("error", f"{type(exc).__name__}: {exc}"))


def test_evaluation_with_bob_in_another_process():
    tr, te = paper_split(bundled_corpus(), train=40, test=6)
    h = NgramHasher(space=D)
    w = train_logistic(h.transform(tr), labels_of(tr), eta=0.01, batch_size=8, epochs=2)
    X = h.transform(te)
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=run_bob, args=(q_in, q_out, w.tolist(), X.shape[0]))
    child.start()
    try:
        kind, addr = q_out.get(timeout=60)
        assert kind == "address", addr
        transport = TcpTransport(local=["carol"], peers={"bob": addr}, recv_timeout=60.0, insecure_plaintext=True)
        q_in.put({"carol": transport.address})
        cfg = EvaluationConfig(d=D, w_bound=1.0, workers=1)
        res = run_protocol(
            PrivateEvaluation(config=cfg, count=X.shape[0], X=X, allow_insecure=True), transport=transport
        )
        status, bob_keys, bob_cts = q_out.get(timeout=60)
        assert status == "ok", bob_keys
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    np.testing.assert_array_equal(res.outputs["carol"]["labels"], expected_labels(w, X, cfg))
    assert bob_keys == ["counts", "timings"]  # Bob's output holds no label
    assert res.transcript.total().ciphertexts == bob_cts  # both processes saw the same messages
    assert res.transcript.per_step()["eval.1.E[w]"].ciphertexts == D
