"""Whole runs of the real CLI against local arXiv, LLM and SMTP servers, on SQLite and
PostgreSQL (`db_url`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests import backends
from tests.helpers import DAY, KEY, full_config, rl_paper
from tests.servers.arxiv_server import ArxivServer
from tests.servers.openai_server import OpenAIServer, error, invalid
from tests.servers.smtp_server import SmtpServer, refused_port


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_run_summarises_in_both_languages_and_a_rerun_calls_nothing(tmp_path, cli, db_url):
    with ArxivServer([rl_paper(i, DAY) for i in range(3)]) as arxiv, OpenAIServer() as llm:
        config = full_config(tmp_path, arxiv, llm, db_url=db_url)
        first = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        calls = len(llm.requests)
        assert calls >= 3
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in llm.requests)
        second = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        assert len(llm.requests) == calls  # the cache answered everything
    assert "fetched 3, new 3, " in first.stdout and "summarised 3 (0 cached)" in first.stdout
    assert "fetched 3, new 0, " in second.stdout  # the same papers again: nothing new
    assert f"; LLM: {calls} calls, " in first.stdout and "0 failed" in first.stdout
    assert "; LLM:" not in second.stdout  # nothing was called
    status = cli("--config", str(config), "status").stdout
    assert "summarised 3 (0 cached)" in status and f"LLM calls {calls}" in status
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    for i in range(3):
        assert f"GRPO variant {i} for reinforcement learning" in digest
    assert "中文摘要待生成" not in digest
    for path in [*(tmp_path / "out").rglob("*"), *(tmp_path / "state").glob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for table in ("papers", "runs", "digests", "enrichments", "state", "deliveries"):
        assert KEY not in str(backends.rows(db_url, f"SELECT * FROM {table}")), table
    assert KEY not in first.stdout + first.stderr + second.stdout + second.stderr


def test_the_llm_count_tells_calls_from_the_requests_they_took(tmp_path, cli):
    """'LLM: 9 calls' while the provider saw 11 requests: the client's retries of a 500 and a
    503 were in no count, and nothing said what a call was."""
    with ArxivServer([rl_paper(i, DAY) for i in range(3)]) as arxiv, OpenAIServer() as llm:
        llm.queue(error(500), error(503), invalid())  # two retried, one asked again
        config = full_config(tmp_path, arxiv, llm)
        first = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        sent = len(llm.requests)
    calls = sent - 2  # the stricter second ask is a call; a retry of a failed request is not
    assert f"; LLM: {calls} calls ({sent} requests), " in first.stdout and "0 failed" in first.stdout
    assert f"LLM calls {calls} ({sent} requests), " in cli("--config", str(config), "status").stdout
    last = json.loads(cli("--config", str(config), "status", "--json").stdout)["last"]["publish"]
    assert (last["report"]["llm_calls"], last["report"]["llm_requests"]) == (calls, sent)


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_without_an_llm_the_digest_goes_out_marked_pending(tmp_path, cli, db_url):
    from dataclasses import replace

    paper = replace(rl_paper(1, DAY), abstract=(
        "Large language models are trained with reinforcement learning from verifiable rewards. "
        "Rollouts are costly. We propose GRPO-Lite, which reuses rollouts across policy steps. "
        "It matches GRPO at half the cost."))
    with ArxivServer([paper]) as arxiv, OpenAIServer() as llm:
        llm.script = lambda request: error(500)
        config = full_config(tmp_path, arxiv, llm, db_url=db_url)
        result = cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        assert "summarised 0" in result.stdout
        assert "2 failed" in result.stdout  # the summary and the featured reading fell back
        status = cli("--config", str(config), "status").stdout  # and why, not only how many
        assert "warning: enrich: 2 fell back and are tried again next run (the last: " in status
        assert "HTTP 500 from" in status.split("warning: enrich: 2 fell back", 1)[1].split("\n", 1)[0]
        digests = tmp_path / "out" / "digests"
        digest = (digests / "2026-11-02.md").read_text(encoding="utf-8")
        # One line in the header, no mark on the entry; the English line is the claim.
        assert "> ⏳ 1 篇论文的中文摘要待生成 · Chinese summaries pending: 1" in digest
        for fmt in ("md", "html", "txt"):
            assert (digests / f"2026-11-02.{fmt}").read_text(encoding="utf-8").count("⏳") == 1
        assert "We propose GRPO-Lite, which reuses rollouts across policy steps." in digest
        assert "Large language models are trained" not in digest.split("## 本周论文")[1].split("## 精选")[0]
        llm.script = None
        cli("--config", str(config), "run", "--as-of", "2026-11-09", env={"OPENAI_API_KEY": KEY})
    reading = (tmp_path / "out" / "READING_LIST.md").read_text(encoding="utf-8")
    assert "中文摘要待生成" not in reading  # the failed summary was tried again and landed


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_email_reaches_each_reader_once_even_after_an_outage(tmp_path, cli, db_url):
    """SMTP down: the run exits 1 and both rows wait; SMTP back: an immediate `run` (within
    the backoff, which only paces the scheduler) delivers them, and nothing goes twice."""
    port = refused_port()
    with ArxivServer([rl_paper(1, DAY)]) as arxiv:
        config = full_config(tmp_path, arxiv, smtp_port=port, db_url=db_url)
        down = cli("--config", str(config), "run", "--as-of", "2026-11-02", check=1)
        assert "2 deliveries stay queued" in down.stderr
        assert (tmp_path / "out" / "digests" / "2026-11-02.md").exists()
        waiting = cli("--config", str(config), "send", check=1)
        (tmp_path / "state" / "heartbeat.json").write_text(json.dumps(  # a scheduler alive elsewhere
            {"pid": 1, "host": "box", "wake": datetime.now(UTC).isoformat(), "interval_seconds": 60,
             "next": {}, "running": [], "stopped": False}), encoding="utf-8")
        scheduled = cli("--config", str(config), "status").stdout
        with SmtpServer(port=port) as smtp:
            up = cli("--config", str(config), "run", "--as-of", "2026-11-02")
            sent = cli("--config", str(config), "send")
            received = list(smtp.messages)
    # Still down: `send` tried again at once and lists each waiting row with when its next try
    # is due and its last error; `status` says the scheduler makes it, once one is alive.
    assert "sent 0, pending 2, failed 0" in waiting.stdout
    for reader in ("ada@example.org", "alan@example.org"):
        line = next(ln for ln in waiting.stdout.splitlines() if f"2026-11-02 {reader}:" in ln)
        assert "pending; next try due at 20" in line and "(no scheduler runs here)" in line  # no try counted
        assert "run or send at once — smtp 127.0.0.1:" in line and "connection refused" in line
        line = next(ln for ln in scheduled.splitlines() if f"2026-11-02 {reader}:" in ln)
        assert "pending; the scheduler tries at 20" in line
    assert "sent to 2" in up.stdout
    assert "sent 0, pending 0, failed 0" in sent.stdout
    assert sorted(r.rcpt_tos[0] for r in received) == ["ada@example.org", "alan@example.org"]
    for message in received:
        assert len(message.rcpt_tos) == 1
        assert message.message["To"] == message.rcpt_tos[0]
        assert message.message.get_content_type() == "multipart/alternative"
        assert "2026-11-02" in str(message.message["Subject"])


@pytest.mark.slow_on_postgresql  # its SQLite case in make test; both in make test-slow (CI)
def test_llm_judge_decides_only_the_grey_band_and_is_cached(tmp_path, cli, db_url):
    from dataclasses import replace

    from tests.servers.openai_server import ok

    grey = replace(rl_paper(2, DAY), title="Routing queries between language models",
                   abstract="We route queries among large language models with a small policy "
                            "trained with RL to cut cost.")
    with ArxivServer([rl_paper(1, DAY), grey]) as arxiv, OpenAIServer() as llm:
        llm.script = lambda request: (ok({"relevant": False, "reason_en": "A router, not LLM RL."})
                                      if request.task == "relevance_judgement" else None)
        config = full_config(tmp_path, arxiv, llm, db_url=db_url,
                             relevance={"llm_judge": True, "model_grey_band": 0.15})
        cli("--config", str(config), "run", "--as-of", "2026-11-02", env={"OPENAI_API_KEY": KEY})
        judged = [r for r in llm.requests if r.task == "relevance_judgement"]
        cli("--config", str(config), "run", "--as-of", "2026-11-09", env={"OPENAI_API_KEY": KEY})
        again = [r for r in llm.requests if r.task == "relevance_judgement"]
    assert [r.titles for r in judged] == [["Routing queries between language models"]]
    assert len(again) == 1  # judged once, never asked again
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert "GRPO variant 1" in digest and "Routing queries" not in digest
    shown = cli("--config", str(config), "status", "--paper", grey.id).stdout
    assert "LLM judge: not relevant (A router, not LLM RL.)" in shown
    status = cli("--config", str(config), "status").stdout
    assert "LLM judge: 1 judged, 0 agreed with the scorer" in status  # the model had kept it
