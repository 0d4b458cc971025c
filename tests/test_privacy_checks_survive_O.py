"""Invariants that used to be ``assert`` statements (ruff S101): ``python -O`` strips
asserts, so a privacy invariant must be an explicit check raising a privreg error."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import pytest

from privreg.core.errors import PrivregError
from privreg.mechanisms.gaussian import GaussianMechanism

_NOT_A_FLOAT = Fraction(1, 3)  # no float equals it: charging float(1/3) would round


def test_gaussian_refuses_to_charge_a_sigma_other_than_the_sampled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    mech = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert Fraction(mech.privacy_event().sigma) == mech.sigma_int  # the normal case is exact
    monkeypatch.setattr(GaussianMechanism, "sigma_int", property(lambda self: _NOT_A_FLOAT))
    with pytest.raises(PrivregError, match="not exactly a float"):  # a mechanism caches its event: a new one
        GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0).privacy_event()


@pytest.mark.slow  # a subprocess
def test_gaussian_sigma_check_survives_python_O() -> None:
    code = (
        "from fractions import Fraction\n"
        "from privreg.core.errors import PrivregError\n"
        "from privreg.mechanisms.gaussian import GaussianMechanism\n"
        "GaussianMechanism.sigma_int = property(lambda self: Fraction(1, 3))\n"
        "m = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)\n"
        "try:\n"
        "    m.privacy_event()\n"
        "except PrivregError:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('charged')\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused", out.stderr
