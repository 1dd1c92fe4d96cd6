"""Tests for conversation/config.py: defaults, presets and validation."""

from __future__ import annotations

import dataclasses

import pytest

from synapse_retriever.conversation import ContextConfig
from synapse_retriever.errors import InvalidTypeError, InvalidValueError


def test_the_published_constants() -> None:
    published = ContextConfig.published()
    assert published.weights == (0.4, 0.3, 0.2, 0.1)
    assert (published.full_threshold, published.chunks_threshold) == (0.7, 0.4)
    assert (published.summary_threshold, published.working_memory) == (0.2, 5)
    assert (published.chunks_ratio, published.summary_ratio) == (0.3, 0.1)
    assert dict(published.temperatures) == {
        "analytical": 1.3, "creative": 0.8, "conversational": 1.0,
    }  # fmt: skip
    assert (published.consolidation_interval, published.consolidation_ages) == (10, (5, 20))
    assert (published.consolidation_threshold, published.replay_window) == (0.2, 10)
    assert published.replay_boost == 0.2 and ContextConfig().replay_boost == 0.05
    assert (published.relevance, published.recall_k, published.demotion) == (
        "absolute", 0, "importance",
    )  # fmt: skip


def test_the_default_differs_only_where_the_benchmark_says_so() -> None:
    default, published = ContextConfig(), ContextConfig.published()
    changed = {
        f.name
        for f in dataclasses.fields(ContextConfig)
        if getattr(default, f.name) != getattr(published, f.name)
    }
    assert changed == {
        "assembly", "working_share", "demotion", "relevance", "recall_k", "replay_boost",
    }  # fmt: skip
    assert default.weights == published.weights == (0.4, 0.3, 0.2, 0.1)
    assert (published.assembly, published.working_share) == ("gradient", 1.0)


def test_the_gradient_preset_is_the_default_without_the_relevance_pass() -> None:
    gradient = ContextConfig.gradient()
    assert gradient == ContextConfig(assembly="gradient", working_share=1.0)
    assert ContextConfig.preset("gradient", working_memory=2) == gradient.replace(working_memory=2)


def test_the_cli_offers_every_preset() -> None:
    from synapse_retriever.cli import build_parser
    from synapse_retriever.conversation.config import PRESETS

    memory = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    action = next(
        a
        for a in memory._subparsers._group_actions[0].choices["memory"]._actions  # type: ignore[union-attr]
        if a.dest == "presets"
    )
    assert tuple(action.choices) == PRESETS and action.default is None  # None: all of them


def test_presets_by_name() -> None:
    assert ContextConfig.preset("default") == ContextConfig()
    assert ContextConfig.preset("published", working_memory=2).working_memory == 2
    with pytest.raises(InvalidValueError, match="preset must be one of"):
        ContextConfig.preset("brainy")


def test_the_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ContextConfig().working_memory = 3  # type: ignore[misc]
    assert ContextConfig().replace(working_memory=3).working_memory == 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"recency_weight": 1.5}, "recency_weight must be a number in"),
        ({"full_threshold": float("nan")}, "full_threshold must be a number in"),
        ({"summary_threshold": 0.5}, "thresholds must satisfy"),
        ({"chunks_ratio": 0.0}, r"chunks_ratio must be in \(0, 1\]"),
        ({"summary_ratio": 0.5}, "summary_ratio must be <= chunks_ratio"),
        ({"working_memory": -1}, "working_memory must be an integer >= 0"),
        ({"consolidation_interval": 0}, "consolidation_interval must be an integer >= 1"),
        ({"recency_half_life_turns": 0}, "recency_half_life_turns must be a finite number > 0"),
        ({"recency_half_life_days": -1.0}, "recency_half_life_days must be a finite"),
        ({"relevance": "fuzzy"}, "relevance must be one of"),
        ({"demotion": "random"}, "demotion must be one of"),
        ({"overflow": "truncate"}, "overflow must be one of"),
        ({"consolidation_ages": (20, 5)}, "consolidation_ages must satisfy low <= high"),
        ({"temperatures": {"analytical": 0.0}}, r"temperatures\['analytical'\] must be"),
        ({"mode": "dreaming"}, "mode must be one of"),
        ({"working_share": 0.0}, r"working_share must be a number in \(0, 1\]"),
        ({"working_share": 1.5}, r"working_share must be a number in \(0, 1\]"),
        ({"novelty_weight": -1.0}, "novelty_weight must be a finite number >= 0"),
        ({"novelty_weight": float("inf")}, "novelty_weight must be a finite number >= 0"),
        ({"assembly": "magic"}, "assembly must be one of"),
        # subnormal: ln 2 / it overflows, and the newest turn's importance was NaN
        ({"recency_half_life_turns": 5e-324}, "must be at least 2.2250738585072014e-308"),
        ({"habituation_half_count": 1e-310}, "must be at least 2.2250738585072014e-308"),
    ],
)
def test_bad_values_are_refused_with_a_message_naming_them(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidValueError, match=message):
        ContextConfig(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("working_memory", True), ("recall_k", "3"), ("recency_weight", None), ("graph_damping", "1")],
)
def test_a_setting_given_no_number_is_a_type_error_naming_it(field: str, value: object) -> None:
    # as SynapseConfig's: it was an InvalidValueError
    with pytest.raises(InvalidTypeError, match=f"{field} must be .+ got {value!r}"):
        ContextConfig(**{field: value})  # type: ignore[arg-type]


def test_temperatures_must_be_a_mapping() -> None:
    with pytest.raises(InvalidTypeError, match="temperatures must be a mapping"):
        ContextConfig(temperatures=[1.0])  # type: ignore[arg-type]
    custom = ContextConfig(temperatures={"focused": 1.5}, mode="focused")
    assert custom.temperature() == 1.5
    with pytest.raises(InvalidValueError, match="mode must be one of"):
        custom.temperature("analytical")


def test_a_context_config_pickles_and_copies_whole() -> None:
    # a review's finding: its temperatures were a MappingProxyType, which does not pickle
    import copy
    import pickle

    config = ContextConfig.preset("gradient")
    assert pickle.loads(pickle.dumps(config)) == config == copy.deepcopy(config)
    with pytest.raises(TypeError):
        config.temperatures["creative"] = 2.0  # type: ignore[index]
