"""Links, venue, readable TeX and the contribution sentence, on real arXiv strings.

The strings below are copied from ../shared/data/arxiv_dev.jsonl (id in the comment), so
these tests run without it; the last test reads the whole file when it is there.
"""

from __future__ import annotations

import json
import logging

import pytest

from pipeline.extract import checked_url, contribution, links, readable, venue, withdrawn
from tests.helpers import shared_file


@pytest.mark.parametrize("texts, expected", [
    # 2602.06763, comment
    (["Github: https://github.com/lyn22333/R-Align Huggingface: "
      "https://huggingface.co/collections/lyn22333/r-align"],
     (("code", "https://github.com/lyn22333/R-Align"),
      ("model", "https://huggingface.co/collections/lyn22333/r-align"))),
    # 2602.06920, abstract: a stray TeX brace and a full stop after the URL
    (["... available at \\url{https://huggingface.co/datasets/sabdalja/HalluVerse-M3}."],
     (("dataset", "https://huggingface.co/datasets/sabdalja/HalluVerse-M3"),)),
    # 2601.00623 abstract (a project page on github.io) and 2601.03204 ("Repo:" glued on)
    (["Project page: https://artanic30.github.io/project_pages/DA-DPO/.",
      "Repo:https://github.com/ChenglinPoly/infiAgent"],
     (("code", "https://github.com/ChenglinPoly/infiAgent"),
      ("project", "https://artanic30.github.io/project_pages/DA-DPO/"))),
    # 2602.10575 comment: the first of each kind, in a fixed order
    (["14 pages, 4 figures, 11 tables; Code: https://github.com/MING-ZCH/MetaphorStar, "
      "Model & Dataset: https://huggingface.co/collections/MING-ZCH/metaphorstar"],
     (("code", "https://github.com/MING-ZCH/MetaphorStar"),
      ("model", "https://huggingface.co/collections/MING-ZCH/metaphorstar"))),
    # Hugging Face's paper pages and blog posts are no model (both were 'HF model'); a blog
    # post named as the project's page is one
    (["Paper: https://huggingface.co/papers/2501.12948, and a write-up at https://huggingface.co/blog/open-r1. "
      "Weights: https://huggingface.co/open-r1/OpenR1-Qwen-7B"],
     (("model", "https://huggingface.co/open-r1/OpenR1-Qwen-7B"),)),
    (["Project page: https://huggingface.co/blog/open-r1"], (("project", "https://huggingface.co/blog/open-r1"),)),
    # a bare host, no scheme
    (["code at github.com/zzfoutofspace/ATPO."], (("code", "https://github.com/zzfoutofspace/ATPO"),)),
    # nothing a reader could use: a user page, a DOI, and script links
    (["see https://github.com/someone and https://doi.org/10.1/x",
      "javascript:alert(1) [x](javascript:alert(document.cookie)) "
      "https://user:pw@github.com/a/b http://localhost/x"], ()),
])
def test_links(texts, expected):
    assert links(*texts) == expected


def test_checked_url_takes_http_and_https_with_a_real_host_only():
    assert checked_url("https://github.com/a/b") == "https://github.com/a/b"
    assert checked_url("github.com/a/b") == "https://github.com/a/b"
    for bad in ("javascript:alert(1)", "https://user@github.com/a", "http://localhost/",
                "https://999/x", "data:text/html,hi"):
        assert checked_url(bad) is None, bad


@pytest.mark.parametrize("comment, journal_ref, expected", [
    ("AAAI'26 poster", None, "AAAI'26 poster"),  # 2512.23971
    ("Accepted by TMLR", None, "TMLR"),  # 2601.00623
    ("Accepted at AAAI 2026", None, "AAAI 2026"),  # 2601.03438
    ("Preprint for ACL 2026 submission", None, None),  # 2601.03615
    ("Accepted to EACL Main Conference", None, "EACL Main Conference"),  # 2601.04582
    ("Accepted at the 9th International Conference on Natural Language Processing and Information "
     "Retrieval (NLPIR 2025), Fukuoka, Japan", None, "NLPIR 2025"),  # 2601.05091
    ("This work has been accepted by IEEE COMST with manuscript number 00802-2025.R1", None,
     "IEEE COMST"),  # 2601.05092
    ("Accepted to ICLR 2026. 17 pages. Code, data, and models are available at: https://github.com/x/y",
     None, "ICLR 2026"),
    ("[CVPR 2026 Findings] Our data and code are released at https://github.com/OpenDFM/x", None,
     "CVPR 2026 Findings"),
    ("Accepted at NeurIPS 2026", None, "NeurIPS 2026"),
    ("ICLR 2026 (oral)", None, "ICLR 2026 (oral)"),
    ("Submitted to ICLR 2026 (poster)", None, None),
    ("Under review at NeurIPS 2026", None, None),
    ("14 pages, 8 figures", None, None),
    ("Accepted at NeurIPS 2026", "Proc. of the 43rd ICML, PMLR 267, 2026", "Proc. of the 43rd ICML, PMLR 267, 2026"),
    ("Accepted for publication at AAMAS 2026", None, "AAMAS 2026"),  # 2602.14252, not "publication at …"
    ("Accepted for publication in IEEE Wireless Communications Letters", None,
     "IEEE Wireless Communications Letters"),  # 2603.19067
    ("20 pages, 12 figures, 2 tables. Published as a conference paper at ICLR 2026. Code available at "
     "https://github.com/NM512/r2dreamer", None, "ICLR 2026"),  # 2603.18202: ICLR's own footer, was none
    ("Accepted as an oral presentation at ICML 2025", None, "ICML 2025 (oral)"),
])
def test_venue(comment, journal_ref, expected):
    assert venue(comment, journal_ref) == expected


@pytest.mark.parametrize("raw, shown", [
    ("AM$^3$Safety: Towards Data Efficient Alignment", "AM³Safety: Towards Data Efficient Alignment"),  # 2601.04736
    ("$V_0$: A Generalist Value Model for Any Policy at State Zero",
     "V₀: A Generalist Value Model for Any Policy at State Zero"),  # 2602.03584
    ("$\\mathcal{X}$-KD: General Experiential Knowledge Distillation", "𝒳-KD: General Experiential Knowledge Distillation"),
    ("$PA^3$: $\\textbf{P}$olicy-$\\textbf{A}$ware $\\textbf{A}$gent $\\textbf{A}$lignment",
     "PA³: Policy-Aware Agent Alignment"),  # 2603.14602
    ("GRPO-$\\lambda$", "GRPO-λ"), ("$\\alpha$-RL", "α-RL"), ("\\textsc{X}", "X"),
    ("Byzantine-Robust Optimization under $(L_0, L_1)$-Smoothness",
     "Byzantine-Robust Optimization under (L₀, L₁)-Smoothness"),  # 2603.12512
    # accents as arXiv sends them in titles and names (its RSS of 2024-11-28)
    ('Cardinal Sequences of Lindel\\"of scattered P-spaces', "Cardinal Sequences of Lindelöf scattered P-spaces"),
    ("A note on P\\'{o}lya-Szeg\\\"{o} inequality", "A note on Pólya-Szegö inequality"),
    ("On an Erd\\H{o}s-Szekeres Game", "On an Erdős-Szekeres Game"),
    ("consistent with {\\Lambda}CDM", "consistent with ΛCDM"),
    ("Mapping Personal Attributes \\& Preferences", "Mapping Personal Attributes & Preferences"),
    ('Willem R\\"opke', "Willem Röpke"), ("\\v{S}imon Sedl\\'a\\v{c}ek", "Šimon Sedláček"),
    ("\\'Angel Luis Mu\\~noz Casta\\~neda", "Ángel Luis Muñoz Castañeda"),
    ("Sofie Castro Holb{\\ae}k", "Sofie Castro Holbæk"), ('{\\"O}zt\\"urk', "Öztürk"),
    ("Marc Aragon\\`es Fontbot\\'e", "Marc Aragonès Fontboté"), ('na\\"{\\i}ve', "naïve"),
    # a backslash that starts nothing stays, as does an accent with nothing to sit on
    ("a \\ b", "a \\ b"), ('ends in \\"', 'ends in \\"'),
    # plain prose keeps its % & ~ and a lone or spaced-out $
    ("50% of a & b ~ c costs 5$ or 6$", "50% of a & b ~ c costs 5$ or 6$"),
    ("<script>x</script>", "<script>x</script>"),  # escaping is the renderer's job
    # TeX's dashes (2603.17187), a starred policy; an HTML comment and a flag stay as sent
    ("MetaClaw: Just Talk -- An Agent That Meta-Learns", "MetaClaw: Just Talk – An Agent That Meta-Learns"),
    ("Naive Bayes --- a survey", "Naive Bayes — a survey"), ("the optimal $\\pi^*$", "the optimal π*"),
    ("<!-- x --> and --help", "<!-- x --> and --help"), ("a--b and a---b", "a--b and a—b"),
    # links and citations in abstracts (2603.17055, 2602.04279, 2601.22139 write \href)
    ("Code: \\href{https://github.com/bradybuddiemarch/gcpo}{this}.",
     "Code: this (https://github.com/bradybuddiemarch/gcpo)."),
    ("at \\href{https://github.com/Skylanding/ARISE}{https://github.com/Skylanding/ARISE}",
     "at https://github.com/Skylanding/ARISE"),
    ("see $\\href{https://x.org/a_b}{here}$.", "see here (https://x.org/a_b)."),
    ("Code: \\url{https://github.com/a/b}.", "Code: https://github.com/a/b."),
    ("as shown by GRPO~\\cite{shao2024}, and \\citep[p.~3]{a,b} too", "as shown by GRPO, and too"),
    # what pylatexenc cannot read stays as sent (it raised on these)
    ("a \\sqrt rate", "a \\sqrt rate"), ("the \\footnote mark", "the \\footnote mark"),
    ("a bare \\href", "a bare \\href"), ("$O(\\sqrt{T})$ regret", "O(√(T)) regret"),
    # typewriter and sans names of tools keep their text (pylatexenc dropped it)
    ("We release \\texttt{ToolRL} and \\textsf{Bench}.", "We release ToolRL and Bench."),
    ("a \\textless{}tag\\textgreater{} in text", "a <tag> in text"),  # pylatexenc dropped both
    ("lines a\\\\b", "lines a b"),  # a line break, then b: not the accent \b
    # a line break in a title copied from TeX is a space, as read
    ("Reward Models \\\\ A Survey", "Reward Models A Survey"), ("A:\\\\*[2pt]B", "A: B"),
    ("x \\newline y", "x y"), ("$a \\\\ b$ rows", "a b rows"),
    ("an \\mbox{RL-free} \\textup{step}", "an RL-free step"),
    # an author's own macro keeps its name, as arXiv shows it (2602.xxxxx, Note2Chat; "we propose , a")
    ("we propose \\method{}, a framework. We release \\tracebank.", "we propose \\method, a framework. "
     "We release \\tracebank."),
    ("models (\\eg, GRPO), \\ie a policy", "models (e.g., GRPO), i.e. a policy"),  # they read "(, GRPO),  a"
])
def test_readable_tex(raw, shown):
    assert readable(raw) == shown
    assert "\\em" not in readable("dubbed {\\em WS-FM}")  # a font switch goes, no author's macro


def test_readable_reads_every_title_and_abstract_of_the_dev_corpus(caplog):
    """No real arXiv text makes it raise, nor log pylatexenc's complaints."""
    dev = shared_file("data", "arxiv_dev.jsonl")
    rows = [json.loads(line) for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    with caplog.at_level(logging.WARNING):
        for row in rows:
            readable(row["title"])
            readable(row["abstract"])
    assert not caplog.records, caplog.records[:3]


def test_contribution_is_the_claim_not_the_background():
    abstract = ("Reinforcement learning with verifiable rewards has become the dominant paradigm. "
                "However, rollouts are expensive. To address these challenges, we propose D-VLA, a "
                "high-concurrency, low-latency distributed RL framework for large-scale embodied "
                "foundation models. Experiments show gains.")  # 2603.xxxxx (D-VLA), shortened
    assert contribution(abstract).startswith("To address these challenges, we propose D-VLA")
    assert contribution("Models drift. We show that drift explains hacking. We release logs.") == \
        "We show that drift explains hacking."
    assert contribution("LLMs reason. In this paper, reasoning is measured.") == \
        "In this paper, reasoning is measured."
    assert contribution("Just one background sentence. Another one.") == "Just one background sentence."
    assert contribution("") == ""


@pytest.mark.parametrize("abstract, picked", [
    # no space after the period: the motivation is not glued to the claim (2605.01324)
    ("RL is limited for edge deployments.To address this, we propose VideoThinker, a framework. It works.",
     "To address this, we propose VideoThinker, a framework."),
    # an abbreviation does not end the sentence (2604.22498)
    ("MLLMs miss details. We propose Compositional Grounded Contrast (abbr. CGC), a framework. Gains follow.",
     "We propose Compositional Grounded Contrast (abbr. CGC), a framework."),
    # a claim that only announces, or says too little, brings the sentence that says it
    ("Drafts are slow. We propose two techniques to realize this. First, FlatRoPE breaks symmetry. Then more.",
     "We propose two techniques to realize this. First, FlatRoPE breaks symmetry."),
    ("Do agents differ? We find it does not. Agents fine-tuned with DPO share one distribution.",
     "We find it does not. Agents fine-tuned with DPO share one distribution."),
    # a verb of building or measuring is a claim too (2603.03072), as is one past a first verb
    ("LLMs assist scientists. Figures are hard. To address these issues, we construct DaTikZ-V4, a dataset.",
     "To address these issues, we construct DaTikZ-V4, a dataset."),
    ("Motion matters. We formalize this as STT reasoning and introduce Motion-o, a model. It wins.",
     "We formalize this as STT reasoning and introduce Motion-o, a model."),
    # a content warning is no claim, though it says "this paper"
    ("Warning: this paper contains harmful text. Jailbreaks spread. In this work, attacks are measured.",
     "In this work, attacks are measured."),
    # a sentence ends at a quote closed after its period (2604.05445, 2605.20602)
    ("Discriminative ones act as opaque \"black boxes.\" To bridge this gap, we propose VL-MDR, a framework.",
     "To bridge this gap, we propose VL-MDR, a framework."),
    ("Self-training is said to make the text \u201cmore like itself.\u201d We provide evidence that this is incomplete.",
     "We provide evidence that this is incomplete."),
    # a word between "this" and the noun (2606.07299, 2604.04686)
    ("Deep Research has emerged. This technical report presents DuMate-DeepResearch, a framework. It wins.",
     "This technical report presents DuMate-DeepResearch, a framework."),
    ("One often derives REINFORCE by causality. This short paper isolates that step and derives it.",
     "This short paper isolates that step and derives it."),
])
def test_contribution_reads_real_abstracts_shapes(abstract, picked):
    assert contribution(abstract) == picked


def test_contribution_is_the_proposal_naming_the_titles_method():
    # 2602.xxxxx (SuCo), shortened: "we introduce MSC" came first and was shown as the paper's claim
    abstract = ("LRMs think too long. In this work, we introduce Minimal Sufficient CoT (MSC), the shortest "
                "adequate prefix. Building on MSC, we propose Sufficiency-guided Continuous Adaptive Reasoning "
                "(SuCo), a two-stage training framework. SuCo wins.")
    title = "SuCo: Sufficiency-guided Continuous Adaptive Reasoning"
    assert contribution(abstract, title).startswith("Building on MSC, we propose")
    assert contribution(abstract).startswith("In this work, we introduce")  # no title given
    assert contribution(abstract, "Position: LRMs should stop").startswith("In this work")  # no name


def test_on_the_dev_corpus_a_quarter_have_links_and_none_is_unsafe():
    dev = shared_file("data", "arxiv_dev.jsonl")
    rows = [json.loads(line) for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    relevant = [r for r in rows if r.get("label") == 1]
    found = [links(r["abstract"], r.get("comment")) for r in relevant]
    share = sum(1 for f in found if f) / len(relevant)
    assert 0.2 <= share <= 0.35, share  # "about a quarter" (issue 15)
    for f in found:
        for _, url in f:
            assert url.startswith(("https://", "http://")) and checked_url(url) == url
    venues = [venue(r.get("comment"), r.get("journal_ref")) for r in relevant]
    assert 0.07 <= sum(1 for v in venues if v) / len(relevant) <= 0.2
    assert all(len(v) < 120 for v in venues if v)


@pytest.mark.parametrize(("comment", "abstract", "said"), [
    ("This paper has been withdrawn", "This paper has been withdrawn by the authors.", True),
    (None, "This paper has been withdrawn by the author due to a crucial error in Theorem 2.", True),
    ("Withdrawn by the authors: an error in the experiments", "We train ...", True),
    ("Withdrawn: the results are wrong", "We train ...", True),
    ("The manuscript is withdrawn due to an error in Table 3.", "We train ...", True),
    ("Accepted at ICLR 2027", "We study RL for LLMs.", False),
    ("v3: an earlier version was withdrawn from NeurIPS; accepted at ICLR", "We train ...", False),
    ("Theorem 2 of v2 is withdrawn; see Section 4", "We train ...", False),
    (None, "We study drugs that have been withdrawn from the market, and RL agents. " * 20, False),
])
def test_a_withdrawal_is_read_from_what_arxiv_says(comment, abstract, said):
    assert withdrawn(comment, abstract) is said
