"""Plugin ``spam``: privacy-preserving spam filtering (paper 000, Pathak, Sharifi and Raj).

Logistic regression trained and evaluated over e-mail that the model owner never sees:

- :mod:`~privreg.plugins.spam.corpus`: the SpamAssassin public corpus (tarball reader,
  the 3000/3000 split, a bundled slice for the demo);
- :mod:`~privreg.plugins.spam.features`: binary character 4-grams of the first 35 KB,
  hashed modulo a configurable space (Section 6.2);
- :mod:`~privreg.plugins.spam.reduction`: hash-space size, LSH random hyperplanes,
  uniform and multinomial feature sampling, document-frequency pruning, PCA (Section 6.4);
- :mod:`~privreg.plugins.spam.logistic`: the plaintext reference (eq. (1), regulariser
  sign corrected) and AUC;
- :mod:`~privreg.plugins.spam.link`: the public periodic approximation of the sigmoid
  that the private protocol evaluates (the printed protocol cannot be run literally);
- :mod:`~privreg.plugins.spam.training_protocol`: the training protocol (Section 4.2) as a
  :class:`~privreg.core.protocol.Protocol` between Alice and Bob, with its public
  parameters in :mod:`~privreg.plugins.spam.training_config` and the bounds both parties
  derive from them in :mod:`~privreg.plugins.spam.training_plan`;
- :mod:`~privreg.plugins.spam.fixed_point`: features in fixed point, uniform masks and
  declared bounds of encrypted values, shared by both protocols;
- :mod:`~privreg.plugins.spam.evaluation`: the evaluation protocol (Section 4.3) with the
  DGK secure comparison of :mod:`privreg.crypto.compare`;
- :mod:`~privreg.plugins.spam.costs`: operation counts against Section 5.3, the eq. (2)
  leakage figure and the Table 4 style timing table;
- :mod:`~privreg.plugins.spam.workflow`: ``privreg run spam-filter`` and the demo step.

All Paillier arithmetic is :mod:`privreg.crypto`'s; the parties talk through
:mod:`privreg.mpc` transports (in memory or TCP).
"""
