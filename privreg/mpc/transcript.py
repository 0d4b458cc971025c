"""Transcripts of protocol runs: every message with its size and ciphertext count.

A transcript is the evidence for what each party received, and so for what it can have
learned. It counts messages, bytes (of the :mod:`privreg.mpc.wire` encoding) and
ciphertexts (any sent object with an integer ``ciphertext_count`` attribute, such as
:class:`privreg.crypto.EncryptedVector`) per party and per protocol step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import attrs

__all__ = ["Message", "Traffic", "Transcript", "count_ciphertexts"]


def count_ciphertexts(payload: Any) -> int:
    """Ciphertexts carried by ``payload``: the sum of ``ciphertext_count`` over every
    object in it that has one (lists, tuples and dict values are searched)."""
    if isinstance(payload, (list, tuple)):
        return sum(count_ciphertexts(x) for x in payload)
    if isinstance(payload, dict):
        return sum(count_ciphertexts(x) for x in payload.values())
    count = getattr(payload, "ciphertext_count", None)
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    return 0


@attrs.frozen(kw_only=True)
class Message:
    """One message as delivered: who sent it to whom, at which protocol step, its size
    in bytes (the encoded payload) and how many ciphertexts it carries."""

    seq: int
    step: str
    sender: str
    receiver: str
    size_bytes: int
    ciphertexts: int = 0
    payload: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class Traffic:
    """Message, byte and ciphertext counts."""

    messages: int = 0
    bytes: int = 0
    ciphertexts: int = 0

    def add(self, msg: Message) -> Traffic:
        return Traffic(
            messages=self.messages + 1,
            bytes=self.bytes + msg.size_bytes,
            ciphertexts=self.ciphertexts + msg.ciphertexts,
        )


def _render(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


class Transcript:
    """Every message of a run, in order. ``keep_payloads=False`` keeps only metadata.

    Under a transport that spans processes, each process's transcript holds the
    messages its local parties sent or received.
    """

    def __init__(self, *, keep_payloads: bool = True, parties: Sequence[str] = ()) -> None:
        self.keep_payloads = keep_payloads
        self.parties = tuple(parties)
        self._messages: list[Message] = []

    def record(self, msg: Message) -> None:
        if not self.keep_payloads:
            msg = attrs.evolve(msg, payload=None)
        self._messages.append(msg)

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def sent_by(self, party: str) -> tuple[Message, ...]:
        return tuple(m for m in self._messages if m.sender == party)

    def received_by(self, party: str) -> tuple[Message, ...]:
        return tuple(m for m in self._messages if m.receiver == party)

    def per_party(self) -> dict[str, dict[str, Traffic]]:
        """``{party: {"sent": Traffic, "received": Traffic}}``, silent parties included."""
        out: dict[str, dict[str, Traffic]] = defaultdict(lambda: {"sent": Traffic(), "received": Traffic()})
        for party in self.parties:
            out[party]
        for m in self._messages:
            out[m.sender]["sent"] = out[m.sender]["sent"].add(m)
            out[m.receiver]["received"] = out[m.receiver]["received"].add(m)
        return dict(out)

    def per_step(self) -> dict[str, Traffic]:
        """``{step: Traffic}`` in order of first appearance."""
        out: dict[str, Traffic] = defaultdict(Traffic)
        for m in self._messages:
            out[m.step] = out[m.step].add(m)
        return dict(out)

    def per_party_step(self) -> dict[str, dict[str, dict[str, Traffic]]]:
        """``{party: {step: {"sent": Traffic, "received": Traffic}}}``: what each party
        sent and received at each step (steps in order of first appearance)."""
        out: dict[str, dict[str, dict[str, Traffic]]] = {p: {} for p in self.parties}
        zero = {"sent": Traffic(), "received": Traffic()}
        for m in self._messages:
            for party, side in ((m.sender, "sent"), (m.receiver, "received")):
                steps = out.setdefault(party, {})
                cell = steps.setdefault(m.step, dict(zero))
                cell[side] = cell[side].add(m)
        return out

    def total(self) -> Traffic:
        """All messages of the transcript together."""
        t = Traffic()
        for m in self._messages:
            t = t.add(m)
        return t

    def table(self, *, ciphertexts: bool = False) -> str:
        """A plain-text table of traffic per party (with ciphertext columns if asked)."""
        head = ["party", "sent msgs", "sent bytes", "recv msgs", "recv bytes"]
        if ciphertexts:
            head[3:3] = ["sent cts"]
            head.append("recv cts")
        rows = [tuple(head)]
        for party, t in sorted(self.per_party().items()):
            s, r = t["sent"], t["received"]
            cells = [party, str(s.messages), str(s.bytes), str(r.messages), str(r.bytes)]
            if ciphertexts:
                cells[3:3] = [str(s.ciphertexts)]
                cells.append(str(r.ciphertexts))
            rows.append(tuple(cells))
        return _render(rows)

    def step_table(self) -> str:
        """A plain-text table with one row per (step, sender, receiver), in protocol order:
        messages, ciphertexts and bytes."""
        cells: dict[tuple[str, str, str], Traffic] = defaultdict(Traffic)
        for m in self._messages:
            cells[(m.step, m.sender, m.receiver)] = cells[(m.step, m.sender, m.receiver)].add(m)
        rows = [("step", "from", "to", "msgs", "ciphertexts", "bytes")]
        for (step, frm, to), t in cells.items():
            rows.append((step, frm, to, str(t.messages), str(t.ciphertexts), str(t.bytes)))
        total = self.total()
        rows.append(("total", "", "", str(total.messages), str(total.ciphertexts), str(total.bytes)))
        return _render(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": [
                {
                    "seq": m.seq,
                    "step": m.step,
                    "sender": m.sender,
                    "receiver": m.receiver,
                    "size_bytes": m.size_bytes,
                    "ciphertexts": m.ciphertexts,
                }
                for m in self._messages
            ]
        }
