"""The hybrid relevance scorer (pipeline/learn.py, pipeline/decide.py): the shipped model,
the reader's profile, and learning from `mark`, through the real CLI where a reader would use it."""

from __future__ import annotations

import io
import json
import math
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pipeline import config, decide, grams, learn, rank, store_readers
from pipeline.status import read_labels
from tests import backends
from tests.helpers import full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).with_name("data") / "relevance_sample.jsonl"
OUTSIDE = Path(__file__).with_name("data") / "relevance_outside.jsonl"
DAY = datetime(2026, 10, 29, 12, tzinfo=UTC)


@pytest.fixture(scope="module")
def relevance():
    return config.load(REPO / "config.yaml").relevance


def decided(relevance, title: str, abstract: str, authors=(), model=None) -> rank.Score:
    rule = rank.score(title, abstract, rank.compile_rules(relevance))
    return decide.decide(title, abstract, authors, rule, model or learn.shipped(),
                         decide.Profile.compile(relevance))


# --- hand-written cases -----------------------------------------------------------------

def test_a_paper_the_rule_negates_stays_out(relevance):
    """The text model reads "reasoning" and "GRPO" and likes it; the rule reads the negation,
    and the average follows the rule."""
    title = "Distilled Reasoning Traces Make Small Language Models Strong Math Solvers"
    abstract = ("We improve small language models on math word problems by supervised fine-tuning on "
                "distilled reasoning traces. We use plain imitation instead of reinforcement learning "
                "with GRPO. The resulting 1.5B model matches larger models on GSM8K.")
    rule = rank.score(title, abstract, rank.compile_rules(relevance))
    assert {"negated: reinforcement learning", "negated: grpo"} <= set(rule.reasons)
    assert rule.value == 0
    result = decided(relevance, title, abstract)
    assert not result.relevant
    assert 0 <= result.value < learn.shipped().threshold
    assert learn.shipped().text.probability(title, abstract) > 0.5  # alone, the text model keeps it


def test_an_llm_trained_policy_without_rl_in_the_title_comes_in(relevance):
    title = "Self-Improving Code Agents from Execution Feedback"
    abstract = ("We fine-tune a large language model agent with PPO, using the outcome of unit tests "
                "as the reward. The policy learns to write, run and repair programs over multiple "
                "turns, and the trained LLM improves pass@1 on SWE-bench by 12 points.")
    result = decided(relevance, title, abstract)
    assert result.relevant
    assert any("ppo" in reason.lower() for reason in result.reasons)  # the rule's reasons stay
    # relevance.model false: the rule alone, its value and verdict as they are
    rule = rank.score(title, abstract, rank.compile_rules(relevance))
    assert decide.decide(title, abstract, (), rule, None, decide.Profile.compile(relevance)) == rule
    assert rule.value == 1.0 and 0.5 < result.value < 0.6  # the hybrid's probability instead


def test_the_models_strongest_terms_name_what_it_read():
    terms = dict(learn.shipped().text.strongest(
        "GRPO for LLM reasoning", "We train a large language model with GRPO and verifiable rewards."))
    assert "grpo" in terms and terms["grpo"] > 0


def test_a_negation_covers_three_words_within_the_clause_only():
    found = learn.features("RL without a critic", "Trained without RL or GRPO, then tuned with PPO. "
                           "No-regret learning; not\tfine tuned")
    assert {"~a", "~critic", "~rl", "~or", "~grpo", "~fine", "~tuned"} <= set(found)
    assert {"then", "tuned", "ppo", "regret", "learning", "rl"} <= set(found)  # a comma or hyphen ends it
    assert found["rl"] == 2 and found["~rl"] == 1  # in the title, and negated in the abstract
    assert "without ~rl" in found and "~grpo then" in found


def test_scoring_many_papers_at_once_gives_each_papers_own_score():
    """The batch path (numpy, hashed grams) against the readable one (strings, per paper)."""
    model = learn.shipped().text
    sample = read_labels(SAMPLE)
    titles, abstracts = [r["title"] for r in sample] + ["", "GRPO"], [r["abstract"] for r in sample] + ["", ""]
    together = model.probabilities(titles, abstracts)
    for title, abstract, score in zip(titles, abstracts, together, strict=True):
        logit = model.intercept + sum(model.contributions(title, abstract).values())
        assert score == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-9)
        assert model.probability(title, abstract) == pytest.approx(score, abs=1e-12)
    assert model.probabilities([], []) == []


def test_the_gram_table_finds_every_gram_it_holds_and_nothing_else():
    names = [f"word{i}" for i in range(5000)] + [f"word{i} ~word{i + 1}" for i in range(5000)]
    table = grams.Table.build(grams.hash_grams(names))
    assert table.find(grams.hash_grams(names)).tolist() == list(range(len(names)))
    assert (table.find(grams.hash_grams(["word5000", "word1 word2", "~word1"])) == -1).all()


def test_the_grams_of_a_large_refit_hash_alike_in_little_memory():
    """A refit on 3,000 verdicts holds 300,000 grams (4 MB joined); hashing them at once took
    200 MB of prefix sums, on every command that scored with it."""
    import tracemalloc

    names = [f"{'~' if i % 3 == 0 else ''}word{i}" + (f" pair{i}" if i % 2 else "") for i in range(300_000)]
    joined = "\n".join(names)
    tracemalloc.start()
    hashes = grams.hash_joined(joined, "\n")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40e6
    pieces = [grams.hash_joined("\n".join(names[at:at + 10_000]), "\n") for at in range(0, len(names), 10_000)]
    assert np.array_equal(hashes, np.concatenate(pieces))
    assert grams.hash_grams(names[:3]).tolist() == hashes[:3].tolist()


# --- the shipped model --------------------------------------------------------------------

def test_the_shipped_model_loads_and_scores_as_the_training_run_recorded():
    model, check = learn.shipped(), learn.shipped_check()
    assert model.version == learn.version_of(model.to_dict())  # the file holds what was fitted
    assert len(model.text.terms) > 10_000
    assert 0 < model.text_weight < 1 and 0 < model.threshold < 1
    for row in check:
        assert round(model.text.probability(row["title"], row["abstract"]), 6) == row["text"]
    assert check[0]["text"] > 0.5 > check[1]["text"]


def test_a_saved_model_loads_back_the_same_and_saves_to_the_same_bytes(tmp_path):
    model = learn.build(learn.TextModel.of({"grpo": (2.0, 1.5), "~rl": (3.0, -0.5), "policy optimization":
                                            (2.5, 0.75)}, -1.25), 2.0, 0.9, 0.4, 0.45)
    check = [{"title": "GRPO", "abstract": "", "text": 0.5}]
    learn.save(model, tmp_path / "a.npz", check)
    with (tmp_path / "a.npz").open("rb") as handle:
        loaded, found = learn.load(handle)
    assert found == check
    assert loaded.to_dict() == model.to_dict() and loaded.version == model.version
    texts = (["GRPO without RL", "Policy optimization"], ["", "policy optimization"])
    assert loaded.text.probabilities(*texts) == model.text.probabilities(*texts)
    learn.save(loaded, tmp_path / "b.npz", check)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_a_refit_packs_with_its_taught_model_and_keeps_the_version_of_its_json():
    """The version of a refit of 12,000 grams is the hash of its JSON, though no JSON is made."""
    terms = {f"gram{i}": (1.0 + i / 7, (-1) ** i * i / 3) for i in range(12_000)}
    taught = learn.TextModel.of(dict(list(terms.items())[::2]), 0.5)
    model = learn.build(learn.TextModel.of(terms, -1.25), 2.0, 0.9, 0.4, 0.45, 3, taught)
    assert model.version == learn.version_of(model.to_dict())
    loaded, _ = learn.load(io.BytesIO(learn.pack(model)))
    assert loaded.to_dict() == model.to_dict() and loaded.version == model.version and loaded.verdicts == 3
    texts = (["gram1 and gram2", "gram4"], ["gram3", ""])
    assert loaded.decide(*texts, [0.5, 1.0]) == model.decide(*texts, [0.5, 1.0])


def test_the_shipped_files_are_small_and_inside_the_package():
    folder = REPO / "pipeline" / "data"
    for name in (learn.MODEL_FILE, learn.TRAIN_FILE):
        assert (folder / name).stat().st_size < 3_000_000, name
    rows = learn.training_rows()
    assert len(rows) > 2900 and {"title", "abstract", "label"} <= set(rows[0])


# --- labelled samples inside tests/ ------------------------------------------------------

def mistakes(relevance, sample: list[dict], model=None) -> tuple[set[str], set[str]]:
    """The ids the rule alone gets wrong, and those the hybrid gets wrong: `decide` of each
    paper, with the rules and the profile compiled once (compiling them for each of the 492
    papers was 5 s of the test)."""
    rules, profile, model = rank.compile_rules(relevance), decide.Profile.compile(relevance), model or learn.shipped()
    rule, hybrid = set(), set()
    for r in sample:
        score = rank.score(r["title"], r["abstract"], rules)
        if score.relevant != bool(r["label"]):
            rule.add(r["id"])
        if decide.decide(r["title"], r["abstract"], (), score, model, profile).relevant != bool(r["label"]):
            hybrid.add(r["id"])
    return rule, hybrid

def test_the_hybrid_does_no_worse_than_the_rule_on_a_labelled_sample_it_was_not_trained_on(relevance):
    """tests/data/relevance_sample.jsonl: the latest sixth of the dev papers by listing date
    (492, the block the benchmark's last time fold scores). The text model is refitted on the
    shipped rows without them, so they are held out. The rule and the hybrid make 28 errors
    each here, with the TF-IDF text model as with NB-LR (on the latest 100 alone, one paper
    either way: 8 and 8 before, 8 and 9 now): the hybrid must not do worse."""
    sample = read_labels(SAMPLE)
    held = {row["id"] for row in sample}
    train = [r for r in learn.training_rows() if r["id"] not in held]
    base = learn.shipped()
    model = learn.build(learn.fit_text(train), base.rule_slope, base.rule_offset, base.text_weight,
                        base.threshold)
    wrong_rule, wrong_hybrid = mistakes(relevance, sample, model)
    assert len(wrong_hybrid) <= len(wrong_rule)


def test_the_hybrid_beats_the_rule_on_papers_from_another_source_and_year(relevance):
    """tests/data/relevance_outside.jsonl: the cs papers of arXiv's RSS capture of
    2024-11-28 (../shared/data/formats) that name an RL or a language-model term, 316, labelled
    blind by LABELING.md (7 relevant). Neither the rule nor the model was tuned or trained
    on them. The rule makes 7 errors, the shipped hybrid 6: it keeps Critic-V (DPO-trained
    critic the rule scores 0.55, under its 0.9) and drops two borderline negatives the rule
    takes."""
    sample = read_labels(OUTSIDE)
    assert not {row["id"] for row in sample} & {row["id"] for row in learn.training_rows()}
    wrong_rule, wrong_hybrid = mistakes(relevance, sample)
    assert len(wrong_hybrid) < len(wrong_rule)
    assert "2411.18203" in wrong_rule - wrong_hybrid  # Critic-V


# --- the profile, through the CLI ---------------------------------------------------------

def image_paper(n: int) -> object:
    return replace(rl_paper(n, DAY), title=f"Reinforcement learning for text-to-image diffusion models {n}",
                   abstract="We fine-tune a text-to-image diffusion model with reinforcement learning "
                            "from human preference rewards to improve image aesthetics.",
                   authors=("Grace Hopper",))


@pytest.mark.parametrize("followed, written", [
    ("Willem Röpke", 'Willem R\\"opke'), ("willem ropke", "Willem Röpke"), ("Lukasz Kaiser", "Łukasz Kaiser"),
    ("J. Doe", "j doe"), ("Sofie Holbaek", "Sofie Holb{\\ae}k"), ("Ø. Øster", "O Oster"),
    ("Levine, Sergey", "Sergey Levine"), ("Jean-Pierre Dupont", "Jean Pierre Dupont"),
    ("John Smith, Jr.", "John Smith Jr."),
    # letters NFKD keeps, which arXiv's listings often spell in ASCII
    ("Nikola Đorđević", "Nikola Dordevic"), ("Guðrún Þórsdóttir", "Gudrun Thorsdottir"),
    ("Barış Yıldız", "Baris Yildiz"), ("Johann Strauß", "Johann Strauss"), ("Léa Cœurdevey", "Lea Coeurdevey"),
])
def test_a_followed_author_is_found_however_arxiv_spells_the_name(followed, written):
    assert decide.author_name(followed) == decide.author_name(written)


def test_a_followed_name_does_not_match_a_different_one():
    assert decide.author_name("Jan Muller") != decide.author_name("Jana Müller")


@pytest.mark.parametrize("phrase, title", [
    ("diffusion policy", "Diffusion Policies for Robot Manipulation"),  # README's own example
    ("Machine-Translation Study", "Two machine translation studies"), ("survey", "Three surveys"),
    # written in the plural: the singular was missed ('LLM agents' kept no 'LLM agent' paper)
    ("LLM agents", "An LLM agent for web tasks"), ("diffusion policies", "A diffusion policy"),
    ("VLMs", "A VLM that reasons"), ("focal losses", "A focal loss for rewards"),
])
def test_a_profile_phrase_finds_its_plural_and_singular(phrase, title):
    profile = decide.Profile.compile(SimpleNamespace(include=[], exclude=[phrase], follow_authors=[]))
    assert profile.order(title, "We train a policy.", ()) == (False, f"exclude: {phrase}")


def test_a_word_that_only_ends_in_s_is_not_taken_for_a_plural():
    """'news' is no plural of 'new' (in every abstract), nor 'dynamics' of 'dynamic'."""
    profile = decide.Profile.compile(SimpleNamespace(include=[], exclude=["news", "dynamics", "process"],
                                                    follow_authors=[]))
    assert profile.order("A new dynamic method", "We proces data.", ()) == (None, None)


def test_include_exclude_and_follow_through_the_cli(tmp_path, cli):
    followed = replace(rl_paper(3, DAY), title="Robot arm control with deep Q-learning",
                       abstract="A reinforcement learning policy for a robot arm, trained with deep Q-learning.",
                       authors=('Willem R\\"opke',))  # arXiv's TeX for Röpke
    excluded = replace(rl_paper(2, DAY), title="GRPO for LLM agents in autonomous driving simulators")
    papers = [rl_paper(1, DAY), excluded, followed, image_paper(4)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv, relevance={
            "include": ["text-to-image"], "exclude": ["autonomous driving"],
            "follow_authors": ["willem ropke"]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "GRPO variant 1" in digest
    assert "text-to-image diffusion models 4" in digest
    assert "Robot arm control" in digest
    assert "autonomous driving" not in digest
    # the followed author's paper is ranked first
    assert digest.index("Robot arm control") < digest.index("GRPO variant 1")
    shown = {p.id: cli("--config", str(config), "status", "--paper", p.id).stdout for p in papers}
    assert "reasons: include: text-to-image" in shown[papers[3].id]
    assert "reasons: exclude: autonomous driving" in shown[excluded.id]
    assert "reasons: follow: Willem Röpke" in shown[followed.id]
    assert "model's strongest terms: " in shown[papers[0].id]


def test_a_profile_written_midweek_decides_the_papers_collected_before_it(tmp_path, cli):
    """cron collects on weekdays; an exclude (or include) added on Wednesday decides
    Monday's papers in Monday's digest too (they kept the score they were collected with)."""
    excluded = replace(rl_paper(2, DAY), title="GRPO for LLM agents in autonomous driving simulators")
    papers = [rl_paper(1, DAY), excluded, image_paper(3)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
        config = full_config(tmp_path, arxiv, relevance={"include": ["text-to-image"],
                                                          "exclude": ["autonomous driving"]})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        shown = cli("--config", str(config), "status", "--paper", excluded.id).stdout
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "GRPO variant 1" in digest
    assert "text-to-image diffusion models 3" in digest
    assert "autonomous driving" not in digest
    assert "reasons: exclude: autonomous driving" in shown


def test_a_refit_scores_again_the_papers_of_the_week_since_the_last_digest_only(db_url):
    """A new model or profile decides the week's papers in no digest, by the instant the last
    digest ended whatever offset a date was written in; older weeks keep their scores."""
    from datetime import timedelta, timezone

    import sqlalchemy as sa

    from pipeline import week
    from pipeline.models import paper_key
    from pipeline.store import Store

    store = Store.open(db_url)
    end = datetime(2026, 11, 9, 8, tzinfo=timezone(timedelta(hours=8)))  # 00:00 UTC
    before, after, behind, undated, listed, old = (
        replace(rl_paper(n, DAY), submitted=when) for n, when in enumerate([
            datetime(2026, 11, 8, 23, 30, tzinfo=UTC), datetime(2026, 11, 9, 0, 30, tzinfo=UTC),
            datetime(2026, 11, 8, 17, tzinfo=timezone(timedelta(hours=-8))),  # 01:00 UTC, dated the 8th
            None, datetime(2026, 11, 10, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC)], start=1))
    store.upsert_papers([before, after, behind, undated, listed, old])
    store.save_digest("2026-11-09", (end - timedelta(days=7), end), {}, [(paper_key(listed.id), True)], [])
    with store.tx() as conn:  # collected before the digest was made, as its run's collect was
        conn.execute(sa.text("UPDATE papers SET first_seen = '2026-11-09T00:00:00+00:00'"))
        conn.execute(sa.text("UPDATE digests SET created = '2026-11-09T00:00:05+00:00'"))
    assert sorted(p.id for p in week.unlisted_this_week(store)) == [after.id, behind.id, undated.id]
    # sent on Sunday before the digest's end, announced on Monday evening, collected since:
    # none passed it over (it was never scored again, so a profile phrase added midweek missed it)
    late = replace(rl_paper(7, DAY), submitted=datetime(2026, 11, 8, 18, tzinfo=UTC))
    store.upsert_papers([late])
    assert sorted(p.id for p in week.unlisted_this_week(store)) == [after.id, behind.id, undated.id, late.id]
    store.close()


# --- learning from the reader -------------------------------------------------------------

def run_report(tmp_path: Path) -> dict:
    with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as db:
        row = db.execute("SELECT report FROM runs WHERE kind = 'publish' ORDER BY id DESC").fetchone()
    return json.loads(row[0])


def test_mark_then_run_refits_the_model_and_undo_takes_it_back(tmp_path, cli):
    first_week = [rl_paper(1, DAY), image_paper(2), image_paper(3)]
    later = datetime(2026, 11, 5, 12, tzinfo=UTC)
    second_week = [replace(image_paper(n), id=f"2612.{n:05d}", submitted=later, updated=later)
                   for n in (4, 5)]
    with ArxivServer(first_week) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        shipped = run_report(tmp_path)["relevance_model"]
        assert shipped == learn.shipped().version
        status = cli("--config", str(config), "status").stdout
        assert f"relevance model: {shipped} (shipped)" in status
        for paper in first_week[1:]:
            assert "relevant: False" in cli("--config", str(config), "status", "--paper", paper.id).stdout
            out = cli("--config", str(config), "mark", paper.id, "--relevant").stdout
            assert "marked relevant" in out
            shown = cli("--config", str(config), "status", "--paper", paper.id).stdout
            assert "relevant: False  your verdict: relevant (it decides, not the score)" in shown
        arxiv.add(*second_week)
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        refit = run_report(tmp_path)["relevance_model"]
        assert refit != shipped
        status = cli("--config", str(config), "status").stdout
        assert f"relevance model: {refit} (refit on the papers you and your readers judged: 2)" in status
        assert "your verdicts: 2, the scorer agrees with" in status
        shown = cli("--config", str(config), "status", "--paper", second_week[0].id).stdout
        assert f"model {refit}:" in shown
        # the reader's marks decide a paper like them, which the rule alone drops (README)
        assert "relevant: True  your verdict: none" in shown and "rule: -4.50 (threshold 0.9)" in shown
        assert "reasons: like papers you marked: relevant; title: reinforcement learning;" in shown

        undone = cli("--config", str(config), "mark", first_week[1].id, "--undo").stdout
        cli("--config", str(config), "mark", first_week[2].id, "--undo")
        again = cli("--config", str(config), "mark", first_week[2].id, "--undo").stdout
        assert "verdict taken back" in undone and "no verdict of yours to take back" in again
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
        assert run_report(tmp_path)["relevance_model"] == shipped
    assert "relevance model: " + shipped in cli("--config", str(config), "status").stdout


@pytest.mark.slow
def test_the_run_line_names_a_refit_model_once(tmp_path, cli):
    """The first digest run ranked by a refit says so with its version, also when a cron
    collect between the mark and the run made the refit; later runs with it say nothing."""
    papers = [rl_paper(1, DAY), image_paper(2)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv)
        first = cli("--config", str(config), "run", "--as-of", "2026-11-02").stdout
        assert "relevance model" not in first
        cli("--config", str(config), "mark", papers[1].id, "--relevant")
        cli("--config", str(config), "collect", "--as-of", "2026-11-06")
        refitted = cli("--config", str(config), "run", "--as-of", "2026-11-09").stdout
        version = run_report(tmp_path)["relevance_model"]
        assert version != learn.shipped().version
        assert f"; relevance model refit: {version}" in refitted
        later = cli("--config", str(config), "run", "--as-of", "2026-11-16").stdout
        assert "relevance model" not in later


@pytest.mark.slow  # two refits on every shipped row: make test-slow (in .ci/run)
def test_a_refit_from_an_older_shipped_model_is_not_used_and_the_next_run_refits(tmp_path, cli):
    """An upgrade ships a new model; the install's refit was made from the old one (whose
    numbers mean other things: the TF-IDF model's idf is not NB-LR's scale). Until the next
    run refits, status shows the shipped model, not the old refit."""
    papers = [rl_paper(1, DAY), image_paper(2)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
        cli("--config", str(config), "mark", papers[1].id, "--relevant")
        cli("--config", str(config), "run", "--as-of", "2026-11-09")
        refit = run_report(tmp_path)["relevance_model"]
        assert refit != learn.shipped().version
        with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as db:  # as an older install left it
            (value,) = db.execute("SELECT value FROM state WHERE key = ?", (learn.STATE_KEY,)).fetchone()
            old = {k: v for k, v in json.loads(value).items() if k != "base"}
            db.execute("UPDATE state SET value = ? WHERE key = ?", (json.dumps(old), learn.STATE_KEY))
        assert f"relevance model: {learn.shipped().version} (shipped)" in cli("--config", str(config),
                                                                             "status").stdout
        assert f"model {learn.shipped().version}:" in cli("--config", str(config), "status", "--paper",
                                                          papers[0].id).stdout
        cli("--config", str(config), "run", "--as-of", "2026-11-16")
        assert run_report(tmp_path)["relevance_model"] == refit  # the same verdicts, the same refit
        assert f"relevance model: {refit} (refit" in cli("--config", str(config), "status").stdout


def test_a_refit_an_older_release_kept_as_json_scores_the_same_and_is_rewritten_small(db_url, relevance):
    """Releases before 2026-12 kept the refit as JSON, every gram (17 MB with thousands of
    verdicts, parsed by every command). After the upgrade status scores with it as it is, and
    the next run keeps that very model as arrays (no refit), with the same version and scores."""
    from pipeline.store import Store

    store = Store.open(db_url)
    papers = [rl_paper(1, DAY), image_paper(2), image_paper(3)]
    store.upsert_papers(papers)
    store_readers.set_verdict(store, papers[1].id, True)
    base = learn.shipped()
    terms = {f"{word}{i}": (1.0 + i / 7, i / 3 - 5) for word in ("image", "rl") for i in range(3000)}
    older = learn.build(learn.TextModel.of({**terms, "text to": (2.5, 3.25)}, -1.5), base.rule_slope,
                        base.rule_offset, base.text_weight, base.threshold, 1,
                        learn.TextModel.of({"diffusion": (1.5, 4.0), "image": (0.5, 1.0)}, -3.0))
    old = {**older.to_dict(), "fingerprint": learn.fingerprint(base, learn.verdict_rows(store)),
           "base": base.version}
    store.set_state(learn.OLD_STATE_KEY, old)  # as the older release left it
    texts = ([p.title for p in papers], [p.abstract for p in papers], [0.2, 0.5, 0.8])
    for refit_now in (False, True):  # status, then the next run
        model = learn.current(relevance, store, refit_now=refit_now)
        assert model is not None and model.version == older.version
        assert model.decide(*texts) == older.decide(*texts)
    assert store.get_state(learn.OLD_STATE_KEY) is None
    kept = store.get_state(learn.STATE_KEY)
    assert kept["fingerprint"] == old["fingerprint"]
    assert len(json.dumps(kept)) < len(json.dumps(old)) / 2
    assert learn.current(relevance, store, refit_now=False).version == older.version
    store.close()


def test_mark_and_status_take_the_id_however_it_was_copied(tmp_path, cli):
    """The digest links a paper's abs and pdf pages: either, pasted, names the paper."""
    paper = rl_paper(1, DAY)
    with ArxivServer([paper]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    for pasted in (f"https://arxiv.org/pdf/{paper.id}v1", f"arxiv.org/abs/{paper.id}",
                   f"https://www.arxiv.org/pdf/{paper.id}v1.pdf", f"arxiv:{paper.id}v1"):
        said = cli("--config", str(config), "mark", pasted, "--irrelevant").stdout
        assert said.startswith(f"{paper.id}: marked irrelevant")
        shown = cli("--config", str(config), "status", "--paper", pasted).stdout
        assert "your verdict: irrelevant" in shown
        assert "verdict taken back" in cli("--config", str(config), "mark", pasted, "--undo").stdout


def test_the_same_verdict_again_changes_nothing_and_promises_no_refit(tmp_path, cli):
    paper = rl_paper(1, DAY)
    with ArxivServer([paper]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    first = cli("--config", str(config), "mark", paper.id, "--irrelevant").stdout
    assert first.strip() == f"{paper.id}: marked irrelevant; the next run refits the model"
    again = cli("--config", str(config), "mark", paper.id, "--irrelevant").stdout
    assert again.strip() == f"{paper.id}: already marked irrelevant; nothing changed"
    changed = cli("--config", str(config), "mark", paper.id, "--relevant").stdout
    assert changed.strip() == f"{paper.id}: marked relevant; the next run refits the model"


def test_a_mark_with_the_model_off_promises_no_refit(tmp_path, cli):
    paper = rl_paper(1, DAY)
    with ArxivServer([paper]) as arxiv:
        config = full_config(tmp_path, arxiv, relevance={"model": False})
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    said = cli("--config", str(config), "mark", paper.id, "--irrelevant").stdout
    assert said.strip() == (f"{paper.id}: marked irrelevant; it overrides the score "
                            "(relevance.model is off: no model learns from it)")


def test_marking_a_paper_never_collected_does_not_send_the_reader_to_collect(tmp_path, cli):
    """A collect reads only what arXiv announced since the watermark: for an older paper
    (or one outside the categories) `rl-digest collect` would never bring it. arXiv numbers a
    paper by the month of its announcement in New York: Sunday 05-31's batch, announced after
    a collect on Monday 06-01 at 07:00 in Beijing, is 2605.x; it was sent away as never collected."""
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-06-01T07:00:00+08:00")
    old = cli("--config", str(config), "mark", "1706.03762", "--relevant", check=2).stderr
    assert "rl-digest collect" not in old
    assert "only papers in sources.arxiv.categories that match sources.arxiv.terms are collected" in old
    for recent in ("2611.99999", "2605.99999"):
        said = cli("--config", str(config), "mark", recent, "--relevant", check=2).stderr
        assert "run `rl-digest collect` to read what arXiv announced since 2026-06-01" in said, said


def test_undo_takes_a_verdict_back_whatever_the_store_holds_of_its_paper(tmp_path, cli):
    """A mark kept for a paper no longer stored would come back with it, collected again."""
    from pipeline.store import Store

    config = full_config(tmp_path, ArxivServer())
    url = f"sqlite:///{tmp_path}/state/digest.sqlite3"
    Store.open(url).upsert_papers([rl_paper(1, DAY)])
    cli("--config", str(config), "mark", "2611.00001", "--relevant")
    backends.execute(url, "DELETE FROM papers")
    undone = cli("--config", str(config), "mark", "2611.00001", "--undo").stdout
    assert undone.startswith("2611.00001: verdict taken back") and backends.rows(url, "SELECT * FROM verdicts") == []
    again = cli("--config", str(config), "mark", "2611.00001", "--undo", check=2).stderr
    assert "2611.00001: no such paper in the database" in again


def test_mark_needs_a_verdict_or_undo(tmp_path, cli):
    config = full_config(tmp_path, ArxivServer())
    result = cli("--config", str(config), "mark", "2611.00001", check=2)
    assert "--relevant, --irrelevant or --undo" in result.stderr


def test_a_paper_or_labels_file_that_names_nothing_is_bad_usage(tmp_path, cli):
    """Exit 2 with one line naming what was asked for, as `--digest` of no digest is: exit 1
    is a delivery that failed, which a monitoring script would page someone for."""
    config = full_config(tmp_path, ArxivServer())
    for args in (("mark", "2611.99999", "--relevant"), ("status", "--paper", "2611.99999")):
        result = cli("--config", str(config), *args, check=2)
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert "2611.99999: no such paper in the database" in result.stderr
    labels = tmp_path / "labels.jsonl"
    labels.write_text(SAMPLE.read_text(encoding="utf-8").splitlines()[0] + "\nnot json\n", encoding="utf-8")
    result = cli("--config", str(config), "eval", "--labels", str(labels), check=2)
    assert f"{labels}:2: not a labelled paper" in result.stderr
    first = json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    for changed, said in (({"label": 2}, "label 2 is not 0, 1, true or false"),  # it gave precision 1.882
                          ({"label": "relevant"}, 'label "relevant" is not 0, 1, true or false'),
                          ({"title": ["a", "list"]}, "title is not text")):
        labels.write_text(json.dumps({**first, **changed}) + "\n", encoding="utf-8")
        result = cli("--config", str(config), "eval", "--labels", str(labels), check=2)
        assert result.stderr.strip() == f"rl-digest: {labels}:1: not a labelled paper ({said})"
    labels.write_bytes(json.dumps({**first, "title": "Müller"}, ensure_ascii=False).encode("latin-1"))
    result = cli("--config", str(config), "eval", "--labels", str(labels), check=2)
    assert result.stderr.strip().startswith(f"rl-digest: --labels: {labels}: not UTF-8 text")
    # what a spreadsheet or another tool writes: true/false, quoted, a null abstract, a BOM
    rows = [{**json.loads(line), "abstract": None} if n == 0 else json.loads(line)
            for n, line in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines())]
    labels.write_text("\ufeff" + "\n".join(json.dumps({**r, "label": ["false", True][r["label"]]})
                                           for r in rows), encoding="utf-8")
    assert f"papers {len(rows)}: precision" in cli("--config", str(config), "eval", "--labels", str(labels)).stdout
    missing = cli("--config", str(config), "eval", "--labels", str(tmp_path / "nope.jsonl"), check=2)
    assert missing.stderr.strip() == f"rl-digest: --labels: {tmp_path / 'nope.jsonl'}: No such file or directory"


def test_eval_reports_the_current_model(tmp_path, cli):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    config = full_config(tmp_path, ArxivServer())
    out = cli("--config", str(config), "eval", "--labels", str(labels)).stdout
    assert f"model: {learn.shipped().version}" in out
    assert "rule alone: precision" in out and "text model alone: precision" in out
    assert "papers 492: precision" in out
    assert "of these papers are in the model's training data" in out


def test_the_installs_mark_wins_readers_count_by_majority_and_a_tie_teaches_nothing(tmp_path):
    from pipeline.store import Store

    store = Store.open(f"sqlite:///{tmp_path}/state/digest.sqlite3")
    store.upsert_papers([rl_paper(n, DAY) for n in (1, 2, 3, 4)])
    store_readers.set_verdict(store, "2611.00001", False)
    for paper, said in ((1, True), (1, True), (2, False), (2, False), (2, True), (3, True), (3, False)):
        store_readers.record_verdict(store, f"arxiv:2611.{paper:05d}", f"r{len(store_readers.verdicts_given(store))}@example.org", said)
    store_readers.record_verdict(store, "arxiv:2611.00004", "r9@example.org", True)
    found = {p.id: (label, weight) for p, label, weight in learn.verdicts(store)}
    assert found == {"2611.00001": (False, learn.VERDICT_WEIGHT), "2611.00002": (False, learn.READER_WEIGHT),
                     "2611.00004": (True, learn.READER_WEIGHT)}
    liked, disliked = learn.judged(store)
    assert [p.id for p in liked] == ["2611.00004"] and {p.id for p in disliked} == {"2611.00001", "2611.00002"}


def test_a_paper_withdrawn_since_it_was_judged_teaches_by_its_title_not_the_withdrawal_notice(tmp_path):
    """arXiv's withdrawal can replace the abstract with its notice: the verdict was on the
    paper, so the refit and the taste must not learn 'withdrawn … an error' as the reader's."""
    from pipeline.store import Store

    store = Store.open(f"sqlite:///{tmp_path}/state/digest.sqlite3")
    store.upsert_papers([rl_paper(1, DAY), rl_paper(2, DAY)])
    store_readers.set_verdict(store, "2611.00001", True)
    store_readers.record_verdict(store, "arxiv:2611.00002", "ada@example.org", False)
    notice = "This paper has been withdrawn by the authors due to an error in the experiments."
    store.upsert_papers([replace(rl_paper(n, DAY, version=2), abstract=notice,
                                 comment="This paper has been withdrawn") for n in (1, 2)])
    rows = {row["id"]: row for row in learn.verdict_rows(store)}
    assert {pid: (row["title"], row["abstract"]) for pid, row in rows.items()} == {
        p.id: (p.title, "") for p in (rl_paper(1, DAY), rl_paper(2, DAY))}
    liked, disliked = learn.judged(store)
    assert [(p.id, p.abstract) for p in liked + disliked] == [("2611.00001", ""), ("2611.00002", "")]


@pytest.mark.slow
def test_eval_counts_the_papers_your_verdicts_taught_the_refit_as_its_training_data(tmp_path, cli):
    """A labels file made from the papers you marked (the obvious one to write) is scored by
    a model fitted on those very verdicts: the note that figures on them flatter it says so."""
    marked = image_paper(2)
    with ArxivServer([rl_paper(1, DAY), marked]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    cli("--config", str(config), "mark", f"{marked.id}v1", "--relevant")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": f"{p.id}v1", "title": p.title, "abstract": p.abstract,
                                          "label": 1}) + "\n" for p in (marked, image_paper(3))),
                      encoding="utf-8")
    out = cli("--config", str(config), "eval", "--labels", str(labels)).stdout
    assert out.splitlines()[0] != f"model: {learn.shipped().version}"  # the refit, on the mark
    assert "note: 1 of these papers are in the model's training data; figures on them flatter it" in out


@pytest.mark.slow
def test_eval_scores_the_refit_your_verdicts_make_but_leaves_the_store_to_the_run(tmp_path, cli):
    """eval refitted on the verdicts and wrote the refit into the store without the run lock:
    during a run (or a store copy, which holds the lock for a consistent copy) it wrote under
    them, and a refit on older verdicts could replace the run's newer one. A measurement reads:
    it scores the refit the next run would make and writes nothing, lock held or not."""
    from tests.processes import lock_holder

    marked = image_paper(2)
    with ArxivServer([rl_paper(1, DAY), marked]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    cli("--config", str(config), "mark", marked.id, "--relevant")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": marked.id, "title": marked.title, "abstract": marked.abstract,
                                  "label": 1}) + "\n", encoding="utf-8")

    def database() -> list[str]:
        with sqlite3.connect(tmp_path / "state" / "digest.sqlite3") as db:
            return list(db.iterdump())

    before = database()
    with lock_holder(config):  # a run under way
        out = cli("--config", str(config), "eval", "--labels", str(labels)).stdout
    assert out.splitlines()[0] != f"model: {learn.shipped().version}"  # the refit, on the mark
    assert database() == before
    assert f"relevance model: {learn.shipped().version} (shipped)" in cli("--config", str(config), "status").stdout


def test_status_of_a_paper_says_what_its_readers_votes_teach_and_that_your_mark_wins(tmp_path, cli):
    """Nine addresses with 👍 or 👎 say nothing of the outcome: the line tallies them and says
    what the refit learns from them (the majority, nothing on a tie, your verdict instead)."""
    from pipeline.store import Store

    with ArxivServer([rl_paper(n, DAY) for n in (1, 2, 3)]) as arxiv:
        config = full_config(tmp_path, arxiv)
        cli("--config", str(config), "collect", "--as-of", "2026-11-02")
    store = Store.open(f"sqlite:///{tmp_path}/state/digest.sqlite3")
    for n, ups, downs in ((1, 4, 5), (2, 2, 2), (3, 3, 1)):
        for who in range(ups + downs):
            store_readers.record_verdict(store, f"arxiv:2611.{n:05d}", f"r{who}@example.org", who < ups)
    store_readers.record_verdict(store, "arxiv:2611.00001", "r0@example.org", False)  # changed their mind: 3 👍 6 👎
    cli("--config", str(config), "mark", "2611.00003", "--irrelevant")

    def readers(n: int) -> str:
        shown = cli("--config", str(config), "status", "--paper", f"2611.{n:05d}").stdout
        return next(line.strip() for line in shown.splitlines() if line.strip().startswith("readers:"))

    assert readers(1).endswith("r8@example.org 👎 (3 👍 6 👎: the model learns irrelevant)")
    assert readers(1).count("👎") == 7 and "r0@example.org 👎" in readers(1)
    assert readers(2).endswith("(2 👍 2 👎: a tie, the model learns nothing from them)")
    assert readers(3).endswith("(3 👍 1 👎: your verdict wins, the model learns irrelevant)")
    assert {p.id: label for p, label, _ in learn.verdicts(store)} == {"2611.00001": False, "2611.00003": False}
