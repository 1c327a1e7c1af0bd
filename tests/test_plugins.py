"""Sources and channels plug in from outside pipeline/: a toy JSONL source and a toy file
channel, both from test modules, through the entry-point groups and as module:factory,
in one real run of the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from tests import toy_channel
from tests.helpers import plugin_env, rl_paper
from tests.processes import config_with, db_rows
from tests.servers.arxiv_server import ArxivServer

AS_OF = "2026-11-02"
ENTRY_POINTS = ("[rl_digest.sources]\ntoy_jsonl = toy_source:JsonlSource\n"
                "[rl_digest.channels]\ntoy_file = toy_channel:FileChannel\n")


def jsonl(path, papers) -> str:
    path.write_text("".join(json.dumps({"id": p.id, "title": p.title, "abstract": p.abstract,
                                        "categories": list(p.categories),
                                        "submitted": p.submitted.isoformat()}) + "\n" for p in papers),
                    encoding="utf-8")
    return str(path)


def test_a_run_reads_a_toy_source_and_delivers_through_a_toy_channel(tmp_path, cli):
    day = datetime(2026, 10, 29, 12, tzinfo=UTC)
    arxiv_paper, first, second = rl_paper(1, day), rl_paper(7, day), rl_paper(8, day)
    toy = [{"type": "toy_jsonl", "name": "toy", "path": jsonl(tmp_path / "a.jsonl", [first])},
           {"type": "toy_source:JsonlSource", "name": "more", "path": jsonl(tmp_path / "b.jsonl", [second])}]
    channel = [{"type": "toy_file", "name": "notes", "folder": str(tmp_path / "notes")}]
    with ArxivServer([arxiv_paper]) as arxiv:
        config = config_with(tmp_path, arxiv, channels=channel,
                             sources={"plugins": toy})  # beside the stand-in's API and feeds
        run = cli("--config", str(config), "run", "--as-of", AS_OF,
                  env=plugin_env(tmp_path, ENTRY_POINTS))
        status = cli("--config", str(config), "status", env=plugin_env(tmp_path / "again", ENTRY_POINTS))
    digest = (tmp_path / "out" / "digests" / f"{AS_OF}.md").read_text(encoding="utf-8")
    for paper in (arxiv_paper, first, second):
        assert f"https://arxiv.org/abs/{paper.id}" in digest
    assert "toy JSONL" in digest  # the digest names its sources
    assert "curated list" not in digest  # and no seeds where none are configured
    assert "sent to 1" in run.stdout
    own = [{**channel[0], "stage_env": "production"}]  # the plug-in's option, no variable's name
    check = cli("--config", str(config_with(tmp_path, arxiv, channels=own)), "config", "check",
                env=plugin_env(tmp_path / "own", ENTRY_POINTS), check=None)
    assert check.returncode == 0, check.stderr
    [message] = toy_channel.messages(tmp_path / "notes" / "inbox.md")
    assert first.id in message and second.id in message and arxiv_paper.id in message
    assert "toy: 0 requests, 1 seen" in status.stdout and "more: 0 requests, 1 seen" in status.stdout


def test_an_unknown_source_type_is_a_config_error_naming_the_key(tmp_path, cli):
    with ArxivServer([]) as arxiv:
        config = config_with(tmp_path, arxiv, sources={"plugins": [{"type": "nowhere"}]})
        result = cli("--config", str(config), "run", "--as-of", AS_OF, check=2)
    assert "sources.plugins[0].type: no source type 'nowhere'" in result.stderr


def test_a_plugin_whose_module_is_missing_is_a_config_error_naming_the_key(tmp_path, cli):
    """An installed plug-in package whose module is gone (uninstalled in part, or a typo in its
    entry point): one line naming the key, exit 2, and config check says it before a run. A
    module that fails as it is imported (a syntax error in one's own plug-in) was exit 1,
    'unexpected error: SyntaxError: ...', naming no key."""
    with ArxivServer([]) as arxiv:
        config = config_with(tmp_path, arxiv, sources={"plugins": [{"type": "toy_jsonl", "name": "toy",
                                                                    "path": str(tmp_path / "a.jsonl")}]})
        env = plugin_env(tmp_path, "[rl_digest.sources]\ntoy_jsonl = gone_module:JsonlSource\n")
        checked = cli("--config", str(config), "config", "check", env=env, check=2)
        result = cli("--config", str(config), "collect", "--as-of", AS_OF, env=env, check=2)
        (tmp_path / "plugins" / "broken_source.py").write_text("def source(:\n", encoding="utf-8")
        config = config_with(tmp_path, arxiv, sources={"plugins": [{"type": "broken_source:source"}]})
        broken = cli("--config", str(config), "config", "check", env=env, check=2)
    for said in (checked.stderr + checked.stdout, result.stderr):
        assert "sources.plugins[0].type: cannot load source 'gone_module:JsonlSource'" in said
    assert "Traceback" not in result.stderr and "unexpected error" not in result.stderr
    assert "sources.plugins[0].type: cannot load source 'broken_source:source': SyntaxError: " \
        "invalid syntax (broken_source.py, line 1)" in broken.stderr + broken.stdout


def test_a_plugin_sources_text_is_cleaned_and_bounded_as_a_feeds_is(tmp_path, cli):
    """A plug-in reads outside text too (a lab's JSON feed): a bidi override, an escape
    sequence and a bell in its title, and a 190,000-character abstract, were stored as they
    came, so they reached the terminal and every output; the built-in sources' rules apply."""
    day = datetime(2026, 10, 29, 12, tzinfo=UTC)
    paper = replace(rl_paper(7, day), title="GRPO \u202eevil\u202c \x1b]0;pwned\x07 zero\u200bwidth for RL of LLMs",
                    abstract="We train a large language model with RL from verifiable rewards. " * 3000)
    toy = [{"type": "toy_jsonl", "name": "toy", "path": jsonl(tmp_path / "a.jsonl", [paper])}]
    config = config_with(tmp_path, sources={"arxiv": {"enabled": False}, "rss": {"enabled": False},
                                            "plugins": toy})
    cli("--config", str(config), "collect", "--as-of", AS_OF, env=plugin_env(tmp_path, ENTRY_POINTS))
    shown = cli("--config", str(config), "status", "--paper", paper.id, env=plugin_env(tmp_path / "again", ENTRY_POINTS))
    (row,) = db_rows(tmp_path, "SELECT title, abstract FROM papers")
    assert row["title"] == "GRPO evil ]0;pwned zerowidth for RL of LLMs"
    assert len(row["abstract"]) <= 6000 and row["abstract"].endswith("rewards.")
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout


def test_a_plugin_papers_id_must_be_an_arxiv_id_and_may_carry_its_version(tmp_path, cli):
    """Every paper is an arXiv paper (its link, DOI and BibTeX eprint are made of its id): a
    plug-in's paper under another id is left out with a warning naming it (one holding `}`
    broke its BibTeX entry); 'arXiv:2611.00009v3' reads as a feed's id does."""
    import bibtexparser

    day = datetime(2026, 10, 29, 12, tzinfo=UTC)
    odd = rl_paper(7, day, title="Lab paper on GRPO for reinforcement learning of LLMs")
    good = rl_paper(9, day)
    path = tmp_path / "a.jsonl"
    jsonl(path, [replace(odd, id="lab-7} @misc{evil, title={pwned"), replace(good, id=f"arXiv:{good.id}v3")])
    config = config_with(tmp_path, sources={"arxiv": {"enabled": False}, "rss": {"enabled": False},
                                            "plugins": [{"type": "toy_jsonl", "name": "lab", "path": str(path)}]})
    collected = cli("--config", str(config), "collect", "--as-of", AS_OF, env=plugin_env(tmp_path, ENTRY_POINTS))
    exported = cli("--config", str(config), "export", "--format", "bibtex")
    assert "lab: left out 1 paper(s) whose id is not an arXiv id such as 2410.10110: " \
           "'lab-7} @misc{evil, title={pwned'" in collected.stderr, collected.stderr
    (entry,) = bibtexparser.loads(exported.stdout).entries
    assert entry["eprint"] == good.id and entry["url"] == f"https://arxiv.org/abs/{good.id}"
    assert db_rows(tmp_path, "SELECT id, version FROM papers") == [{"id": good.id, "version": 3}]


def test_a_plugin_sources_updates_and_seed_documents_are_cleaned_as_its_papers_are(tmp_path, cli):
    """A plug-in may return new versions of papers held and seed documents besides papers:
    their titles and summaries, a bidi override, an escape sequence, tag characters and
    all, were stored as they came (and shown by status and every output); only its papers
    were cleaned."""
    day = datetime(2026, 10, 29, 12, tzinfo=UTC)
    paper = rl_paper(7, day)
    path = tmp_path / "a.jsonl"
    jsonl(path, [paper])
    nasty = "GRPO \u202eevil\u202c \x1b]0;pwned\x07 tag\U000e0041\U000e0042ged zero\u200bwidth for RL"
    config = config_with(tmp_path, sources={"arxiv": {"enabled": False}, "rss": {"enabled": False},
                                            "plugins": [{"type": "toy_jsonl", "name": "lab", "path": str(path)}]})
    env = plugin_env(tmp_path, ENTRY_POINTS)
    cli("--config", str(config), "collect", "--as-of", AS_OF, env=env)
    with path.open("a", encoding="utf-8") as rows:
        rows.write(json.dumps({"id": f"arXiv:{paper.id}v2", "version": 2, "update": True, "title": nasty}) + "\n")
        rows.write(json.dumps({"seed": "lab\u202e.yaml", "title": nasty + " long" * 200,
                               "summary_zh": "强化学习\x1b[2J" + "很长。" * 3000}) + "\n")
    cli("--config", str(config), "collect", "--as-of", AS_OF, env=env)
    shown = cli("--config", str(config), "status", "--paper", paper.id, env=env)
    (row,) = db_rows(tmp_path, "SELECT title, version FROM papers")
    assert row == {"title": "GRPO evil ]0;pwned tagged zerowidth for RL", "version": 2}
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    (seed,) = db_rows(tmp_path, "SELECT title, source, data FROM seeds")
    assert seed["title"].startswith("GRPO evil ]0;pwned tagged zerowidth for RL long") and len(seed["title"]) <= 400
    assert seed["source"] == "lab.yaml"
    summary = json.loads(seed["data"])["summary_zh"]
    assert summary.startswith("强化学习[2J很长。") and len(summary) <= 6000 and "\x1b" not in summary


def test_a_plugin_papers_times_are_kept_in_utc_so_newest_first_holds(tmp_path, cli):
    """The store keeps times as ISO text and orders them so: a plug-in's 01:00+08:00 (17:00
    UTC) was stored as written and sorted after 20:00 UTC the day before, and one without a
    zone had none; the built-in sources store UTC."""
    east = timezone(timedelta(hours=8))
    early = replace(rl_paper(1, datetime(2026, 10, 30, 1, tzinfo=east)), title="Early GRPO for LLM reasoning")
    late = replace(rl_paper(2, datetime(2026, 10, 29, 20, tzinfo=UTC)), title="Late GRPO for LLM reasoning")
    path = tmp_path / "a.jsonl"
    jsonl(path, [early, late])
    bare = {"id": "2611.00003", "title": "Bare GRPO for LLM reasoning", "abstract": late.abstract,
            "categories": ["cs.LG"], "submitted": "2026-10-29T18:00:00"}
    path.write_text(path.read_text(encoding="utf-8") + json.dumps(bare) + "\n", encoding="utf-8")
    toy = [{"type": "toy_jsonl", "name": "toy", "path": str(path)}]
    config = config_with(tmp_path, sources={"arxiv": {"enabled": False}, "rss": {"enabled": False},
                                            "plugins": toy})
    cli("--config", str(config), "collect", "--as-of", AS_OF, env=plugin_env(tmp_path, ENTRY_POINTS))
    stored = db_rows(tmp_path, "SELECT id, submitted FROM papers ORDER BY submitted DESC")
    assert stored == [{"id": "2611.00002", "submitted": "2026-10-29T20:00:00+00:00"},
                      {"id": "2611.00003", "submitted": "2026-10-29T18:00:00+00:00"},
                      {"id": "2611.00001", "submitted": "2026-10-29T17:00:00+00:00"}]
