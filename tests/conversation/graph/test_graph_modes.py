"""Mode detection on a table of queries; blend weights by mode."""

from __future__ import annotations

import pytest

from synapse_retriever.conversation.graph.modes import canonical_mode, detect_mode, mode_weights
from synapse_retriever.errors import InvalidTypeError, InvalidValueError

QUERIES = [
    ("Why did we change the retry policy?", "analytical"),
    ("What caused the outage on Tuesday?", "analytical"),
    ("How did we fix the login bug?", "analytical"),
    ("What led to the decision to drop Redis?", "analytical"),
    ("Why is the build failing?", "analytical"),
    ("What was the root cause of the memory leak?", "analytical"),
    ("Which commit broke the parser?", "analytical"),
    ("Can you explain the trade-offs we discussed?", "analytical"),
    ("What did we decide about the API versioning?", "analytical"),
    ("When did we agree to move deploys to Friday?", "analytical"),
    ("What is the difference between the two caching approaches?", "analytical"),
    ("Walk me through the steps to reproduce the error.", "analytical"),
    ("How did you debug the race condition?", "analytical"),
    ("What went wrong with the migration?", "analytical"),
    ("Any ideas for the launch party?", "creative"),
    ("What if we used SQLite instead?", "creative"),
    ("Let's brainstorm names for the new feature.", "creative"),
    ("Imagine a dashboard for non-technical users.", "creative"),
    ("Can you suggest some alternatives to Kafka?", "creative"),
    ("I need inspiration for the blog post.", "creative"),
    ("How about a fun theme for the offsite?", "creative"),
    ("Could we explore other possibilities for the logo?", "creative"),
    ("Come up with new ways to onboard users.", "creative"),
    ("Something similar to what Stripe did would be nice.", "creative"),
    ("Thanks, that works.", "conversational"),
    ("Good morning!", "conversational"),
    ("I'll be out of office tomorrow.", "conversational"),
    ("Sounds good to me.", "conversational"),
    ("Can you summarize the meeting notes?", "conversational"),
    ("Please send the report to Anna.", "conversational"),
    ("What time is the standup?", "conversational"),
    ("Ideas are welcome, but why did the last one fail so badly?", "analytical"),  # 2 vs 1
]


@pytest.mark.parametrize(("query", "mode"), QUERIES)
def test_detect_mode_on_a_table_of_queries(query: str, mode: str) -> None:
    assert detect_mode(query) == mode


def test_the_table_is_large_enough_and_covers_every_mode() -> None:
    assert len(QUERIES) >= 30
    assert {mode for _, mode in QUERIES} == {"analytical", "creative", "conversational"}


@pytest.mark.parametrize(
    ("mode", "weights"),
    [
        ("analytical", (0.3, 0.7)),
        ("creative", (0.7, 0.3)),
        ("exploratory", (0.7, 0.3)),
        ("conversational", (0.5, 0.5)),
        ("balanced", (0.5, 0.5)),
    ],
)
def test_mode_weights_as_the_design_gives_them(mode: str, weights: tuple[float, float]) -> None:
    assert mode_weights(mode) == weights
    assert sum(mode_weights(mode)) == pytest.approx(1.0)


def test_an_unknown_mode_is_named_in_the_error() -> None:
    with pytest.raises(InvalidValueError, match="got 'angry'"):
        canonical_mode("angry")
    with pytest.raises(InvalidTypeError, match="got NoneType None"):
        canonical_mode(None)  # type: ignore[arg-type]


def test_a_model_can_name_the_mode_and_junk_falls_back_to_the_cue_words() -> None:
    from synapse_retriever.conversation.graph.modes import PromptModeDetector

    asked: list[str] = []

    def model(prompt: str) -> str:
        asked.append(prompt)
        return "I would say: EXPLORATORY."

    assert PromptModeDetector(model).mode("Tell me about the outage") == "creative"
    assert "Question: Tell me about the outage" in asked[0]
    assert PromptModeDetector(lambda p: "").mode("Why did it fail?") == "analytical"
    assert PromptModeDetector(lambda p: None).mode("Thanks!") == "conversational"  # type: ignore[arg-type,return-value]
