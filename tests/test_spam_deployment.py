"""Paper 000 as a deployment (``privreg party``, plugin ``spam``): the ``spam-filter``
deployment's simulated run against a direct run of SpamPipeline, Carol's labels against
the plaintext quantised model, refusals (options mismatch, wrong message count, unknown
options), and the message-size bounds of the spam protocols against measured runs.

Keys below 2048 bits are used with the explicit insecure opt-in.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from privreg.cli.main import main
from privreg.core.errors import PrivregValueError
from privreg.core.randomness import InsecureReproducibleRandom
from privreg.mpc.deployment import party_rng
from privreg.mpc.runtime import run_protocol
from privreg.mpc.transport import InMemoryTransport
from privreg.plugins.spam.corpus import bundled_corpus, labels_of, paper_split
from privreg.plugins.spam.deployment import SpamDeployment, _configs, read_messages
from privreg.plugins.spam.evaluation import EvaluationConfig, PrivateEvaluation, expected_labels
from privreg.plugins.spam.features import NgramHasher
from privreg.plugins.spam.link import PeriodicSigmoid
from privreg.plugins.spam.pipeline import SpamPipeline, evaluation_w_bound
from privreg.plugins.spam.training_config import TrainingConfig
from privreg.plugins.spam.training_protocol import PrivateTraining

SEED = 5
SMALL = {
    "key_bits": 512,
    "insecure_small_keys": "true",
    "train": 20,
    "test": 6,
    "space": 128,
    "batch_size": 8,
}


def _init(directory: Path, **extra) -> list[Path]:
    opts = {**SMALL, **extra}
    argv = ["party", "init", "spam-filter", str(directory), "--insecure-plaintext", "--seed", str(SEED)]
    for k, x in opts.items():
        argv += ["--option", f"{k}={x}"]
    assert main(argv) == 0
    return [directory / f"{p}.toml" for p in ("alice", "bob", "carol")]


def _simulate(configs: list[Path]) -> int:
    return main(["party", "simulate", *map(str, configs)])


def _direct(directory: Path, options: dict) -> tuple[SpamPipeline, dict]:
    """SpamPipeline with every party's inputs in one instance and each party's own rng."""
    training, evaluation = _configs(options)
    hasher = NgramHasher(space=options["space"], hash=options["hash"], max_active=options["max_active"])
    texts, y = read_messages(directory / "inputs/alice.jsonl", labelled=True, count=options["train"], option="train")
    etexts, _ = read_messages(directory / "inputs/carol.jsonl", labelled=False, count=options["test"], option="test")
    proto = SpamPipeline(
        training=training,
        evaluation=evaluation,
        n=options["train"],
        count=options["test"],
        key_bits=options["key_bits"],
        insecure_small_keys=options["insecure_small_keys"],
        X=hasher.transform(texts),
        y=y,
        X_eval=hasher.transform(etexts),
        rng={p: party_rng(SEED, p) for p in ("alice", "bob", "carol")},
    )
    return proto, run_protocol(proto, transport=InMemoryTransport(keep_payloads=False)).outputs


def test_simulated_run_matches_a_direct_run_and_the_plaintext_model(tmp_path, capsys):
    configs = _init(tmp_path)
    assert _simulate(configs) == 0
    out = tmp_path / "out"
    for party, names in {
        "alice": ["result.json"],
        "bob": ["model.json", "result.json"],
        "carol": ["labels.csv", "result.json"],
    }.items():
        for name in [*names, "run.json", "transcript.json"]:
            assert (out / party / name).is_file(), (party, name)
    assert not (out / "alice" / "model.json").exists() and not (out / "carol" / "model.json").exists()
    model = json.loads((out / "bob" / "model.json").read_text())
    options = SpamDeployment().options({k: (x if k != "insecure_small_keys" else True) for k, x in SMALL.items()})
    assert model["public"]["train"] == 20 and model["public"]["key_bits"] == 512
    w = np.array(model["w"])
    assert w.shape == (128,) and np.any(w != 0)

    # the same inputs and per-party random sources, all in one instance: the same model
    proto, outputs = _direct(tmp_path, options)
    np.testing.assert_array_equal(w, outputs["bob"]["w"])

    # Carol's labels are those of the quantised model, in the clear
    with (out / "carol" / "labels.csv").open() as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["message", "label"]
    labels = np.array([int(r[1]) for r in rows[1:]])
    assert [int(r[0]) for r in rows[1:]] == list(range(6))
    _, ecfg = _configs(options)
    hasher = NgramHasher(space=128, hash=options["hash"])
    etexts, ey = read_messages(out.parent / "inputs/carol.jsonl", labelled=False, count=6, option="test")
    np.testing.assert_array_equal(labels, expected_labels(w, hasher.transform(etexts), ecfg))
    np.testing.assert_array_equal(labels, outputs["carol"]["labels"])
    result = json.loads((out / "carol" / "result.json").read_text())
    assert result["accuracy"] == pytest.approx(float(np.mean(labels == ey)))
    bob = json.loads((out / "bob" / "result.json").read_text())
    assert set(bob) == {"train", "test", "training", "evaluation"}
    assert bob["training"]["operations"]["encryptions"] > 0

    # every message stayed within the protocol's bound
    view = json.loads((out / "bob" / "transcript.json").read_text())
    assert max(m["size_bytes"] for m in view["messages"]) <= proto.max_message_bytes()


def test_a_party_with_other_options_stops_the_run(tmp_path, capsys):
    configs = _init(tmp_path)
    carol = configs[2]
    text = carol.read_text()
    assert "eta = 0.01" in text
    carol.write_text(text.replace("eta = 0.01", "eta = 0.02"))
    capsys.readouterr()
    assert _simulate(configs) == 4
    err = capsys.readouterr().err
    assert "other public options" in err and "[options]" in err


def test_a_wrong_message_count_is_refused_naming_the_input(tmp_path, capsys):
    configs = _init(tmp_path)
    path = tmp_path / "inputs" / "alice.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    capsys.readouterr()
    assert _simulate(configs) == 2
    err = capsys.readouterr().err
    assert "inputs.messages" in err and "19 messages" in err and "options.train = 20" in err


def test_unknown_and_bad_options_are_refused():
    dep = SpamDeployment()
    with pytest.raises(PrivregValueError, match=r"unknown option.*'dp'.*train, test, space"):
        dep.options({"dp": "gradient"})
    with pytest.raises(PrivregValueError, match="insecure_small_keys"):
        dep.options({"key_bits": 512})
    with pytest.raises(PrivregValueError, match="period"):
        dep.options({"period": 24.0, "key_bits": 512, "insecure_small_keys": True})
    with pytest.raises(PrivregValueError, match="key_bits = 128 is too small"):
        dep.options({"key_bits": 128, "insecure_small_keys": True, "sigma": 80})
    opts = dep.options({})
    assert opts["key_bits"] == 2048 and opts["train"] == 40 and opts["test"] == 20
    assert dep.parties(opts) == ("alice", "bob", "carol") and dep.inputs("bob", opts) == {}


def test_message_files_are_checked_without_quoting_them(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"label": "SECRET-LABEL", "text": "hello"}) + "\n")
    with pytest.raises(PrivregValueError, match="line 1") as info:
        read_messages(path, labelled=True, count=1, option="train")
    assert "SECRET" not in str(info.value)
    path.write_text(json.dumps({"text": "SECRET-TEXT"}) + "\n" + "not json SECRET\n")
    with pytest.raises(PrivregValueError, match="line 2") as info:
        read_messages(path, labelled=False, count=2, option="test")
    assert "SECRET" not in str(info.value)
    path.write_text(json.dumps({"text": "a"}) + "\n" + json.dumps({"text": "b", "label": "ham"}) + "\n")
    with pytest.raises(PrivregValueError, match="every line or on none"):
        read_messages(path, labelled=False, count=2, option="test")
    path.write_text(json.dumps({"text": "a"}) + "\n")
    with pytest.raises(PrivregValueError, match='no "label"'):
        read_messages(path, labelled=True, count=1, option="train")
    texts, y = read_messages(path, labelled=False, count=1, option="test")
    assert texts == [b"a"] and y is None


def test_example_files_hold_the_counts_and_both_classes(tmp_path):
    dep = SpamDeployment()
    opts = dep.options({"train": 30, "test": 10})
    files = dep.example(tmp_path, options=opts, seed=1)
    assert set(files) == {"alice", "bob", "carol"} and files["bob"] == {}
    _, y = read_messages(files["alice"]["messages"], labelled=True, count=30, option="train")
    assert set(y.tolist()) == {-1, 1}
    _, yc = read_messages(files["carol"]["messages"], labelled=False, count=10, option="test")
    assert yc is not None and set(yc.tolist()) == {-1, 1}
    with pytest.raises(PrivregValueError, match="exceeds the 80 bundled"):
        dep.example(tmp_path / "big", options=dep.options({"train": 70, "test": 20}), seed=1)


# ------------------------------------------------------------------ the protocol


def _pipeline(*, train, test, space, max_active, K, harmonics, key_bits, reveal="final", sigma=40, seed=0):
    tr, te = paper_split(bundled_corpus(), train=train, test=test)
    h = NgramHasher(space=space, hash="mix", max_active=max_active)
    cfg = TrainingConfig(
        d=space,
        eta=0.01,
        batch_size=K,
        link=PeriodicSigmoid(period=32.0, max_harmonic=harmonics),
        reveal=reveal,
        sigma=sigma,
        l1_bound=max_active,
        workers=1,
    )
    ecfg = EvaluationConfig(
        d=space, w_bound=evaluation_w_bound(cfg.plan(train)), l1_bound=max_active, sigma=sigma, workers=1
    )
    return SpamPipeline(
        training=cfg,
        evaluation=ecfg,
        n=train,
        count=test,
        key_bits=key_bits,
        insecure_small_keys=True,
        X=h.transform(tr),
        y=labels_of(tr),
        X_eval=h.transform(te),
        y_eval=labels_of(te),
        rng={p: InsecureReproducibleRandom(seed=seed + i) for i, p in enumerate(("alice", "bob", "carol"))},
    )


SIZES = [
    dict(train=20, test=6, space=256, max_active=64, K=10, harmonics=11, key_bits=512),
    dict(train=16, test=4, space=64, max_active=32, K=16, harmonics=19, key_bits=512, reveal="every-batch"),
    dict(train=10, test=3, space=32, max_active=16, K=5, harmonics=11, key_bits=512, sigma=80),
    dict(train=30, test=12, space=64, max_active=None, K=7, harmonics=11, key_bits=768),
]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"d{s['space']}-K{s['K']}-kb{s['key_bits']}")
def test_messages_stay_within_the_bounds_and_the_bounds_are_tight(size):
    proto = _pipeline(**size)
    res = run_protocol(proto, transport=InMemoryTransport(keep_payloads=False))
    largest: dict[str, int] = defaultdict(int)
    for m in res.transcript.messages:
        largest[m.step] = max(largest[m.step], m.size_bytes)
    train_max = max(x for s, x in largest.items() if not s.startswith("eval."))
    eval_max = max(x for s, x in largest.items() if s.startswith("eval."))
    train_bound = PrivateTraining.max_message_bytes(proto._train)
    eval_bound = PrivateEvaluation.max_message_bytes(proto._eval)
    assert train_bound is not None and eval_bound is not None
    assert train_max <= train_bound <= 4 * train_max
    assert eval_max <= eval_bound <= 4 * eval_max
    assert proto.max_message_bytes() == max(train_bound, eval_bound, 4096)
    # per message kind (issue #31): each kind's bound holds it, and is not much larger
    for m in res.transcript.messages:
        bound = proto.message_bound(sender=m.sender, receiver=m.receiver, step=m.step)
        assert m.size_bytes <= bound <= proto.max_message_bytes()
        if m.size_bytes == largest[m.step]:
            assert bound <= 4 * m.size_bytes + 4096, (m.step, m.size_bytes, bound)
    assert proto.message_bound(sender="carol", receiver="bob", step="eval.1.E[w]") == 0  # never sent that way
    # the sub-protocols' steps are told apart by name
    steps = set(largest)
    assert {s for s in steps if s.startswith("eval.")} and {s for s in steps if not s.startswith("eval.")}
    assert "accuracy" in res.outputs["carol"] and "w" in res.outputs["bob"] and "w" not in res.outputs["carol"]


@pytest.mark.slow
def test_bounds_hold_with_a_2048_bit_key():
    proto = _pipeline(train=20, test=4, space=128, max_active=64, K=10, harmonics=11, key_bits=2048)
    res = run_protocol(proto, transport=InMemoryTransport(keep_payloads=False))
    largest = max(m.size_bytes for m in res.transcript.messages)
    assert largest <= proto.max_message_bytes() <= 4 * largest


def test_pipeline_documents_every_party_and_its_limits():
    proto = _pipeline(train=10, test=2, space=32, max_active=16, K=5, harmonics=11, key_bits=512)
    learns = proto.learns()
    assert set(learns) == {"alice", "bob", "carol"}
    assert "In evaluation" in learns["bob"] and "label" in learns["carol"]
    for cav in (SpamPipeline.caveats, PrivateTraining.caveats, PrivateEvaluation.caveats):
        assert "mutual TLS" in cav and "Malicious" in cav
    assert "arbitrary labels" in SpamPipeline.caveats and "poison" in SpamPipeline.caveats


def test_a_key_of_another_size_is_refused():
    from crypto_keys import cached_keypair

    from privreg.core.errors import ProtocolError

    tr, _ = paper_split(bundled_corpus(), train=10, test=2)
    proto = PrivateTraining(
        config=TrainingConfig(d=32, batch_size=5, workers=1),
        n=10,
        keypair=cached_keypair(512, 1),
        X=NgramHasher(space=32).transform(tr),
        y=labels_of(tr),
        allow_insecure=True,
        key_bits=512,
    )
    assert proto.max_message_bytes() is not None
    proto.keypair = cached_keypair(768, 1)  # Bob deviates from the public key_bits
    with pytest.raises(ProtocolError, match=r"768-bit key.*key_bits is 512"):
        run_protocol(proto)


@pytest.mark.slow
def test_a_seeded_run_with_the_default_2048_bit_key(tmp_path):
    """A seeded Bob's key is marked insecure (seeded); seeded Alice and Carol accept it,
    since its size is the public 2048 bits."""
    argv = ["party", "init", "spam-filter", str(tmp_path), "--insecure-plaintext", "--seed", str(SEED)]
    for k, x in {"train": 10, "test": 2, "space": 64, "epochs": 1}.items():
        argv += ["--option", f"{k}={x}"]
    assert main(argv) == 0
    assert _simulate([tmp_path / f"{p}.toml" for p in ("alice", "bob", "carol")]) == 0
    assert json.loads((tmp_path / "out/bob/model.json").read_text())["public"]["key_bits"] == 2048
