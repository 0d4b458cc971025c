"""Paper 000 end to end as one protocol of three parties: Alice trains Bob's model
(:class:`~privreg.plugins.spam.training_protocol.PrivateTraining`), then Carol's messages
are classified with it (:class:`~privreg.plugins.spam.evaluation.PrivateEvaluation`).

Roles: ``alice`` plays the training's data role; ``bob`` generates his Paillier key pair
from his own random source at the start of his role (only his party ever holds it), plays
the training's model role and then the evaluation's with the weights he just trained and
the same key; ``carol`` plays the evaluation's data role (her first receive waits for Bob's
first evaluation message, i.e. until training is over: over a network her receive timeout
must cover the whole training). The sub-protocols' step names are distinct (the
evaluation's all start with ``eval.``), so a transcript tells them apart.

The evaluation's public weight bound comes from the training plan only
(:func:`evaluation_w_bound`), so Bob and Carol derive the same comparison length from
public values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from privreg.core import validation as v
from privreg.core.errors import PrivregTypeError, PrivregValueError, ProtocolError
from privreg.core.protocol import Channel, Party, Protocol
from privreg.core.randomness import RandomSource, resolve_random
from privreg.crypto import MIN_KEY_BITS, PaillierKeypair, generate_paillier_keypair
from privreg.crypto.channel import RoleParty, insecure_key_allowed
from privreg.plugins.spam.evaluation import EvaluationConfig, PrivateEvaluation
from privreg.plugins.spam.logistic import check_labels
from privreg.plugins.spam.training_config import TrainingConfig
from privreg.plugins.spam.training_plan import TrainingPlan
from privreg.plugins.spam.training_protocol import PrivateTraining

__all__ = ["SpamPipeline", "evaluation_w_bound"]


def evaluation_w_bound(plan: TrainingPlan) -> float:
    """The evaluation's public bound on ``|w_j|``: the training plan's bound rounded up to
    a power of two (at least ``2^-8``). Public values only."""
    return float(2.0 ** math.ceil(math.log2(max(plan.w_bound / 2**plan.config.weight_bits, 2.0**-8))))


def _role(protocol: Protocol, name: str) -> Party:
    return next(p for p in protocol.parties() if p.name == name)


class SpamPipeline(Protocol):
    """Private training then private evaluation (paper 000, Sections 4.2 and 4.3) between
    ``alice`` (labelled training messages), ``bob`` (key pair and model) and ``carol``
    (messages to classify).

    Each process passes the inputs of the parties it hosts: Alice ``X``, ``y``; Carol
    ``X_eval`` (and optionally ``y_eval``, her own true labels, used only to report her
    accuracy in her output; never sent); Bob nothing (or a ``keypair`` for tests). Public
    and equal everywhere: ``training``, ``evaluation`` (same ``d``), ``n``, ``count``,
    ``key_bits``, ``insecure_small_keys`` and ``public`` (facts echoed in every output).
    ``rng``: one random source for the parties hosted here, or ``{party: source}``.
    Alice and Carol refuse a key of another size than ``key_bits``, and a key marked
    insecure unless ``insecure_small_keys`` or their own ``rng`` is seeded (tests, where
    Bob's key is marked for being drawn from a seeded source).

    Outputs: Alice ``{"training": {timings, counts}}``; Bob ``{"w", "training",
    "evaluation"}``; Carol ``{"labels", "evaluation"}`` and ``accuracy`` when ``y_eval``
    was given; every output also holds ``public``. No differential privacy: use the
    ``spam-filter`` workflow's ``dp=gradient`` for that.
    """

    name = "spam-pipeline"
    caveats = (
        "The caveats of both sub-protocols. Training: "
        + PrivateTraining.caveats
        + " Evaluation: "
        + PrivateEvaluation.caveats
        + " Together: a network attacker (mutual TLS) also learns when training ends and how many messages Carol "
        "classifies (from message sizes and timing); plaintext mode shows everything. Malicious parties are not "
        "covered: Alice can poison the model Carol's labels come from; Bob can return arbitrary labels to Carol "
        "or deviate to learn Alice's or Carol's features as above; Carol learns her labels and, deviating, one bit "
        "of a linear function of w per message. No differential privacy in this protocol."
    )

    def __init__(
        self,
        *,
        training: TrainingConfig,
        evaluation: EvaluationConfig,
        n: int,
        count: int,
        key_bits: int,
        insecure_small_keys: bool = False,
        keypair: PaillierKeypair | None = None,
        X: Any = None,
        y: Any = None,
        X_eval: Any = None,
        y_eval: Any = None,
        rng: RandomSource | Mapping[str, RandomSource] | None = None,
        public: Mapping[str, Any] | None = None,
        alice: str = "alice",
        bob: str = "bob",
        carol: str = "carol",
    ) -> None:
        if not isinstance(training, TrainingConfig):
            raise PrivregTypeError(f"training must be a TrainingConfig; got {type(training).__name__}.")
        if not isinstance(evaluation, EvaluationConfig):
            raise PrivregTypeError(f"evaluation must be an EvaluationConfig; got {type(evaluation).__name__}.")
        if evaluation.d != training.d:
            raise PrivregValueError(
                f"evaluation.d = {evaluation.d} differs from training.d = {training.d}; both protocols need the "
                f"same features."
            )
        if training.dp:
            raise PrivregValueError(
                "the pipeline runs without differential privacy; pass a TrainingConfig without dp_epsilon/dp_delta."
            )
        if not isinstance(insecure_small_keys, bool):
            raise PrivregTypeError(f"insecure_small_keys must be True or False; got {insecure_small_keys!r}.")
        self.key_bits = v.check_int("key_bits", key_bits)
        if self.key_bits < MIN_KEY_BITS and not insecure_small_keys:
            raise PrivregValueError(
                f"key_bits = {self.key_bits} is below {MIN_KEY_BITS}; set insecure_small_keys = True for tests only."
            )
        self.insecure = insecure_small_keys
        self.training, self.evaluation = training, evaluation
        self.n = v.check_int("n", n, minimum=1)
        self.count = v.check_int("count", count, minimum=1)
        self.alice, self.bob, self.carol = (
            v.check_name(k, x) for k, x in (("alice", alice), ("bob", bob), ("carol", carol))
        )
        if len({self.alice, self.bob, self.carol}) != 3:
            raise PrivregValueError(f"alice, bob and carol must be three names; got {[alice, bob, carol]}.")
        if isinstance(rng, Mapping):
            unknown = sorted(set(rng) - {self.alice, self.bob, self.carol})
            if unknown:
                raise PrivregValueError(f"rng names parties {unknown} that are not in this run.")
        self._rng = rng
        self.public = dict(public or {})
        # checked now (early errors): the sub-protocols of the parties hosted here
        self._train = PrivateTraining(
            config=training,
            n=self.n,
            keypair=keypair,
            X=X,
            y=y,
            allow_insecure=self._accepts_insecure(self.alice),
            rng=self.rng_of(self.alice),
            alice=self.alice,
            bob=self.bob,
            key_bits=self.key_bits,
        )
        self._eval = PrivateEvaluation(
            config=evaluation,
            count=self.count,
            keypair=keypair,
            X=X_eval,
            allow_insecure=self._accepts_insecure(self.carol),
            rng=self.rng_of(self.carol),
            bob=self.bob,
            carol=self.carol,
            key_bits=self.key_bits,
        )
        self.keypair = keypair
        self.y_eval = None
        if y_eval is not None:
            self.y_eval = check_labels(y_eval, self.count)

    def rng_of(self, party: str) -> RandomSource | None:
        """The random source of ``party`` (None: the OS CSPRNG)."""
        if isinstance(self._rng, Mapping):
            return self._rng.get(party)
        return self._rng

    def _accepts_insecure(self, party: str) -> bool:
        # a key marked insecure is accepted with insecure_small_keys, or by a party whose own
        # randomness is seeded (tests: the key is then marked for being seeded); its size is
        # checked against the public key_bits either way
        return insecure_key_allowed(self.insecure, self.rng_of(party))

    def max_message_bytes(self) -> int | None:
        """The larger of the sub-protocols' bounds (see theirs), at least 4 KiB."""
        return max(4096, self._train.max_message_bytes() or 0, self._eval.max_message_bytes() or 0)

    def message_bound(self, *, sender: str, receiver: str, step: str) -> int | None:
        """The bound of the sub-protocol that sends ``step`` (evaluation steps start with
        ``eval.``), from the run's public sizes (``train``, ``test``, ``space``,
        ``key_bits``, ...): see theirs."""
        sub = self._eval if step.startswith("eval.") else self._train
        return sub.message_bound(sender=sender, receiver=receiver, step=step)

    def learns(self) -> Mapping[str, str]:
        t, e = self._train.learns(), self._eval.learns()
        return {
            self.alice: t[self.alice],
            self.bob: f"in training: {t[self.bob]} In evaluation: {e[self.bob]}",
            self.carol: e[self.carol],
        }

    def parties(self) -> Sequence[Party]:
        return [
            RoleParty(self.alice, self._run_alice),
            RoleParty(self.bob, self._run_bob),
            RoleParty(self.carol, self._run_carol),
        ]

    async def _run_alice(self, ch: Channel) -> dict[str, Any]:
        out = await _role(self._train, self.alice).run(ch)
        return {"training": out, "public": self.public}

    async def _run_bob(self, ch: Channel) -> dict[str, Any]:
        rng = resolve_random(self.rng_of(self.bob))
        kp = self.keypair or generate_paillier_keypair(
            n_bits=self.key_bits, insecure_allow_small_keys=self.insecure, rng=rng
        )
        # Bob receives no key: allow_insecure does not apply to him
        train = PrivateTraining(
            config=self.training, n=self.n, keypair=kp, rng=rng, key_bits=self.key_bits, alice=self.alice, bob=self.bob
        )
        t_out = await _role(train, self.bob).run(ch)
        w = t_out.pop("w")
        ev = PrivateEvaluation(
            config=self.evaluation,
            count=self.count,
            keypair=kp,
            w=w,
            rng=rng,
            key_bits=self.key_bits,
            bob=self.bob,
            carol=self.carol,
        )
        e_out = await _role(ev, self.bob).run(ch)
        return {"w": w, "training": t_out, "evaluation": e_out, "public": self.public}

    async def _run_carol(self, ch: Channel) -> dict[str, Any]:
        out = await _role(self._eval, self.carol).run(ch)
        labels = out.pop("labels")
        if len(labels) != self.count:
            raise ProtocolError(f"the evaluation returned {len(labels)} labels for {self.count} messages")
        result: dict[str, Any] = {"labels": labels, "evaluation": out, "public": self.public}
        if self.y_eval is not None:
            result["accuracy"] = float((labels == self.y_eval).mean())
        return result
