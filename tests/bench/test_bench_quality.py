"""The quality benchmark: metrics worked by hand, rows, and a run on a generated history."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from git_history import BASE, DAY, commit, init, make_mixed_project, make_project

from synapse_retriever import SynapseConfig, SynapseStore
from synapse_retriever.bench.methods import (
    ActrPrior,
    CoChange,
    Oracle,
    Query,
    Recency,
    Synapse,
    build_rows,
)
from synapse_retriever.bench.metrics import (
    displace,
    hit_at_k,
    ndcg_at_k,
    oracle_share,
    paired_bootstrap_ci,
    recall_at_k,
)
from synapse_retriever.bench.quality import (
    QualitySettings,
    markdown_tables,
    run_quality,
    run_several,
)
from synapse_retriever.bench.retrievers import Bm25Retriever, Document, TfidfRetriever, tokenize
from synapse_retriever.capture.gitlog import Commit
from synapse_retriever.conversation.minilm import MiniLmUnavailableError, minilm_files
from synapse_retriever.errors import InvalidValueError
from synapse_retriever.learning.usage import base_level

# -- metrics -----------------------------------------------------------------------------


def test_recall_and_hit_at_k() -> None:
    ranked = ["x", "a", "y", "b", "z", "c"]
    relevant = {"a", "b", "c", "d"}
    # top-5 holds a and b: 2 of 4 relevant
    assert recall_at_k(ranked, relevant, 5) == 0.5
    # top-6 adds c: 3 of 4
    assert recall_at_k(ranked, relevant, 6) == 0.75
    assert hit_at_k(ranked, relevant, 1) == 0.0
    assert hit_at_k(ranked, relevant, 2) == 1.0
    assert recall_at_k(ranked, set(), 5) == 0.0


def test_ndcg_at_k_worked_by_hand() -> None:
    # relevant {a, b, c}; ranks 2 and 4 hit: DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068
    # = 1.06161; ideal (3 relevant, k = 5) = 1 + 0.63093 + 0.5 = 2.13093; nDCG = 0.49819
    assert ndcg_at_k(["x", "a", "y", "b", "z"], {"a", "b", "c"}, 5) == pytest.approx(
        0.49819, abs=1e-5
    )
    # only k slots count in the ideal: one relevant at rank 1 of k = 1 is perfect
    assert ndcg_at_k(["a", "b"], {"a", "b", "c"}, 1) == 1.0
    assert ndcg_at_k(["x", "y"], {"a"}, 2) == 0.0


def test_displace_fills_the_weakest_slots_and_keeps_one() -> None:
    assert displace(["a", "b", "c", "d"], ["x", "y"]) == ["a", "b", "x", "y"]
    assert displace(["a", "b", "c", "d"], ["x"]) == ["a", "b", "c", "x"]
    assert displace(["a", "b"], ["x", "y"]) == ["a", "x"]
    assert displace(["a", "b", "c"], []) == ["a", "b", "c"]


def test_oracle_share() -> None:
    # vector 0.40, method 0.43, oracle 0.52: 0.03 of a possible 0.12
    assert oracle_share(0.43, 0.40, 0.52) == 0.25
    assert oracle_share(0.38, 0.40, 0.50) == -0.2
    assert oracle_share(0.5, 0.4, 0.4) is None


def test_paired_bootstrap_is_reproducible_and_brackets_the_mean() -> None:
    deltas = [0.5, 0.0, 0.0, 0.25, -0.25, 0.5, 0.0, 0.0]  # mean 0.125
    low, high = paired_bootstrap_ci(deltas)
    assert (low, high) == paired_bootstrap_ci(deltas)
    assert -0.25 <= low < 0.125 < high <= 0.5
    assert paired_bootstrap_ci([]) == (0.0, 0.0)
    # a bigger sample of the same differences narrows the interval
    low8, high8 = paired_bootstrap_ci(deltas * 8)
    assert high8 - low8 < high - low


# -- retrievers --------------------------------------------------------------------------


def _docs() -> list[Document]:
    return [Document("a.py", "1", lambda: "alpha beta"), Document("b.py", "2", lambda: "beta")]


def test_tokenize_splits_identifiers() -> None:
    assert tokenize("parseHTTPResponse get_user_by_id v2 the") == [
        "parse",
        "http",
        "response",
        "get",
        "user",
        "id",
    ]  # "by" and "the" are stop words, "v" too short, "2" a number


def test_tfidf_cosine_worked_by_hand() -> None:
    retriever = TfidfRetriever()
    retriever.fit(_docs())
    # a.py = {py, alpha, beta}, b.py = {py, beta}; N = 2
    # idf: py = beta = ln(3/3) + 1 = 1, alpha = ln(3/2) + 1 = 1.405465
    # |a.py| = sqrt(1 + 1.405465² + 1) = 1.993823; query "alpha" = 1.405465 × e_alpha
    # cos = 1.405465² / (1.405465 × 1.993823) = 0.704910; b.py scores 0 and fills the slot
    hits = retriever.search("alpha", _docs(), k=2)
    assert [path for path, _ in hits] == ["a.py", "b.py"]
    assert hits[0][1] == pytest.approx(0.704910, abs=1e-6)
    assert hits[1][1] == 0.0


def test_bm25_worked_by_hand() -> None:
    retriever = Bm25Retriever()
    retriever.fit(_docs())
    # lengths 3 and 2, average 2.5; idf(alpha) = ln(1 + (2 - 1 + 0.5) / 1.5) = ln 2 = 0.693147
    # a.py: 0.693147 × 1 × 2.2 / (1 + 1.2 × (0.25 + 0.75 × 3 / 2.5)) = 1.524924 / 2.38 = 0.640724
    hits = retriever.search("alpha alpha", _docs(), k=1)
    assert hits == [("a.py", pytest.approx(0.640724, abs=1e-6))]


def test_retrievers_break_ties_by_path_and_read_each_blob_once() -> None:
    reads: list[str] = []

    def doc(path: str) -> Document:
        return Document(path, path, lambda: reads.append(path) or "same words")

    docs = [doc("z.py"), doc("m.py"), doc("b.py")]
    for retriever in (TfidfRetriever(), Bm25Retriever()):
        retriever.fit(docs)
        assert [p for p, _ in retriever.search("words", docs, k=3)] == ["b.py", "m.py", "z.py"]
        retriever.search("same", docs, k=3)
    assert sorted(reads) == ["b.py", "b.py", "m.py", "m.py", "z.py", "z.py"]  # once per retriever


# -- rows --------------------------------------------------------------------------------

HITS = [("s1", 0.9), ("s2", 0.8), ("s3", 0.7), ("w1", 0.2), ("w2", 0.1)]
EVERYTHING = frozenset({"s1", "s2", "s3", "w1", "w2", "p", "q", "r", "old"})


def _commit(sha: str, day: float, *files: str) -> Commit:
    return Commit(sha, (), BASE + day * DAY, BASE + day * DAY, "msg", files)


def _query(day: float, *relevant: str) -> Query:
    return Query("q", BASE + day * DAY, frozenset(relevant), EVERYTHING)


def test_co_change_takes_the_top_hits_most_frequent_partners() -> None:
    row = CoChange()
    for sha, files in [
        ("1", ("s1", "p")),
        ("2", ("s1", "q", "p")),
        ("3", ("s2", "r")),
        ("4", ("s1", "s2")),
    ]:
        row.observe(_commit(sha, 0, *files))
    # s1's partners: p twice, q once, s2 once (present): p then q take the two weakest slots
    assert row.rerank(_query(1), HITS) == ["s1", "s2", "s3", "p", "q"]


def test_recency_takes_the_latest_files_whatever_the_query() -> None:
    row = Recency()
    row.observe(_commit("1", 0, "old", "r"))
    row.observe(_commit("2", 1, "p", "s1"))  # s1 is present already
    assert row.rerank(_query(2, "w1"), HITS) == ["s1", "s2", "s3", "p", "old"]


def test_actr_prior_weighs_frequency_against_recency() -> None:
    # p used 1 day before the query: B = ln(1^-0.5) = 0
    # q used 4 and 9 days before: B = ln(0.5 + 0.3333) = -0.1823, so p ranks first
    assert base_level([BASE - DAY], BASE) == 0.0
    assert base_level([BASE - 4 * DAY, BASE - 9 * DAY], BASE) == pytest.approx(math.log(5 / 6))
    # a third use 16 days before: B = ln(0.5 + 0.3333 + 0.25) = +0.0800, q now beats p
    assert base_level([BASE - 4 * DAY, BASE - 9 * DAY, BASE - 16 * DAY], BASE) == pytest.approx(
        math.log(13 / 12)
    )
    row = ActrPrior()  # the same numbers, the query on day 13
    row.observe(_commit("1", 4, "q"))
    row.observe(_commit("2", 9, "q"))
    row.observe(_commit("3", 12, "p"))
    row.observe(_commit("4", 13, "s1"))  # present: never a newcomer
    assert row.rerank(_query(13, "w1"), HITS) == ["s1", "s2", "s3", "p", "q"]
    row.observe(_commit("5", -3, "q"))
    assert row.rerank(_query(13, "w1"), HITS) == ["s1", "s2", "s3", "q", "p"]


def test_oracle_fills_weak_slots_with_relevant_files_only() -> None:
    oracle = Oracle()
    # w2 is relevant and stays; one relevant absent file takes w1's slot
    assert oracle.rerank(_query(0, "w2", "p"), HITS) == ["s1", "s2", "s3", "p", "w2"]
    assert oracle.rerank(_query(0, "q", "p"), HITS) == ["s1", "s2", "s3", "p", "q"]
    assert oracle.rerank(_query(0, "s1"), HITS) == [node for node, _ in HITS]
    reachable = Oracle(lambda query, hits: {"q"}, name="oracle-reachable")
    assert reachable.rerank(_query(0, "q", "p"), HITS) == ["s1", "s2", "s3", "q", "w2"]


def test_synapse_row_recalls_through_the_store_and_explains_misses() -> None:
    row = Synapse(SynapseConfig.published())  # energies, seeds and threshold: the published rule
    for sha in ("1", "2", "3"):
        row.observe(_commit(sha, 0, "s1", "p"))  # w = 0.9: energy 0.54 from seed s1
    row.observe(_commit("4", 0, "q", "r"))  # q is in the graph but unreachable from the seeds
    row.observe(_commit("5", 0, "p"))  # one file: no event
    query = Query("q", BASE, frozenset({"p", "q", "old", "w1"}), EVERYTHING)
    assert row.rerank(query, HITS) == ["s1", "s2", "s3", "w1", "p"]
    assert row.last_misses.as_dict() == {
        "unseen": 1,  # old
        "unreached": 1,  # q
        "below_threshold": 0,
        "outranked": 0,
        "recalled": 1,  # p
    }
    # only files of the query's tree can be injected
    assert row.rerank(Query("q", BASE, frozenset({"p"}), frozenset({"s1"})), HITS) == [
        n for n, _ in HITS
    ]
    row.close()


def test_synapse_row_matches_store_recall() -> None:
    row = Synapse()
    row.observe(_commit("1", 0, "s2", "p", "q"))
    with SynapseStore(":memory:") as store:
        store.reinforce(["s2", "p", "q"], namespace="shared", at=BASE)
        expected = [h.id for h in store.recall(HITS, at=BASE + DAY, active_namespace="shared")]
    assert row.rerank(_query(1), HITS) == expected


def test_build_rows_shares_one_graph_and_rejects_unknown_rows() -> None:
    rows = build_rows(["oracle-reachable"])
    rows[0].observe(_commit("1", 0, "s1", "p"))  # no synapse row: the oracle teaches its graph
    assert rows[0].rerank(_query(1, "p", "q"), HITS) == ["s1", "s2", "s3", "p", "w2"]
    with pytest.raises(KeyError, match="nope"):
        build_rows(["vector", "nope"])


# -- the benchmark on a generated history --------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("bench") / "project")


@pytest.fixture(scope="module")
def report(project: Path) -> dict[str, object]:
    phases: set[str] = set()
    result = run_quality(project, progress=lambda phase, done, total: phases.add(phase))
    assert phases == {"vector search", "frozen", "online"}
    return result


def _row(report: dict, variant: str, k: int, name: str) -> dict:  # type: ignore[type-arg]
    return report["variants"][variant]["by_k"][str(k)]["rows"][name]  # type: ignore[no-any-return]


def test_split_and_queries(report: dict) -> None:  # type: ignore[type-arg]
    # 18 single-file commits and 30 feature commits: 48 events, 38 teach (80%), 10 test
    assert report["commits"]["read"] == 48
    assert (report["commits"]["teach"], report["commits"]["test"]) == (38, 10)
    assert report["commits"]["queries"] == 10
    json.dumps(report)  # JSON-ready


def test_vector_finds_the_named_file_and_synapse_its_partner(report: dict) -> None:  # type: ignore[type-arg]
    for variant in ("frozen", "online"):
        vector = _row(report, variant, 5, "vector")
        synapse = _row(report, variant, 5, "synapse-published")
        # each query's message matches one of its two files, at rank 1: recall 1/2;
        # nDCG = 1 / (1 + 1/log2(3)) = 1 / 1.63093 = 0.61315
        assert (vector["recall"], vector["hit"]) == (0.5, 1.0)
        assert vector["ndcg"] == pytest.approx(0.61315, abs=1e-5)
        # the graph injects the partner into the weakest slot (rank 5):
        # nDCG = (1 + 1/log2(6)) / 1.63093 = 1.38685 / 1.63093 = 0.85034
        assert synapse["recall"] == 1.0
        assert synapse["ndcg"] == pytest.approx(0.85034, abs=1e-5)
        assert (synapse["improved"], synapse["worse"], synapse["oracle_share"]) == (10, 0, 1.0)
        assert synapse["delta_recall_ci95"] == [0.5, 0.5]
        # the oracle uses the better of the two weak slots (rank 4):
        # (1 + 1/log2(5)) / 1.63093 = 1.43068 / 1.63093 = 0.87722
        assert _row(report, variant, 5, "oracle")["ndcg"] == pytest.approx(0.87722, abs=1e-5)
    # the actr row, online at k = 10: the partner of the queried feature was used long
    # ago, the files of the latest features are stronger on recency alone; association
    # with the query's hit (the first, which carries most of the source weight) brings
    # the partner back in all 10 queries
    misses = report["variants"]["online"]["by_k"]["10"]["synapse_misses"]
    assert misses == {
        "unseen": 0,
        "unreached": 0,
        "below_threshold": 0,
        "outranked": 0,
        "recalled": 10,
    }
    # its query-blind twin only has recency: it recalls none of them
    assert _row(report, "online", 10, "synapse-blind")["improved"] == 0
    # without the log-lift the partner is still a candidate (a neighbour of the hit) but
    # only its old uses speak for it: it does no better than the twin
    assert _row(report, "online", 10, "synapse-nolift")["improved"] == 0


def test_recency_depends_on_the_variant(report: dict) -> None:  # type: ignore[type-arg]
    # online, the previous commit is always another feature: nothing gained
    assert _row(report, "online", 10, "recency")["recall"] == 0.5
    # frozen, the files of the last teaching commit (db) help the 3 db queries of 10:
    # (3 × 1.0 + 7 × 0.5) / 10 = 0.65
    assert _row(report, "frozen", 10, "recency")["recall"] == pytest.approx(0.65)
    assert _row(report, "frozen", 10, "recency")["improved"] == 3


def test_markdown_tables(report: dict) -> None:  # type: ignore[type-arg]
    text = markdown_tables(report)
    assert "| synapse-published | 100.0 | +50.0 [+50.0, +50.0] | 85.0 | 100.0 | 10/0 |" in text
    assert text.count("| row |") == 2


def test_precision_columns(report: dict) -> None:  # type: ignore[type-arg]
    for variant in ("frozen", "online"):
        vector = _row(report, variant, 5, "vector")
        assert (vector["injected"], vector["displaced"]) == (0, 0)
        assert vector["injected_precision"] is None and vector["queries_unneeded"] == 0.0
        # the published rule injects each query's partner, once, into the weakest slot: every
        # injection relevant; it displaces a filler (never relevant)
        published = _row(report, variant, 5, "synapse-published")
        assert (published["injected"], published["injected_precision"]) == (10, 1.0)
        assert (published["displaced"], published["displaced_relevant"]) == (10, 0.0)
        assert published["queries_unneeded"] == 0.0
        assert "off_topic" not in published  # one history: no other project
    # the recency row fills both weak slots with the latest commit's files: online, never
    # the query's (20 injections, none relevant, every query given one it did not need)
    recency = _row(report, "online", 10, "recency")
    assert (recency["injected"], recency["injected_precision"]) == (20, 0.0)
    assert recency["queries_unneeded"] == 1.0
    text = markdown_tables(report)
    assert "| inj. relevant@10 | displ. relevant@10 | q. unneeded@10 |" in text


@pytest.fixture(scope="module")
def several(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    # two projects, the second's commits twelve hours after the first's every day: one
    # store learns both, interleaved in time (their files named alpha/... and beta/...)
    folder = tmp_path_factory.mktemp("several")
    alpha = make_project(folder / "alpha")
    beta = make_project(folder / "beta", start=BASE + DAY // 2)
    reports = {}
    for name, config in (("default", SynapseConfig()), ("recency", SynapseConfig.recency())):
        settings = QualitySettings(
            config=config, rows=("synapse", "synapse-blind", "recency", "oracle")
        )
        reports[name] = run_several([alpha, beta], settings)
    return reports


def test_several_histories_in_one_store(several: dict) -> None:  # type: ignore[type-arg]
    report = several["default"]
    assert report["name"] == "alpha + beta" and report["projects"] == ["alpha", "beta"]
    # 96 events merged by time: 76 teach, 20 test (the last 10 of each, interleaved)
    assert (report["commits"]["teach"], report["commits"]["test"]) == (76, 20)
    assert report["commits"]["queries"] == 20
    json.dumps(report)
    for variant in ("frozen", "online"):
        vector = _row(report, variant, 10, "vector")
        assert vector["off_topic"] is None and vector["queries_off_topic"] == 0.0
        # the default injects only what is associated with a hit: its own partner
        synapse = _row(report, variant, 10, "synapse")
        assert synapse["off_topic"] == 0.0 and synapse["queries_off_topic"] == 0.0
        assert synapse["recall"] == 1.0 and synapse["injected_precision"] == 1.0
        # the query-blind recency baseline takes the other project's latest files too
        assert _row(report, variant, 10, "recency")["queries_off_topic"] > 0
    text = markdown_tables(report)
    assert "| inj. off topic@10 | q. off topic@10 |" in text


def test_the_recency_preset_injects_off_topic_files(several: dict) -> None:  # type: ignore[type-arg]
    default = _row(several["default"], "online", 10, "synapse")
    recency = _row(several["recency"], "online", 10, "synapse")
    # the other project's latest files, used twelve hours before the query, beat the
    # never-used fillers on base level alone: the prior injects them, the gate never
    assert recency["queries_off_topic"] > 0 and recency["off_topic"] > 0
    assert default["queries_off_topic"] == 0.0
    assert recency["injected_precision"] < default["injected_precision"]


def test_on_two_noisier_histories_the_gate_keeps_recall_and_injects_nothing_off_topic(
    tmp_path: Path,
) -> None:
    # two generated projects interleaved in time (docs/benchmarks/quality.md measures on these)
    alpha = make_mixed_project(tmp_path / "alpha", seed=1)
    beta = make_mixed_project(tmp_path / "beta", seed=2, start=BASE + 3 * 3600)
    rows = {}
    for name, config in (("default", SynapseConfig()), ("recency", SynapseConfig.recency())):
        settings = QualitySettings(config=config, rows=("synapse",), variants=("online",))
        report = run_several([alpha, beta], settings)
        rows[name] = report["variants"]["online"]["by_k"]["10"]["rows"]
    default, recency = rows["default"]["synapse"], rows["recency"]["synapse"]
    assert default["off_topic"] == 0.0 and default["queries_off_topic"] == 0.0
    assert recency["off_topic"] > 0.0 and recency["queries_off_topic"] > 0.0
    assert default["recall"] >= recency["recall"] > rows["default"]["vector"]["recall"]
    assert default["injected_precision"] > recency["injected_precision"]


def test_several_histories_are_validated(project: Path) -> None:
    with pytest.raises(InvalidValueError, match="two or more distinct names"):
        run_several([project], QualitySettings())
    with pytest.raises(InvalidValueError, match="two or more distinct names"):
        run_several([project, project], QualitySettings())


def test_settings_are_validated() -> None:
    with pytest.raises(InvalidValueError, match="split"):
        QualitySettings(split=1.0)
    with pytest.raises(InvalidValueError, match="unknown retriever"):
        QualitySettings(retriever="dense")
    with pytest.raises(InvalidValueError, match="unknown rows"):
        QualitySettings(rows=("vector", "magic"))
    with pytest.raises(InvalidValueError, match="at least 2"):
        QualitySettings(ks=(1,))


def test_too_short_histories_are_refused(tmp_path: Path) -> None:
    repo = init(tmp_path / "short")
    commit(repo, "one", {"a.py": "a\n", "b.py": "b\n"}, at=BASE)
    with pytest.raises(InvalidValueError, match="too few to split"):
        run_quality(repo)
    commit(repo, "two", {"c.py": "c\n"}, at=BASE + DAY)  # the only test commit adds a file
    with pytest.raises(InvalidValueError, match="nothing to query"):
        run_quality(repo)


def test_bm25_and_a_subset_of_rows(project: Path) -> None:
    settings = QualitySettings(
        retriever="bm25", rows=("synapse-published",), variants=("online",), ks=(5,)
    )
    result = run_quality(project, settings)
    rows = result["variants"]["online"]["by_k"]["5"]["rows"]
    assert list(rows) == ["vector", "synapse-published"]  # the baseline is always scored
    assert rows["synapse-published"]["recall"] == 1.0


def test_the_dense_retriever_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from synapse_retriever.bench import retrievers

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real(name)
    )
    with pytest.raises(MiniLmUnavailableError, match=r"needs onnxruntime .*\[minilm\]"):
        retrievers.MiniLmRetriever()


def test_the_dense_retriever_ranks_by_meaning(tmp_path: Path) -> None:
    from synapse_retriever.bench import retrievers

    minilm_files()  # installed by the dev requirements (synapse-retriever[minilm])
    docs = [
        Document("auth/jwt.py", "1", lambda: "def verify_token(token): check the signature"),
        Document("docs/cooking.md", "2", lambda: "How to bake bread with flour and yeast"),
    ]
    retriever = retrievers.MiniLmRetriever(cache_dir=str(tmp_path))
    retriever.fit(docs)
    assert [p for p, _ in retriever.search("validate authentication tokens", docs, 2)] == [
        "auth/jwt.py",
        "docs/cooking.md",
    ]
    assert len(list(tmp_path.iterdir())) == 2  # one cached embedding per content
    vectors = retriever.embed(["a", "b"])
    assert vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_the_published_and_query_blind_twin_rows(report: dict) -> None:  # type: ignore[type-arg]
    rows = report["variants"]["online"]["by_k"]["5"]["rows"]
    assert {"synapse", "synapse-published", "synapse-blind", "synapse-nolift"} <= set(rows)
    assert report["settings"]["config"]["rule"] == "actr"
