"""``privreg party`` for paper 000: Alice, Bob and Carol of the spam filter, each in its
own process (:class:`~privreg.plugins.spam.pipeline.SpamPipeline`).

Inputs: Alice ``messages``, a JSONL file of her labelled training messages, one
``{"label": "spam" | "ham", "text": "..."}`` per line; Carol ``messages``, a JSONL file
of the messages to classify, one ``{"text": "..."}`` per line (a ``label`` on every line is
allowed and used only to report Carol's own accuracy, locally); Bob none (he generates his
key pair when his role starts). Each party turns its own texts (UTF-8, first 35 KB) into
features with the public hasher ``NgramHasher(space, hash, max_active)``; the numbers of
messages are public options (``train``, ``test``) and a file with another count is refused.

Outputs: Bob ``model.json`` (the weights ``w`` and the public configuration) and
``result.json`` (timings per step, operation counts); Alice ``result.json``; Carol
``labels.csv`` (message index, label +1 spam / -1 ham) and ``result.json`` (timings, and
her accuracy when her file has labels). Each writes only what it learns by
:meth:`SpamPipeline.learns`.

Not in party mode: dimensionality reduction (the reductions of Section 6.4 are fitted on
data or need a public seed this format does not carry) and differential privacy (DP
charges a budget session, which a party process does not hold); use the ``spam-filter``
workflow for both. The evaluation's weight bound is derived from the public training plan
(:func:`~privreg.plugins.spam.pipeline.evaluation_w_bound`), identically at Bob and Carol.

Message bounds: the run's sizes (``train``, ``test``, ``space``, ``max_active``,
``batch_size``, ``harmonics``, ``key_bits``) are options, so in the options digest every
party checks before the protocol starts; each message kind is bounded from them
(:meth:`SpamPipeline.message_bound`, formulas in
:mod:`~privreg.plugins.spam.message_size`), and over TCP a peer's frame above its kind's
bound is refused from its header: a peer can make a party allocate no more than the
largest legitimate message of that kind.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from privreg.core.deployment import Deployment
from privreg.core.errors import PrivregTypeError, PrivregValueError
from privreg.core.files import atomic_write, write_text
from privreg.core.params import Spec, check_params
from privreg.core.protocol import Protocol
from privreg.core.randomness import InsecureReproducibleRandom, RandomSource
from privreg.crypto import MIN_KEY_BITS
from privreg.crypto.keys import MIN_INSECURE_KEY_BITS
from privreg.plugins.spam.corpus import bundled_corpus
from privreg.plugins.spam.evaluation import EvaluationConfig
from privreg.plugins.spam.features import HASHES, NgramHasher
from privreg.plugins.spam.link import PeriodicSigmoid
from privreg.plugins.spam.pipeline import SpamPipeline, evaluation_w_bound
from privreg.plugins.spam.training_config import REVEALS, TrainingConfig
from privreg.readers import jsonl_objects

__all__ = ["SpamDeployment", "read_messages"]

ALICE, BOB, CAROL = "alice", "bob", "carol"
LABELS = {"spam": 1, "ham": -1}
OPTION_NAMES = (
    "train",
    "test",
    "space",
    "hash",
    "max_active",
    "batch_size",
    "eta",
    "lam",
    "epochs",
    "period",
    "harmonics",
    "reveal",
    "key_bits",
    "insecure_small_keys",
    "sigma",
    "eval_weight_bits",
)


@check_params
def _options(
    *,
    train: Annotated[int, Spec(minimum=1, doc="n: Alice's training messages (public)")] = 40,
    test: Annotated[int, Spec(minimum=1, doc="Carol's messages to classify (public)")] = 20,
    space: Annotated[int, Spec(minimum=2, doc="d: hash space of the character 4-grams")] = 256,
    hash: Annotated[
        str, Spec(choices=list(HASHES), doc="modulo (the paper) or mix (a public 64-bit mixing)")
    ] = "modulo",
    max_active: Annotated[
        int | None, Spec(minimum=1, doc="at most this many features per message (public bound)")
    ] = None,
    batch_size: Annotated[int, Spec(minimum=1, doc="K: messages per training batch")] = 10,
    eta: Annotated[float, Spec(minimum=0, exclusive_minimum=True, maximum=0.5, doc="step size (batch sums)")] = 0.01,
    lam: Annotated[float, Spec(minimum=0, doc="L2 regularisation lambda")] = 0.0,
    epochs: Annotated[int, Spec(minimum=1, doc="passes over the training data")] = 2,
    period: Annotated[float, Spec(minimum=4, doc="period P of the sigmoid approximation (a power of two)")] = 32.0,
    harmonics: Annotated[int, Spec(minimum=1, doc="highest odd harmonic of the approximation")] = 11,
    reveal: Annotated[str, Spec(choices=list(REVEALS), doc="final (Bob learns only w) or every-batch")] = "final",
    key_bits: Annotated[int, Spec(minimum=MIN_INSECURE_KEY_BITS, doc="Paillier modulus bits")] = MIN_KEY_BITS,
    insecure_small_keys: Annotated[bool, Spec(doc="allow keys below 2048 bits (INSECURE; tests only)")] = False,
    sigma: Annotated[int, Spec(minimum=20, maximum=128, doc="statistical security parameter")] = 40,
    eval_weight_bits: Annotated[int, Spec(minimum=0, maximum=32, doc="fractional bits of w in the evaluation")] = 8,
) -> dict[str, Any]:
    if key_bits < MIN_KEY_BITS and not insecure_small_keys:
        raise PrivregValueError(
            f"options.key_bits = {key_bits} is below {MIN_KEY_BITS}; set insecure_small_keys = true for tests only."
        )
    return {
        "train": train,
        "test": test,
        "space": space,
        "hash": hash,
        "max_active": max_active,
        "batch_size": batch_size,
        "eta": eta,
        "lam": lam,
        "epochs": epochs,
        "period": period,
        "harmonics": harmonics,
        "reveal": reveal,
        "key_bits": key_bits,
        "insecure_small_keys": insecure_small_keys,
        "sigma": sigma,
        "eval_weight_bits": eval_weight_bits,
    }


def _configs(options: Mapping[str, Any]) -> tuple[TrainingConfig, EvaluationConfig]:
    """Both protocols' public configurations, from the options alone (as every party)."""
    d, l1 = options["space"], options["max_active"]
    if l1 is not None and l1 > d:
        l1 = d  # at most d binary features are active
    training = TrainingConfig(
        d=d,
        eta=options["eta"],
        lam=options["lam"],
        batch_size=options["batch_size"],
        epochs=options["epochs"],
        link=PeriodicSigmoid(period=options["period"], max_harmonic=options["harmonics"]),
        reveal=options["reveal"],
        sigma=options["sigma"],
        l1_bound=l1,
        workers=1,
    )
    evaluation = EvaluationConfig(
        d=d,
        w_bound=evaluation_w_bound(training.plan(options["train"])),
        weight_bits=options["eval_weight_bits"],
        l1_bound=l1,
        sigma=options["sigma"],
        workers=1,
    )
    return training, evaluation


def _check_fits(options: Mapping[str, Any], training: TrainingConfig, evaluation: EvaluationConfig) -> None:
    """The largest masked plaintexts must fit the key (else the run would fail midway)."""
    plan = training.plan(options["train"])
    grad = plan.g_bound + (2**plan.gmask_bits if training.reveal == "final" else 0)
    cmp_bound = evaluation.u_bound + 2**evaluation.bits + 2 ** (evaluation.bits + 1 + evaluation.sigma)
    need = max(plan.u_bound + 2**plan.mask_bits, grad, cmp_bound, plan.share_bound)
    bits = (2 * need).bit_length()
    if bits > options["key_bits"] - 3:
        raise PrivregValueError(
            f"options.key_bits = {options['key_bits']} is too small for these options: masked values need "
            f"{bits} bits of the key's plaintext range; raise key_bits or lower sigma, space or max_active."
        )


def read_messages(path: Path, *, labelled: bool, count: int, option: str) -> tuple[list[bytes], np.ndarray | None]:
    """The texts (UTF-8 bytes) of a JSONL messages file and their labels (+1 spam, -1 ham):
    required when ``labelled``, else read only if every line has one. Read line by line by
    :func:`privreg.readers.jsonl_objects`. Errors name the file, the line and the fix,
    never a message's content."""
    if not path.is_file():
        raise PrivregValueError(f"inputs.messages: no file at {path}.")
    texts: list[bytes] = []
    labels: list[int | None] = []
    for no, obj in jsonl_objects(path, what="inputs.messages", line_numbers=True):
        if not isinstance(obj.get("text"), str):
            raise PrivregValueError(
                f'inputs.messages: line {no} of {path} is not a JSON object with a string "text"; write one '
                f'{{"text": ...}} object per line.'
            )
        label = obj.get("label")
        if label is not None and label not in LABELS:
            raise PrivregValueError(
                f'inputs.messages: line {no} of {path} has a "label" other than "spam" or "ham"; fix that line.'
            )
        if labelled and label is None:
            raise PrivregValueError(
                f'inputs.messages: line {no} of {path} has no "label"; every training message needs "spam" or "ham".'
            )
        texts.append(obj["text"].encode("utf-8"))
        labels.append(None if label is None else LABELS[label])
    if len(texts) != count:
        raise PrivregValueError(
            f"inputs.messages: {path} holds {len(texts)} messages but options.{option} = {count}; give the file "
            f"{count} messages, or set {option} = {len(texts)} at every party."
        )
    given = [x for x in labels if x is not None]
    if given and len(given) != len(labels):
        raise PrivregValueError(
            f'inputs.messages: {path} gives a "label" on {len(given)} of {len(labels)} lines; give it on every line '
            f"or on none."
        )
    return texts, (np.array(given, dtype=np.int64) if given else None)


def _timings(timer: Any) -> dict[str, dict[str, float]]:
    return {"wall": dict(timer.wall), "cpu": dict(timer.cpu)}


def _part(out: Mapping[str, Any]) -> dict[str, Any]:
    return {"seconds": _timings(out["timings"]), "operations": out["counts"].as_dict()}


def _write_json(path: Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2) + "\n", "party output")


class SpamDeployment(Deployment):
    """Paper 000 (private spam filtering): Alice, Bob and Carol as separate processes."""

    name = "spam-filter"
    summary = "private spam-filter training and evaluation: alice (training JSONL), bob (key, model), carol (JSONL)"

    def options(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(raw, Mapping):
            raise PrivregTypeError(f"[options] must be a table; got a {type(raw).__name__}.")
        unknown = sorted(set(raw) - set(OPTION_NAMES))
        if unknown:
            raise PrivregValueError(
                f"[options]: unknown option(s) {unknown}; the options of spam-filter are: {', '.join(OPTION_NAMES)} "
                f"(no reduction and no DP in party mode: use the spam-filter workflow for those)."
            )
        options = _options(**raw)
        _check_fits(options, *_configs(options))
        return options

    def parties(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        return (ALICE, BOB, CAROL)

    def inputs(self, party: str, options: Mapping[str, Any]) -> Mapping[str, str]:
        if party == ALICE:
            return {
                "messages": f'JSONL of {options["train"]} training messages: {{"label": "spam"|"ham", "text": ...}}'
            }
        if party == CAROL:
            return {"messages": f'JSONL of {options["test"]} messages to classify: {{"text": ...}} (label optional)'}
        return {}

    def protocol(
        self, *, party: str, inputs: Mapping[str, Path], options: Mapping[str, Any], rng: RandomSource
    ) -> Protocol:
        training, evaluation = _configs(options)
        hasher = NgramHasher(space=options["space"], hash=options["hash"], max_active=options["max_active"])
        mine: dict[str, Any] = {}
        if party == ALICE:
            texts, y = read_messages(Path(inputs["messages"]), labelled=True, count=options["train"], option="train")
            mine = {"X": hasher.transform(texts), "y": y}
        elif party == CAROL:
            texts, y = read_messages(Path(inputs["messages"]), labelled=False, count=options["test"], option="test")
            mine = {"X_eval": hasher.transform(texts), "y_eval": y}
        public = {
            **options,
            "features": training.d,
            "eta_effective": training.eta_effective,
            "lam_effective": training.lam_effective,
            "evaluation_w_bound": evaluation.w_bound,
            "comparison_bits": evaluation.bits,
        }
        return SpamPipeline(
            training=training,
            evaluation=evaluation,
            n=options["train"],
            count=options["test"],
            key_bits=options["key_bits"],
            insecure_small_keys=options["insecure_small_keys"],
            rng=rng,
            public=public,
            **mine,
        )

    def write_outputs(self, *, party: str, output: Any, directory: Path) -> dict[str, Path]:
        public = output["public"]
        result = directory / "result.json"
        if party == BOB:
            model = _write_json(
                directory / "model.json",
                {"w": [float(x) for x in np.asarray(output["w"])], "public": public},
            )
            _write_json(
                result,
                {
                    "train": public["train"],
                    "test": public["test"],
                    "training": _part(output["training"]),
                    "evaluation": _part(output["evaluation"]),
                },
            )
            return {"model": model, "result": result}
        if party == ALICE:
            _write_json(result, {"train": public["train"], "training": _part(output["training"])})
            return {"result": result}
        labels = directory / "labels.csv"
        with atomic_write(labels, "party output", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["message", "label"])
            w.writerows((i, int(x)) for i, x in enumerate(output["labels"]))
        summary: dict[str, Any] = {
            "test": public["test"],
            "spam": int(np.sum(np.asarray(output["labels"]) == 1)),
            "evaluation": _part(output["evaluation"]),
        }
        if "accuracy" in output:
            summary["accuracy"] = output["accuracy"]
        _write_json(result, summary)
        return {"labels": labels, "result": result}

    def score(
        self, *, outputs: Mapping[str, Path], truth: Path, options: Mapping[str, Any]
    ) -> list[tuple[str, float | int]]:
        """Carol's ``labels.csv`` against the true labels: ``truth`` is her messages file
        with a ``"label"`` on every line (the example ``carol.jsonl`` has them). Accuracy,
        and precision and recall of the spam class; no AUC, since Carol learns labels,
        not scores."""
        from privreg.plugins.spam.scoring import score_labels

        if CAROL not in outputs:
            raise PrivregValueError(
                f"spam-filter is scored on {CAROL}'s labels.csv; add {CAROL}'s configuration to privreg party score."
            )
        return score_labels(outputs[CAROL] / "labels.csv", truth, count=options["test"])

    def example(self, directory: Path, *, options: Mapping[str, Any], seed: int) -> dict[str, dict[str, Path]]:
        """``alice.jsonl`` (``train`` labelled messages) and ``carol.jsonl`` (``test``
        messages, labelled so that Carol's result reports her accuracy) drawn with ``seed``
        from the bundled SpamAssassin slice (80 messages, 32 spam: ``train + test <= 80``),
        each file with about the slice's share of spam. Texts are the raw messages decoded
        as UTF-8 (invalid bytes replaced)."""
        msgs = bundled_corpus()
        n_train, n_test = options["train"], options["test"]
        if n_train + n_test > len(msgs):
            raise PrivregValueError(
                f"options.train + options.test = {n_train + n_test} exceeds the {len(msgs)} bundled messages; "
                f"lower train or test for the example, or write the input files yourself."
            )
        rng = InsecureReproducibleRandom(seed=seed)
        spam = _shuffled([m for m in msgs if m.label == 1], rng)
        ham = _shuffled([m for m in msgs if m.label != 1], rng)
        spam_train = min(len(spam), round(n_train * len(spam) / len(msgs)))
        spam_test = min(len(spam) - spam_train, round(n_test * len(spam) / len(msgs)))
        spam_test = max(spam_test, n_test - (len(ham) - (n_train - spam_train)))  # enough ham left
        parts = {
            ALICE: _shuffled(spam[:spam_train] + ham[: n_train - spam_train], rng),
            CAROL: _shuffled(
                spam[spam_train : spam_train + spam_test]
                + ham[n_train - spam_train : n_train - spam_train + n_test - spam_test],
                rng,
            ),
        }
        directory.mkdir(parents=True, exist_ok=True)
        out: dict[str, dict[str, Path]] = {BOB: {}}
        for party, chosen in parts.items():
            path = directory / f"{party}.jsonl"
            with atomic_write(path, "example input") as fh:
                for m in chosen:
                    label = "spam" if m.label == 1 else "ham"
                    fh.write(json.dumps({"label": label, "text": m.raw.decode("utf-8", errors="replace")}) + "\n")
            out[party] = {"messages": path}
        return out


def _shuffled(items: list[Any], rng: RandomSource) -> list[Any]:
    """A uniformly random permutation of ``items`` (Fisher-Yates with ``rng``)."""
    out = list(items)
    for i in range(len(out) - 1, 0, -1):
        j = rng.randbelow(i + 1)
        out[i], out[j] = out[j], out[i]
    return out
