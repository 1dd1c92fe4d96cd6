"""The configuration in groups (synapse_retriever/config.py; the conversation memory's is
tests/conversation/test_config.py): each group checks itself, the rule's type names its
constants, and one resolver addresses a field by name for the presets, ``replace`` and ``--set``.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import synapse_retriever
from synapse_retriever import (
    ActrRule,
    InvalidTypeError,
    InvalidValueError,
    Learning,
    Operations,
    PublishedRule,
    Spreading,
    SynapseConfig,
    SynapseStore,
)
from synapse_retriever.config import GROUPS
from synapse_retriever.conversation.config import ContextConfig


def test_each_group_holds_what_its_name_says_and_the_rule_follows_the_recall_type() -> None:
    config = SynapseConfig()
    assert isinstance(config.learning, Learning) and isinstance(config.recall, ActrRule)
    assert isinstance(config.spreading, Spreading) and isinstance(config.operations, Operations)
    assert config.rule == config.recall.rule == "actr"
    assert SynapseConfig.published().rule == "published"
    assert isinstance(SynapseConfig.published().recall, PublishedRule)


def test_the_seed_defaults_are_the_rules_own() -> None:
    # one seed for the ACT-R rule, three as published: the two plans read them from the rule
    assert (ActrRule().seeds, PublishedRule().seeds) == (1, 3)
    assert ActrRule().max_inject == PublishedRule().max_inject == 2


# parameters that take a config constant under another name
ALIASES = {
    "history": "use_history",
    "window": "recent_events",
    "decay": "base_decay",
    "limit": "max_coactivation",
    "timeout_s": "busy_timeout_s",
    "retries": "write_retries",
    "threshold": "inject_threshold",
    "fan": "association_fan",
}
# the conversation memory has its own constants (ContextConfig), and an MCP tool's ``limit``
# is how many rows it returns
OTHER_MEANINGS = ("conversation/", "cli/mcp_server.py")


def literal_defaults(path: Path) -> Iterator[tuple[str, int, object]]:
    """Each parameter or dataclass field of ``path`` defaulting to a number written out."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[str, ast.expr | None]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            with_default = positional[len(positional) - len(args.defaults) :]
            pairs += [(a.arg, d) for a, d in zip(with_default, args.defaults, strict=True)]
            pairs += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
        elif isinstance(node, ast.ClassDef):
            pairs += [
                (field.target.id, field.value)
                for field in node.body
                if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
            ]
        for name, default in pairs:
            if isinstance(default, ast.Constant) and type(default.value) in (int, float):
                yield name, default.lineno, default.value


def repeated_constants(
    folder: Path, constants: set[str], aliases: Iterable[str], skip: tuple[str, ...]
) -> list[str]:
    """The defaults under ``folder`` that write out one of ``constants`` (or an alias)."""
    names = constants | set(aliases)
    return [
        f"{path.relative_to(folder)}:{line} {name}={value}"
        for path in sorted(folder.rglob("*.py"))
        if not str(path.relative_to(folder)).startswith(skip)
        for name, line, value in literal_defaults(path)
        if name in names
    ]


def test_no_default_repeats_a_constant_of_the_config() -> None:
    groups = (Learning, ActrRule, PublishedRule, Spreading, Operations)
    constants = {field.name for group in groups for field in dataclasses.fields(group)}
    package = Path(synapse_retriever.__file__).parent
    found = repeated_constants(package, constants, ALIASES, ("config.py", *OTHER_MEANINGS))
    assert found == [], "default from the config's group instead (e.g. ActrRule.keep_bonus)"


def test_no_default_repeats_a_constant_of_the_conversation_config() -> None:
    constants = {field.name for field in dataclasses.fields(ContextConfig)}
    # the graph walk's names for ContextConfig's edge_decay_rate, graph_damping, graph_fan_out,
    # reinforcement_threshold, replay_themes (``depth`` and ``k`` mean other things there too)
    aliases = ("decay_rate", "damping", "fan_out", "threshold", "max_themes")
    folder = Path(synapse_retriever.__file__).parent / "conversation"
    found = repeated_constants(folder, constants, aliases, ("config.py",))
    assert found == [], "default from ContextConfig instead (e.g. ContextConfig.rrf_k)"


def test_a_field_is_named_bare_or_with_its_group_and_both_give_the_same_config() -> None:
    bare = SynapseConfig().replace(keep_bonus=2.0, write_retries=3, hub_degree=6)
    dotted = SynapseConfig().replace(
        **{"recall.keep_bonus": 2.0, "operations.write_retries": 3, "spreading.hub_degree": 6}
    )
    nested = SynapseConfig(
        recall=ActrRule(keep_bonus=2.0),
        operations=Operations(write_retries=3),
        spreading=Spreading(hub_degree=6),
    )
    assert (
        bare
        == dotted
        == nested
        == SynapseConfig.actr(keep_bonus=2.0, write_retries=3, hub_degree=6)
    )
    assert nested.value("keep_bonus") == nested.value("recall.keep_bonus") == 2.0
    assert SynapseConfig().replace(injection_enabled=False).injection_enabled is False


def test_every_field_of_every_group_can_be_named_by_itself() -> None:
    for config in (SynapseConfig.actr(), SynapseConfig.published()):
        for group in GROUPS:
            part = getattr(config, group)
            for field in dataclasses.fields(part):
                if field.init:
                    assert config.value(field.name) == getattr(part, field.name)
                    assert config.value(f"{group}.{field.name}") == getattr(part, field.name)


@pytest.mark.parametrize(
    ("config", "name", "message"),
    [
        (SynapseConfig.actr(), "boost", "boost is a constant of the published rule, not of this"),
        (SynapseConfig.published(), "keep_bonus", "keep_bonus is a constant of the actr rule"),
        (SynapseConfig(), "keep_bonnus", "unknown configuration field 'keep_bonnus'"),
        (
            SynapseConfig(),
            "learning.keep_bonus",
            "unknown configuration field 'learning.keep_bonus'",
        ),
        (SynapseConfig(), "rule", "unknown configuration field 'rule'"),
        (SynapseConfig(), "recall", "unknown configuration field 'recall'"),
    ],
)
def test_a_name_that_is_no_field_of_this_config_is_refused_by_name(
    config: SynapseConfig, name: str, message: str
) -> None:
    with pytest.raises(InvalidValueError, match=message):
        config.value(name)
    with pytest.raises(InvalidValueError, match=message):
        config.replace(**{name: 1})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Learning(learning_rate=-0.1), "learning_rate must be a finite number >= 0"),
        (lambda: Learning(use_history=0), "use_history must be an integer >= 1, got 0"),
        (lambda: Spreading(hub_degree=0), "hub_degree must be an integer >= 1, got 0"),
        (lambda: ActrRule(seeds=0), "seeds must be an integer >= 1, got 0"),
        (lambda: ActrRule(association_hops=3), "association_hops must be 1 or 2, got 3"),
        (lambda: PublishedRule(max_inject=-1), "max_inject must be an integer >= 0, got -1"),
        (lambda: Operations(busy_timeout_s=0.0), "busy_timeout_s must be a finite number > 0"),
        (lambda: Operations(busy_timeout_s=1e308), r"busy_timeout_s must be at most 2,147,483 s"),
        (
            lambda: Operations(event_ids_kept_days=0),
            "event_ids_kept_days must be a finite number > 0, got 0",
        ),
        (
            lambda: Operations(event_ids_kept_days=math.nan),
            "event_ids_kept_days must be a finite number > 0, got nan",
        ),
        (
            lambda: Learning(half_life_bounds=(1e-7, 120.0)),
            r"half_life_bounds\[0\] must be in \[1e-06, 1e\+06\] days, got 1e-07",
        ),
        (
            lambda: Learning(
                half_life_days={"personal": 1e7, "branch": 30, "shared": 60, "ephemeral": 1}
            ),
            r"half_life_days\['personal'\] must be in \[1e-06, 1e\+06\] days, got 10000000.0",
        ),
        (lambda: SynapseConfig.recency(min_association=0.5), "min_association applies under"),
    ],
)
def test_each_group_checks_its_own_fields_with_the_same_messages(make: Any, message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        make()
    with pytest.raises(InvalidTypeError, match=r"event_ids_kept_days must be .+ got '30'"):
        Operations(event_ids_kept_days="30")  # no number: a type error


@pytest.mark.parametrize(
    "make",
    [
        lambda: SynapseConfig(injection_enabled="no"),
        lambda: SynapseConfig().replace(injection_enabled=0),
        lambda: ActrRule(require_association="yes"),
        lambda: Operations(pause_collector=None),
    ],
)
def test_a_flag_that_is_not_a_bool_is_refused_by_name(make: Any) -> None:
    # "no" is truthy: taken as it is, it would turn injection on
    with pytest.raises(
        InvalidTypeError,
        match=r"(injection_enabled|require_association|pause_collector) must be a bool",
    ):
        make()


def test_a_group_of_the_wrong_type_is_refused_by_name() -> None:
    published: Any = PublishedRule()
    learning: Any = Learning()
    with pytest.raises(InvalidTypeError, match="learning must be a Learning, got PublishedRule"):
        SynapseConfig(learning=published)
    with pytest.raises(TypeError, match="recall must be an ActrRule or a PublishedRule"):
        SynapseConfig(recall=learning)


def test_the_flat_view_has_every_field_once_and_the_rule() -> None:
    flat = SynapseConfig.published().flat()
    assert next(iter(flat)) == "rule" and flat["rule"] == "published"
    assert (flat["seeds"], flat["boost"], flat["spread_rate"]) == (3, 0.3, 0.6)
    assert "keep_bonus" not in flat  # a constant of the other rule
    groups = (Learning(), PublishedRule(), Spreading(), Operations())
    expected = 1 + sum(sum(f.init for f in dataclasses.fields(g)) for g in groups) + 2
    assert len(flat) == expected


BAD_SHAPES = [
    (lambda: Learning(half_life_bounds=(5,)), InvalidValueError, "must be a pair"),
    (lambda: Learning(half_life_bounds=5), InvalidValueError, "must be a pair"),
    (lambda: Learning(half_life_bounds=(3, 60, 90)), InvalidValueError, "must be a pair"),
    (lambda: Learning(half_life_days=None), InvalidTypeError, "half_life_days must be a map"),
    (
        lambda: Learning(half_life_days={**Learning().half_life_days, "branch:main": 5.0}),
        InvalidValueError,
        r"keys no namespace reads: \['branch:main'\]",
    ),
    (lambda: Learning(use_history=10**12), InvalidValueError, "use_history must be at most 1,"),
    (lambda: Learning(recent_events=10**9), InvalidValueError, "recent_events must be at most"),
    (lambda: SynapseConfig(merge_weights=None), InvalidTypeError, "merge_weights must be a map"),
    (lambda: SynapseConfig().value(5), InvalidTypeError, "a field's name must be a str"),
    (lambda: ContextConfig(consolidation_ages=5), InvalidValueError, "consolidation_ages must"),
    (
        lambda: SynapseStore(":memory:").rename("a", "b", namespaces=5),
        InvalidTypeError,
        "namespaces must be a str, an iterable of str or None, got int 5",
    ),
]


@pytest.mark.parametrize(("make", "error", "message"), BAD_SHAPES)
def test_a_config_of_the_wrong_shape_is_refused_by_name(
    make: Any, error: type[Exception], message: str
) -> None:
    # each was a raw IndexError, TypeError or AttributeError, or was accepted and ignored
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"max_inject": 3},
            r"write SynapseConfig\(\)\.replace\(max_inject=\.\.\.\) or a preset, "
            r"SynapseConfig\.actr\(max_inject=\.\.\.\) \(the field is config\.recall\.max_inject\)",
        ),
        ({"keep_bonus": 2.0}, r"config\.recall\.keep_bonus"),
        ({"refresh_interval_s": 0.0}, r"config\.operations\.refresh_interval_s"),
        ({"no_such_field": 1}, r"has no argument 'no_such_field'\Z"),
    ],
)
def test_a_field_given_bare_is_refused_saying_where_it_went(
    given: dict[str, object], says: str
) -> None:
    # a new user's probe: the changelog's own SynapseConfig(max_inject=3) raised a bare
    # TypeError ("unexpected keyword argument"), naming neither the group nor the fix
    with pytest.raises(InvalidTypeError, match=says):
        SynapseConfig(**given)


@pytest.mark.parametrize(
    "config",
    [
        SynapseConfig(),
        SynapseConfig.published(),
        SynapseConfig.actr(max_inject=3).replace(merge_weights={"personal": 1.0, "shared": 0.2}),
    ],
)
def test_a_config_pickles_and_copies_whole_and_stays_read_only(config: SynapseConfig) -> None:
    # its read-only mappings were MappingProxyType: "cannot pickle 'mappingproxy' object"
    import copy
    import pickle

    for again in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config), copy.copy(config)):
        assert again == config and type(again.merge_weights) is type(config.merge_weights)
    with pytest.raises(TypeError):
        config.merge_weights["personal"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError):
        config.learning.half_life_days["shared"] = 1.0  # type: ignore[index]


def test_a_subclass_with_an_init_of_its_own_takes_its_own_arguments() -> None:
    class Tagged(SynapseConfig):
        def __init__(self, tag: str = "", **given: Any) -> None:
            super().__init__(**given)
            object.__setattr__(self, "tag", tag)

    assert Tagged(tag="u").tag == "u"  # type: ignore[attr-defined]


def test_a_dataclass_subclass_is_told_where_a_bare_field_went() -> None:
    @dataclasses.dataclass(frozen=True)
    class Tagged(SynapseConfig):
        tag: str = ""

    assert Tagged(tag="u").tag == "u"
    with pytest.raises(InvalidTypeError, match=r"config\.recall\.max_inject"):
        Tagged(max_inject=3)  # type: ignore[call-arg]
