"""Plugin ``pprl``: multi-party privacy-preserving record linkage, MP-SPPRL (paper 004).

Keyed Bloom filters (:mod:`encoding`, per-field HKDF keys), double blocking per party
(:mod:`blocking`: Hamming LSH then suffix blocking, with the dispersion rule of
:mod:`dispersion`), the sliding-window merge at the linkage unit (:mod:`merge`), Paillier
secure Hamming distances with early termination (:mod:`matching`,
:mod:`privreg.crypto.hamming`), all run as one :class:`~privreg.plugins.pprl.protocol.PPRLProtocol`.
:mod:`quality` measures linkage quality against ground truth, :mod:`leakage` what the
recommended profile's parties can infer from what they receive, :mod:`tuning` helps choose
the LSH parameters, :mod:`datasets` loads FEBRL and pseudopeople data and corrupts records
for 3-9 parties. Registered through the ``privreg`` entry point like any third-party plugin.
"""
