"""Template arguments matched against a specialization's pattern (cudasrc.type_patterns), as C++ deduces them."""
from __future__ import annotations

import pytest

from cudasrc.type_patterns import deduce, most_specialized


@pytest.mark.parametrize("pattern, params, args, values", [
    (("Tensor<Device, dim, DType>", "DType"), ("Device", "dim", "DType"),
     ("mshadow::Tensor<mshadow::gpu, 2, float>", "float"), {"Device": "mshadow::gpu", "dim": "2", "DType": "float"}),
    (("T *",), ("T",), ("unsigned long long *",), {"T": "unsigned long long"}),       # a parameter takes two words
    (("const T *", "T"), ("T",), ("const float *", "double"), None),                  # T must be one type twice
    (("Tensor<D, 1, T>",), ("D", "T"), ("Tensor<gpu, 2, float>",), None),             # a value that differs
    (("Pair<A, Pair<A, B>>",), ("A", "B"), ("Pair<int, Pair<int, char>>",), {"A": "int", "B": "char"}),
    (("T",), ("T", "U"), ("int",), None),                # U is deduced from nothing: not this specialization
])
def test_arguments_fit_a_pattern_or_not(pattern, params, args, values):
    assert deduce(pattern, params, args) == values


def test_unbalanced_angle_brackets_are_an_error():
    with pytest.raises(ValueError, match="unbalanced '<'"):
        deduce(("Tensor<D, T>",), ("D", "T"), ("Tensor<gpu, float",))


def test_the_more_specialized_of_two_that_fit_wins_and_a_tie_is_ambiguous():
    two_d, one_d = (("Tensor<D, n, T>",), ("D", "n", "T")), (("Tensor<D, 1, T>",), ("D", "T"))
    assert most_specialized([two_d, one_d]) is one_d and most_specialized([one_d, two_d]) is one_d
    with pytest.raises(ValueError, match="ambiguous"):
        most_specialized([(("A", "int"), ("A",)), (("int", "B"), ("B",))])
