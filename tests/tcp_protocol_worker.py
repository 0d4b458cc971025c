"""Child-process side of the two-process TCP test (importable by multiprocessing)."""

from __future__ import annotations


def run_holder(q_in, q_out, bits, holder_values, tls):
    """Host the 'holder' party of a SecureComparison over TCP with mutual TLS (``tls``: the
    TlsConfig arguments); report outputs, transcript and run id."""
    try:
        from privreg.crypto.compare import SecureComparison
        from privreg.mpc.runtime import run_protocol
        from privreg.mpc.tcp import TcpTransport
        from privreg.mpc.tls import TlsConfig

        transport = TcpTransport(local=["holder"], recv_timeout=60.0, tls=TlsConfig(**tls))
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
                transport.run_id,
            )
        )
    except Exception as exc:  # noqa: BLE001 -- any failure goes to the parent process
        q_out.put(("error", f"{type(exc).__name__}: {exc}"))
