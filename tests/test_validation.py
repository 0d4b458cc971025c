"""The check_* helpers: what they accept, what they return and how they refuse."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from privreg import PrivregError, PrivregTypeError, PrivregValueError
from privreg.core.validation import (
    check_count,
    check_delta,
    check_epsilon,
    check_int,
    check_name,
    check_probability,
    check_real,
    check_sensitivity,
)

nan, inf = math.nan, math.inf

ACCEPTED = [
    (check_real, {}, 1, 1.0),
    (check_real, {}, -2.5, -2.5),
    (check_real, {}, np.float32(0.5), 0.5),
    (check_real, {}, np.int64(3), 3.0),
    (check_real, {}, Fraction(1, 4), 0.25),
    (check_epsilon, {}, 1.0, 1.0),
    (check_epsilon, {}, 3, 3.0),
    (check_epsilon, {}, 5e-324, 5e-324),
    (check_epsilon, {}, np.float64(0.25), 0.25),
    (check_epsilon, {}, np.uint8(2), 2.0),
    (check_epsilon, {"allow_zero": True}, 0, 0.0),
    (check_delta, {}, 0, 0.0),
    (check_delta, {}, 1e-6, 1e-6),
    (check_delta, {}, 0.9999, 0.9999),
    (check_delta, {}, np.float32(0.5), 0.5),
    (check_delta, {"allow_zero": False}, 1e-12, 1e-12),
    (check_sensitivity, {}, 1, 1.0),
    (check_sensitivity, {}, np.float64(0.1), 0.1),
    (check_sensitivity, {"allow_zero": True}, 0.0, 0.0),
    (check_probability, {}, 0, 0.0),
    (check_probability, {}, 1, 1.0),
    (check_probability, {}, np.float64(0.3), 0.3),
    (check_probability, {"open_low": True}, 1, 1.0),
    (check_probability, {"open_high": True}, 0, 0.0),
    (check_int, {}, 0, 0),
    (check_int, {}, -5, -5),
    (check_int, {}, 2**100, 2**100),
    (check_int, {}, np.int64(7), 7),
    (check_int, {}, np.uint8(255), 255),
    (check_int, {"minimum": 3}, 3, 3),
    (check_count, {}, 1, 1),
    (check_count, {}, np.int32(5), 5),
    (check_count, {}, 10**30, 10**30),
    (check_name, {}, "laplace", "laplace"),
    (check_name, {}, "A-b_c.1", "A-b_c.1"),
]


@pytest.mark.parametrize("check, kwargs, value, expected", ACCEPTED)
def test_accepted_values_are_returned_as_plain_python_numbers(check, kwargs, value, expected):
    result = check("my_arg", value, **kwargs)
    assert result == expected
    assert type(result) is type(expected)  # numpy scalars come back as float/int


T, V = PrivregTypeError, PrivregValueError
REJECTED = [
    (check_real, {}, "1.0", T),
    (check_real, {}, None, T),
    (check_real, {}, True, T),
    (check_real, {}, 1 + 2j, T),
    (check_real, {}, Decimal("1.5"), T),
    (check_real, {}, np.True_, T),
    (check_epsilon, {}, nan, V),
    (check_epsilon, {}, np.float64(nan), V),
    (check_epsilon, {}, inf, V),
    (check_epsilon, {}, -inf, V),
    (check_epsilon, {}, -1.0, V),
    (check_epsilon, {}, 0, V),
    (check_epsilon, {}, 0.0, V),
    (check_epsilon, {"allow_zero": True}, -1e-300, V),
    (check_epsilon, {}, True, T),
    (check_epsilon, {}, "1", T),
    (check_epsilon, {}, None, T),
    (check_delta, {}, 1, V),
    (check_delta, {}, 1.5, V),
    (check_delta, {}, -0.1, V),
    (check_delta, {}, nan, V),
    (check_delta, {}, inf, V),
    (check_delta, {}, -inf, V),
    (check_delta, {"allow_zero": False}, 0, V),
    (check_delta, {}, False, T),
    (check_delta, {}, "1e-6", T),
    (check_sensitivity, {}, 0, V),
    (check_sensitivity, {}, -1, V),
    (check_sensitivity, {}, nan, V),
    (check_sensitivity, {}, inf, V),
    (check_sensitivity, {"allow_zero": True}, -0.5, V),
    (check_sensitivity, {}, True, T),
    (check_sensitivity, {}, None, T),
    (check_probability, {}, -0.1, V),
    (check_probability, {}, 1.1, V),
    (check_probability, {}, nan, V),
    (check_probability, {}, -inf, V),
    (check_probability, {"open_low": True}, 0, V),
    (check_probability, {"open_high": True}, 1.0, V),
    (check_probability, {}, True, T),
    (check_int, {}, 1.0, T),
    (check_int, {}, np.float64(1.0), T),
    (check_int, {}, "1", T),
    (check_int, {}, True, T),
    (check_int, {}, np.True_, T),
    (check_int, {}, None, T),
    (check_int, {"minimum": 3}, 2, V),
    (check_count, {}, 0, V),
    (check_count, {}, -1, V),
    (check_count, {}, np.int64(0), V),
    (check_count, {}, 1.5, T),
    (check_count, {}, True, T),
    (check_name, {}, "", V),
    (check_name, {}, "has space", V),
    (check_name, {}, "a/b", V),
    (check_name, {}, "tab\t", V),
    (check_name, {}, 3, T),
    (check_name, {}, None, T),
]


@pytest.mark.parametrize("check, kwargs, value, error", REJECTED)
def test_rejected_values_name_the_argument_and_the_value(check, kwargs, value, error):
    with pytest.raises(error) as info:
        check("my_arg", value, **kwargs)
    message = str(info.value)
    assert message.startswith("my_arg ")
    assert repr(value) in message


@pytest.mark.parametrize(
    "check, kwargs, value, bound",
    [
        (check_epsilon, {}, 0, "> 0"),
        (check_epsilon, {"allow_zero": True}, -1, ">= 0"),
        (check_delta, {}, 1, "[0, 1)"),
        (check_delta, {"allow_zero": False}, 0, "(0, 1)"),
        (check_probability, {"open_low": True, "open_high": True}, 1, "(0, 1)"),
        (check_probability, {}, 2, "[0, 1]"),
        (check_int, {"minimum": 3}, 2, ">= 3"),
    ],
)
def test_range_errors_state_the_allowed_range(check, kwargs, value, bound):
    with pytest.raises(PrivregValueError) as info:
        check("my_arg", value, **kwargs)
    assert bound in str(info.value)


@pytest.mark.parametrize("check", [check_real, check_epsilon, check_sensitivity])
def test_ints_too_large_for_a_float_are_refused_with_a_privreg_error(check):
    with pytest.raises(PrivregError, match="my_arg"):
        check("my_arg", 10**400)
