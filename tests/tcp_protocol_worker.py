"""Child-process side of the two-process TCP test (importable by multiprocessing)."""

from __future__ import annotations


def run_holder(q_in, q_out, bits, holder_values):
    """Host the 'holder' party of a SecureComparison over TCP; report outputs and transcript."""
    try:
        from privreg.crypto.compare import SecureComparison
        from privreg.mpc.runtime import run_protocol
        from privreg.mpc.tcp import TcpTransport

        transport = TcpTransport(local=["holder"], recv_timeout=60.0, session="two-process-test")
        q_out.put(("address", transport.address))
        transport.set_peers(q_in.get(timeout=60))
        proto = SecureComparison(
            bits=bits, count=len(holder_values), output="both", holder_values=holder_values, allow_insecure=True
        )
        res = run_protocol(proto, transport=transport)
        q_out.put(
            (
                "ok",
                res.outputs,
                [(m.step, m.sender, m.receiver, m.size_bytes, m.ciphertexts) for m in res.transcript.messages],
            )
        )
    except Exception as exc:  # noqa: BLE001 -- any failure goes to the parent process
        q_out.put(("error", f"{type(exc).__name__}: {exc}"))
