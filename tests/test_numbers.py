"""The public math helpers refuse an argument that is no number with a typed error naming it
(NumPy's own error named neither the argument nor the helper)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from synapse_retriever import (
    InvalidTypeError,
    InvalidValueError,
    decayed_weight,
    effective_weight,
    hub_factor,
    injection_slots,
    learned_half_life,
    reinforced_weight,
)
from synapse_retriever._numbers import is_numeric, numeric
from synapse_retriever.conversation import (
    habituation,
    importance,
    recency,
    surprise,
    threshold_level,
)
from synapse_retriever.learning.decay import pruned_at
from synapse_retriever.learning.usage import base_level
from synapse_retriever.recall.actr import source_weights

# each helper, a good call, and the arguments that are numbers
CALLS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (decayed_weight, {"w0": 0.5, "half_life_days": 30.0, "age_days": 1.0}),
    (effective_weight, {"w0": 0.5, "half_life_days": 30.0, "age_days": 1.0, "count": 3}),
    (pruned_at, {"w0": 0.5, "half_life_days": 30.0, "last_s": 0.0, "count": 3}),
    (reinforced_weight, {"current": 0.5, "delta": 0.3}),
    (learned_half_life, {"count": 3, "gap_days": 1.0, "default_days": 30.0}),
    (base_level, {"times": [0.0, 3600.0], "now": 86400.0}),
    (hub_factor, {"degree": 200}),
    (injection_slots, {"n": 5, "seeds": 3, "max_inject": 2}),
    (source_weights, {"scores": [0.8, 0.4]}),
    (recency, {"age_turns": 3, "half_life_turns": 20.0}),
    (surprise, {"max_similarity": 0.4}),
    (habituation, {"repeats": 2, "half_count": 1.0}),
    (importance, {"recency": 0.5, "surprise": 0.5, "relevance": 0.5, "habituation": 0.0}),
    (threshold_level, {"importance": 0.5}),
]
CASES = [
    pytest.param(helper, good, name, bad, id=f"{helper.__name__}-{name}-{type(bad).__name__}")
    for helper, good in CALLS
    for name in good
    for bad in ("x", None, object())
]


@pytest.mark.parametrize(("helper", "good", "name", "bad"), CASES)
def test_a_helper_names_the_argument_that_is_no_number(
    helper: Callable[..., Any], good: dict[str, Any], name: str, bad: object
) -> None:
    helper(**good)  # the good call answers
    arguments = good | {name: [bad] if isinstance(good[name], list) else bad}
    with pytest.raises(InvalidTypeError) as raised:
        helper(**arguments)
    message = str(raised.value)
    assert message.startswith(f"{helper.__name__}: {name} must be a number"), message
    assert message.endswith(f"got {type(arguments[name]).__name__} {arguments[name]!r:.80}")


def test_arrays_and_plain_floats_are_answered_as_before() -> None:
    weights = np.array([0.8, 0.4])
    assert decayed_weight(weights, 30.0, 30.0).tolist() == [0.4, 0.2]
    assert decayed_weight(0.8, 30.0, 30.0) == 0.4
    assert reinforced_weight(np.array([0.9]), 0.3).tolist() == [1.0]


def test_float32_weights_get_the_times_float64_weights_get() -> None:
    for w0 in (np.float32(0.3), np.array([0.3], np.float32), np.float16(0.3)):
        expected = pruned_at(np.asarray(w0).astype(np.float64), 30.0, 1.7e9, count=1)
        assert np.array_equal(pruned_at(w0, 30.0, 1.7e9, count=1), expected)
    assert pruned_at(np.array([1, 0]), 30.0, 0.0, count=1).tolist() == [
        pytest.approx(30.0 * math.log2(100) * 86400),
        -math.inf,
    ]


def test_the_argument_named_is_the_bad_one_and_a_helpers_own_error_is_kept() -> None:
    with pytest.raises(InvalidTypeError, match=r"^base_level: now must be a number"):
        base_level({1.0, 2.0}, "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"^hub_degree must be an integer, got 'x'$"):
        hub_factor(200, hub_degree="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"^effective_weight: w0 must be a number"):
        effective_weight("x", 30.0, 1.0, count=3)  # type: ignore[arg-type]


def test_an_error_of_another_kind_passes_unchanged() -> None:
    @numeric
    def refuses(x: float) -> float:
        raise ValueError(f"not {x}")

    with pytest.raises(ValueError, match=r"^not 1$") as raised:
        refuses(1)
    assert not isinstance(raised.value, InvalidTypeError)
    with pytest.raises(TypeError, match="unexpected keyword"):  # Python's, for a wrong call
        refuses(y=1)  # type: ignore[call-arg]


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.lists(st.floats(), max_size=4)))
def test_numbers_and_lists_of_them_are_numeric(value: object) -> None:
    assert is_numeric(value)


@given(st.one_of(st.text(), st.binary(), st.none(), st.lists(st.text(min_size=1), min_size=1)))
def test_text_bytes_and_none_are_not(value: object) -> None:
    assert not is_numeric(value)


def test_importance_names_weights_of_another_length() -> None:
    # the weights were unpacked: a raw "not enough values to unpack (expected 4, got 2)"
    with pytest.raises(InvalidValueError, match=r"weights must be \(recency, surprise, relevance"):
        importance(0.5, 0.5, 0.5, 0.0, weights=(1, 2))  # type: ignore[arg-type]
