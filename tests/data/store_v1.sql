-- A database made by rl-digest before the schema came from Table objects (schema
-- version 1: main's hand-written SQL, and rows as that code wrote them, JSON as text).
-- Portable SQL: tests load it into SQLite and PostgreSQL and migrate it forward.
CREATE TABLE schema_migrations (
	version INTEGER NOT NULL, 
	applied VARCHAR, 
	PRIMARY KEY (version)
);
CREATE TABLE papers (
            id VARCHAR(64) PRIMARY KEY, version INTEGER NOT NULL, title TEXT NOT NULL,
            abstract TEXT NOT NULL, authors TEXT NOT NULL, categories TEXT NOT NULL,
            submitted VARCHAR(32), updated VARCHAR(32), comment TEXT, journal_ref TEXT,
            sources TEXT NOT NULL, first_seen VARCHAR(32) NOT NULL, revised_at VARCHAR(32),
            score FLOAT, relevant BOOLEAN, reasons TEXT, topic VARCHAR(64), topics TEXT,
            verdict BOOLEAN);
CREATE INDEX ix_papers_submitted ON papers (submitted);
CREATE TABLE seeds (
            key VARCHAR(255) PRIMARY KEY, title TEXT NOT NULL, source VARCHAR(255) NOT NULL,
            line INTEGER NOT NULL, data TEXT NOT NULL, arxiv_id VARCHAR(64),
            resolve_tried_at VARCHAR(32), first_seen VARCHAR(32) NOT NULL);
CREATE TABLE runs (
            id INTEGER PRIMARY KEY, kind VARCHAR(16) NOT NULL, as_of VARCHAR(32) NOT NULL,
            started VARCHAR(32) NOT NULL, finished VARCHAR(32), status VARCHAR(16) NOT NULL,
            window_start VARCHAR(32), window_end VARCHAR(32), report TEXT, error TEXT);
CREATE TABLE digests (
            id VARCHAR(10) PRIMARY KEY, created VARCHAR(32) NOT NULL,
            window_start VARCHAR(32), window_end VARCHAR(32), data TEXT NOT NULL);
CREATE TABLE digest_items (
            digest_id VARCHAR(10) NOT NULL REFERENCES digests (id), item_key VARCHAR(255) NOT NULL,
            shown BOOLEAN NOT NULL, PRIMARY KEY (digest_id, item_key), UNIQUE (item_key));
CREATE TABLE enrichments (
            key VARCHAR(255) PRIMARY KEY, item_key VARCHAR(255) NOT NULL, kind VARCHAR(32) NOT NULL,
            data TEXT NOT NULL, tokens_in INTEGER, tokens_out INTEGER, created VARCHAR(32) NOT NULL);
CREATE INDEX ix_enrichments_item ON enrichments (item_key);
CREATE TABLE deliveries (
            id INTEGER PRIMARY KEY, digest_id VARCHAR(10) NOT NULL REFERENCES digests (id),
            recipient VARCHAR(320) NOT NULL, status VARCHAR(16) NOT NULL,
            attempts INTEGER NOT NULL, last_error TEXT, message_id VARCHAR(255),
            sent_at VARCHAR(32), next_attempt VARCHAR(32), UNIQUE (digest_id, recipient));
CREATE TABLE state (key VARCHAR(255) PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO schema_migrations (version, applied) VALUES (1, '2026-11-30T20:19:00+00:00');
INSERT INTO papers (id, version, title, abstract, authors, categories, submitted, updated, comment, journal_ref, sources, first_seen, revised_at, score, relevant, reasons, topic, topics, verdict) VALUES ('2611.00001', 2, 'GRPO for “reasoning” | <b>x</b>', 'We train an LLM with RL. 中文', '["Ada Lovelace", "李雷"]', '["cs.LG", "cs.CL"]', '2026-11-26T12:00:00+00:00', '2026-11-26T12:00:00+00:00', NULL, NULL, '["api", "rss"]', '2026-11-30T20:19:00+00:00', NULL, 2.5, TRUE, '["title: GRPO", "abstract: RL"]', 'RLHF', '["RLHF", "reasoning"]', NULL);
INSERT INTO papers (id, version, title, abstract, authors, categories, submitted, updated, comment, journal_ref, sources, first_seen, revised_at, score, relevant, reasons, topic, topics, verdict) VALUES ('2611.00002', 1, 'Thin seed paper', '', '[]', '[]', NULL, NULL, NULL, NULL, '["seed"]', '2026-11-30T20:19:00+00:00', NULL, 0.1, FALSE, '[]', 'other', '[]', TRUE);
INSERT INTO seeds (key, title, source, line, data, arxiv_id, resolve_tried_at, first_seen) VALUES ('seed:deepseekr1强化学习', 'DeepSeek-R1: 强化学习', '004.md', 12, '{"title": "DeepSeek-R1: 强化学习", "source": "004.md", "line": 12, "summary_zh": "用强化学习激励推理", "summary_en": null, "date": "2025-01-22", "arxiv_id": "2501.12948", "topic": null, "featured": true, "truncated": false, "headline_zh": null, "parts_zh": [["方法", "GRPO"]]}', '2501.12948', NULL, '2026-11-30T20:19:07+00:00');
INSERT INTO runs (id, kind, as_of, started, finished, status, window_start, window_end, report, error) VALUES (1, 'collect', '2026-11-30T23:59:59+00:00', '2026-11-30T20:19:07+00:00', '2026-11-30T20:19:07+00:00', 'ok', '2026-11-23T00:00:00+00:00', '2026-11-30T23:59:59+00:00', '{"sources": {"api": {"requests": 2, "seen": 2, "new": 2}}, "warnings": []}', NULL);
INSERT INTO runs (id, kind, as_of, started, finished, status, window_start, window_end, report, error) VALUES (2, 'publish', '2026-11-30T23:59:59+00:00', '2026-11-30T20:19:07+00:00', '2026-11-30T20:19:07+00:00', 'ok', NULL, NULL, '{"digest": "2026-11-30", "relevant": 1, "summarised": 1, "sent": 1, "as_of": "2026-11-30 23:59:59+00:00"}', NULL);
INSERT INTO digests (id, created, window_start, window_end, data) VALUES ('2026-11-30', '2026-11-30T20:19:07+00:00', '2026-11-23T00:00:00+00:00', '2026-11-30T23:59:59+00:00', '{"id": "2026-11-30", "entries": [{"key": "arxiv:2611.00001", "title": "GRPO “x”"}], "zeta": 1, "alpha": 2}');
INSERT INTO digest_items (digest_id, item_key, shown) VALUES ('2026-11-30', 'arxiv:2611.00001', TRUE);
INSERT INTO digest_items (digest_id, item_key, shown) VALUES ('2026-11-30', 'seed:deepseekr1', FALSE);
INSERT INTO enrichments (key, item_key, kind, data, tokens_in, tokens_out, created) VALUES ('paper_summary:arxiv:2611.00001:v2', 'arxiv:2611.00001', 'paper_summary', '{"summary_zh": "中文摘要", "summary_en": "An English summary."}', 120, 80, '2026-11-30T20:19:07+00:00');
INSERT INTO deliveries (id, digest_id, recipient, status, attempts, last_error, message_id, sent_at, next_attempt) VALUES (1, '2026-11-30', 'ada@example.org', 'sent', 1, NULL, '<1@x>', '2026-11-30T23:59:59+00:00', NULL);
INSERT INTO deliveries (id, digest_id, recipient, status, attempts, last_error, message_id, sent_at, next_attempt) VALUES (2, '2026-11-30', 'bob@example.org', 'pending', 0, NULL, NULL, NULL, NULL);
INSERT INTO state (key, value) VALUES ('rss:https://rss.arxiv.org/rss/cs.LG', '"2026-11-30T05:00:00+00:00"');
INSERT INTO state (key, value) VALUES ('git:out', '{"error": null, "since": "2026-11-30T06:00:00+00:00"}');
