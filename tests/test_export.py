"""`rl-digest export`: the reading list as BibTeX, RIS, CSL-JSON and JSON lines, read back
by the parsers reference managers use (bibtexparser, rispy), every field as it was."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from pipeline import export
from pipeline.models import Entry, seed_key
from tests.helpers import DAY, full_config, rl_paper
from tests.processes import stderr_lines
from tests.servers.arxiv_server import ArxivServer

HOSTILE = "{Braces} at 50% & more: a_b $x$ #1 \\emph ^hat ~tilde"
ENTRY = Entry(
    key="arxiv:2611.00001", title=HOSTILE, topic="algorithms", url="https://arxiv.org/abs/2611.00001",
    date="2026-11-27", authors=("Jane Q. Doe", "Wei Zhang", "Plato", "Smith and Sons", "Mihaela van der Schaar",
             "Martin Luther King Jr."),
    categories=("cs.LG", "cs.CL"), abstract="We double GRPO's sample efficiency (50% fewer rollouts) & more.",
    links=(("code", "https://github.com/example/grpo"),), venue="NeurIPS 2026",
)
SEED = Entry(key="seed:anundatedseed", title="An undated seed: 强化学习 } unpaired {", topic="agentic",
             summary_zh="人工挑选", curated=True, origin="mine.md")


def latex_text():
    """LaTeX's own reading of a field: pylatexenc, told what textcomp's \\textbraceleft,
    \\textbraceright and \\textasciicircum print."""
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    db = get_default_latex_context_db()
    db.add_context_category("textcomp", prepend=True, macros=[
        MacroTextSpec("textbraceleft", simplify_repl="{"), MacroTextSpec("textbraceright", simplify_repl="}"),
        MacroTextSpec("textasciicircum", simplify_repl="^")])
    return LatexNodes2Text(latex_context=db, math_mode="text", strict_latex_spaces=True)


def written(fmt: str, found: list[Entry]) -> str:
    out = io.StringIO()
    assert export.write(fmt, found, out) == len(found)
    return out.getvalue()


def test_bibtex_parses_back_to_the_same_text():
    bibtexparser = pytest.importorskip("bibtexparser")
    parsed = bibtexparser.loads(written("bibtex", [ENTRY, SEED])).entries
    plain = latex_text()
    first, seed = parsed
    assert first["ID"] == "arxiv-2611.00001" and first["ENTRYTYPE"] == "misc"
    assert plain.latex_to_text(first["title"]) == HOSTILE  # {, %, &, _, $, #, \, ^, ~ survive
    assert plain.latex_to_text(first["abstract"]) == ENTRY.abstract
    names = re.split(r" and (?![^{}]*\})", first["author"])  # BibTeX's rule: " and " outside braces
    assert [plain.latex_to_text(a) for a in names] == [
        "Doe, Jane Q.", "Zhang, Wei", "Plato", "Smith and Sons", "van der Schaar, Mihaela",
        "King Jr., Martin Luther"]  # filed under van der Schaar and King
    assert (first["year"], first["eprint"], first["archiveprefix"], first["primaryclass"]) == (
        "2026", "2611.00001", "arXiv", "cs.LG")
    assert first["doi"] == "10.48550/arXiv.2611.00001" and first["url"] == ENTRY.url
    assert plain.latex_to_text(seed["title"]) == SEED.title and "year" not in seed


def test_bibtex_is_ascii_pdflatex_reads_and_the_other_formats_keep_unicode():
    """pdfLaTeX stopped at α, ≥, ₀ or an emoji ('Unicode character not set up for use with
    LaTeX'), and bibtex's alpha style cut Ørsted's first UTF-8 bytes into its label (an
    invalid byte sequence): letters and signs are BibTeX's special characters now. Zotero's
    BibTeX import read pylatexenc's {\\ensuremath{\\alpha}} as '\\ensuremath\\alpha' and V₀ as
    'V\\ensuremath_0': math is written {$\\alpha$}, V{$_0$}, which it reads. pandoc's BibTeX
    reader dropped pylatexenc's {\\textendash}: dashes are TeX's -- and ---, which all of them read."""
    title = "α-GRPO: Reward ≥ 0 → “Better” RLHF – V₀ in 𝒳 for Łukasz’s naïve café 🚀"
    entry = replace(ENTRY, title=title, authors=("Łukasz Kaiser", "Søren Ørsted", "José Álvarez", "Ilya 🤖 Bot"),
                    abstract="We show α ≥ β, ε-greedy.")
    seed = replace(SEED, title="强化学习 ≥ 综述")
    text = written("bibtex", [entry, seed])
    assert {c for c in text if not c.isascii()} == set("强化学习综述")  # Han has no pdfLaTeX form: kept
    assert export._paired(text)
    assert "author = {Kaiser, {\\L}ukasz and {\\O}rsted, S{\\o}ren and {\\'A}lvarez, Jos{\\'e} and Bot, Ilya}" in text
    assert "{$\\alpha$}-GRPO" in text and "RLHF {--} V{$_0$}" in text and "{\\textquotedblleft}Better{\\textquotedblright}" in text
    assert "\\mathscr" not in text and "\\mathbb" not in text  # packages a plain document lacks
    bibtexparser = pytest.importorskip("bibtexparser")
    first, second = bibtexparser.loads(text).entries
    plain = latex_text()
    shown = title.replace("𝒳", "X").replace("V₀", "V_0").removesuffix(" 🚀")  # TeX's V$_0$ read as text
    assert plain.latex_to_text(first["title"]) == shown
    assert plain.latex_to_text(first["abstract"]) == entry.abstract
    assert plain.latex_to_text(second["title"]) == seed.title
    assert json.loads(written("csljson", [entry]))[0]["title"] == title  # UTF-8 formats: as it is
    assert f"TI  - {title}\n" in written("ris", [entry]) and "AU  - Kaiser, Łukasz" in written("ris", [entry])


def test_seeds_with_chinese_titles_get_keys_of_their_own_in_every_format():
    """cite_key made every Chinese-only title of one length `seed-------`: a reference
    manager keeps one of them and drops the rest."""
    bibtexparser = pytest.importorskip("bibtexparser")
    seeds = [replace(SEED, key=seed_key(title), title=title) for title in ("强化学习综述", "大模型的推理")]
    keys = [e["ID"] for e in bibtexparser.loads(written("bibtex", seeds)).entries]
    ids = [item["id"] for item in json.loads(written("csljson", seeds))]
    assert len(set(keys)) == 2 and keys == ids and all(k.isascii() for k in keys)
    assert keys == [e["ID"] for e in bibtexparser.loads(written("bibtex", seeds)).entries]  # stable


def test_names_written_family_first_or_holding_and_stay_whole():
    """arXiv writes 'Given Family'; a name already 'Family, Given' (or with a suffix), or one
    with ' and ' in it, is read as written, not turned into 'Given, Family,' (which biber
    drops with its entry) or split at 'and'."""
    bibtexparser = pytest.importorskip("bibtexparser")
    authors = ("Smith, Jr., John", "Doe, Jane", "Bob and Carol", "A, B, C, D")
    entry = replace(ENTRY, authors=authors)
    names = re.split(r" and (?![^{}]*\})", bibtexparser.loads(written("bibtex", [entry])).entries[0]["author"])
    assert names == ["Smith Jr., John", "Doe, Jane", "{Bob and Carol}", "{A, B, C, D}"]
    csl = json.loads(written("csljson", [entry]))[0]["author"]
    assert csl[:3] == [{"family": "Smith Jr.", "given": "John"}, {"family": "Doe", "given": "Jane"},
                       {"family": "Bob and Carol"}]
    ris = [line for line in written("ris", [entry]).splitlines() if line.startswith("AU")]
    assert ris[:3] == ["AU  - Smith Jr., John", "AU  - Doe, Jane", "AU  - Bob and Carol"]
    # a suffix after the comma is no given name: filed under Smith, as 'John Smith Jr.' is
    assert export.cited("John Smith, Jr.") == export.cited("John Smith Jr.") == "Smith Jr., John"


def test_a_name_ending_in_an_emoji_keeps_its_family_name():
    """'Jane Doe 🚀' was filed under 🚀: BibTeX, which leaves an emoji out, wrote the author
    '{, Jane Doe}' (no family name), RIS 'AU  - 🚀, Jane Doe'. The sign stays with the family
    name, as a name in brackets does."""
    bibtexparser = pytest.importorskip("bibtexparser")
    entry = replace(ENTRY, authors=("Jane Doe 🚀", "Wei Zhang (张伟) 🤖", "Martin Luther King Jr. ✨"))
    author = bibtexparser.loads(written("bibtex", [entry])).entries[0]["author"]
    assert author == "Doe, Jane and Zhang (张伟), Wei and King Jr., Martin Luther"
    ris = [line for line in written("ris", [entry]).splitlines() if line.startswith("AU")]
    assert ris == ["AU  - Doe 🚀, Jane", "AU  - Zhang (张伟) 🤖, Wei", "AU  - King Jr. ✨, Martin Luther"]
    assert json.loads(written("csljson", [entry]))[0]["author"][0] == {"family": "Doe 🚀", "given": "Jane"}


def test_a_name_ending_in_a_number_is_filed_under_the_word_before_it():
    """'Anonymous Author 2' was filed under '2' (family '2', given 'Anonymous Author')."""
    entry = replace(ENTRY, authors=("Anonymous Author 2", "Author 112"))
    ris = [line for line in written("ris", [entry]).splitlines() if line.startswith("AU")]
    assert ris == ["AU  - Author 2, Anonymous", "AU  - Author 112"]


def test_a_group_is_cited_as_one_name_in_every_format():
    """'Kimi Team' was cited as 'Team, Kimi' (filed under T, 'Team, K.' in APA), and BibTeX
    read 'Author 112' as given name Author, family name 112: a name with no given name is
    one name, in braces in BibTeX."""
    bibtexparser = pytest.importorskip("bibtexparser")
    from bibtexparser.customization import splitname
    entry = replace(ENTRY, authors=("Kimi Team", "The ATLAS Collaboration", "Author 112", "Jane Doe"))
    names = re.split(r" and (?![^{}]*\})", bibtexparser.loads(written("bibtex", [entry])).entries[0]["author"])
    assert names == ["{Kimi Team}", "{The ATLAS Collaboration}", "{Author 112}", "Doe, Jane"]
    assert [splitname(name)["last"] for name in names] == [
        ["{Kimi Team}"], ["{The ATLAS Collaboration}"], ["{Author 112}"], ["Doe"]]  # BibTeX's family names
    assert json.loads(written("csljson", [entry]))[0]["author"][:2] == [
        {"family": "Kimi Team"}, {"family": "The ATLAS Collaboration"}]
    ris = [line for line in written("ris", [entry]).splitlines() if line.startswith("AU")]
    assert ris[:2] == ["AU  - Kimi Team", "AU  - The ATLAS Collaboration"]


def test_ris_reads_back_with_rispy():
    rispy = pytest.importorskip("rispy")
    first, seed = rispy.loads(written("ris", [ENTRY, SEED]))
    assert first["type_of_reference"] == "GEN" and first["title"] == HOSTILE
    assert first["authors"][:3] == ["Doe, Jane Q.", "Zhang, Wei", "Plato"]
    assert first["authors"][4:] == ["van der Schaar, Mihaela", "King Jr., Martin Luther"]
    assert (first["year"], first["date"], first["urls"]) == ("2026", "2026/11/27", [ENTRY.url])
    assert first["doi"] == "10.48550/arXiv.2611.00001" and first["abstract"] == ENTRY.abstract
    assert first["keywords"] == ["algorithms"] and "NeurIPS 2026" in first["notes"]
    assert seed["title"] == SEED.title and "year" not in seed


def test_csl_json_has_the_fields_zotero_reads():
    items = json.loads(written("csljson", [ENTRY, SEED]))
    first = items[0]
    assert first["id"] == "arxiv-2611.00001" and first["type"] == "article"
    assert first["title"] == HOSTILE
    assert first["author"][:3] == [{"family": "Doe", "given": "Jane Q."}, {"family": "Zhang", "given": "Wei"},
                                   {"family": "Plato"}]
    assert first["author"][4] == {"family": "van der Schaar", "given": "Mihaela"}
    assert export.name_parts("Fernando De la Torre") == ("De la Torre", "Fernando")
    # a name in its own script after it: filed under Zhang, not under '(张伟)'
    assert export.name_parts("Wei Zhang (张伟)") == ("Zhang (张伟)", "Wei")
    assert export.name_parts("Ana de la Cruz (Anita Cruz)") == ("de la Cruz (Anita Cruz)", "Ana")
    assert first["issued"] == {"date-parts": [[2026, 11, 27]]}
    assert first["URL"] == ENTRY.url and first["DOI"] == "10.48550/arXiv.2611.00001"
    assert first["abstract"] == ENTRY.abstract
    assert items[1]["title"] == SEED.title and "issued" not in items[1] and "DOI" not in items[1]
    assert json.loads(written("csljson", [])) == []


def test_json_lines_carry_the_whole_entry():
    lines = written("jsonl", [ENTRY, SEED]).splitlines()
    back = [json.loads(line) for line in lines]
    assert back[0]["title"] == HOSTILE and back[0]["links"] == [["code", "https://github.com/example/grpo"]]
    assert back[1]["origin"] == "mine.md" and back[1]["curated"] is True


def test_topic_and_since_select(tmp_path):
    older = replace(ENTRY, key="arxiv:2610.00001", date="2026-10-01")
    found = [ENTRY, older, SEED]
    assert [e.key for e in export.select(found, since=date(2026, 11, 1))] == [ENTRY.key]
    assert [e.key for e in export.select(found, topic="agentic")] == [SEED.key]


def test_export_through_the_cli(tmp_path, cli):
    papers = [rl_paper(1, DAY), rl_paper(2, DAY, title="GRPO with {braces} & 100% $\\alpha$ reward_shaping"),
              rl_paper(3, datetime(2026, 10, 20, 12, tzinfo=UTC))]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")
    out = cli("--config", str(config), "export", "--format", "csljson").stdout
    items = json.loads(out)
    assert sorted(i["number"] for i in items) == ["2611.00001", "2611.00002", "2611.00003"]
    hostile = next(i for i in items if i["number"] == "2611.00002")
    assert hostile["title"] == "GRPO with {braces} & 100% α reward_shaping"  # TeX read, the rest kept
    target = tmp_path / "recent.bib"
    done = cli("--config", str(config), "export", "--format", "bibtex", "--since", "2026-10-25",
               "-o", str(target))
    assert done.stdout.strip() == str(target)
    text = target.read_text(encoding="utf-8")
    assert "2611.00001" in text and "2611.00003" not in text
    assert "GRPO with \\{braces\\} \\& 100\\% {$\\alpha$} reward\\_shaping" in text
    bad = cli("--config", str(config), "export", "--format", "ris", "--since", "last week", check=2)
    assert stderr_lines(bad) == ["rl-digest: --since: not a date: 'last week' (write it as YYYY-MM-DD)"]
    empty = cli("--config", str(config), "export", "--format", "jsonl", "--topic", "systems")
    assert empty.stdout == ""


def test_a_language_not_configured_is_left_out():
    full = replace(ENTRY, title_zh="中文标题", summary_zh="中文摘要", summary_en="English line",
                   key_points_zh=("要点",), key_points_en=("point",))
    english = export.in_languages(full, ["en"])
    assert (english.title_zh, english.summary_zh, english.key_points_zh) == (None, None, ())
    assert (english.summary_en, english.key_points_en, english.title) == ("English line", ("point",), HOSTILE)
    assert "中" not in written("jsonl", [english])
    assert export.in_languages(full, ["zh", "en"]) is full


def test_a_big_team_is_cited_whole_and_a_list_cut_at_the_bound_says_so_in_every_format(tmp_path, cli):
    """DeepSeek-R1 lists about 200 authors: the exports cited its first 100 as the whole list.
    A list longer than text.AUTHORS_MAX (1,000) is cut, and each format says more exist."""
    bibtexparser, rispy = pytest.importorskip("bibtexparser"), pytest.importorskip("rispy")

    def team(size: int) -> tuple[str, ...]:
        return tuple(f"Ann {''.join(chr(97 + int(d)) for d in str(n)).capitalize()}son" for n in range(size))

    big, huge = (replace(rl_paper(n, DAY), authors=team(size)) for n, size in ((1, 200), (2, 5000)))
    with ArxivServer([big, huge]) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")

    def exported(fmt: str) -> str:
        return cli("--config", str(config), "export", "--format", fmt).stdout

    bib = {e["eprint"]: re.split(r" and (?![^{}]*\})", e["author"])
           for e in bibtexparser.loads(exported("bibtex")).entries}
    assert bib["2611.00001"] == [export.cited(a) for a in big.authors]  # all 200, no 'others'
    assert bib["2611.00002"] == [*map(export.cited, huge.authors[:1000]), "others"]  # BibTeX's et al.

    ris = {r["doi"]: r for r in rispy.loads(exported("ris"))}
    whole, cut = ris["10.48550/arXiv.2611.00001"], ris["10.48550/arXiv.2611.00002"]
    assert whole["authors"] == [export.cited(a) for a in big.authors]
    assert not any("names more" in note for note in whole["notes"])
    assert cut["authors"] == [export.cited(a) for a in huge.authors[:1000]]  # no 'others' as a person
    assert "Authors: the first 1000 listed here; the paper names more." in cut["notes"]

    csl = {i["number"]: i["author"] for i in json.loads(exported("csljson"))}
    assert [a["family"] for a in csl["2611.00001"]] == [a.split()[-1] for a in big.authors]
    assert [a.get("family") for a in csl["2611.00002"][:1000]] == [a.split()[-1] for a in huge.authors[:1000]]
    assert csl["2611.00002"][1000:] == [{"literal": "others"}]  # citeproc's explicit et al.

    lines = {e["key"]: e["authors"] for e in map(json.loads, exported("jsonl").splitlines())}
    assert lines["arxiv:2611.00001"] == list(big.authors)
    assert lines["arxiv:2611.00002"] == [*huge.authors[:1000], "others"]
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert f"{', '.join(huge.authors[:3])} et al." in digest and "others" not in digest


def test_a_list_ending_in_et_al_is_cited_as_cut_not_with_a_person_named_et_al(tmp_path, cli):
    """A submitter may end the list with "et al." (or "et al", "and others"): the API gave a
    person of that name ('al., et' in BibTeX, {"family": "al.", "given": "et"} in CSL-JSON,
    an AU line in RIS) and the digest read "Ada Lovelace, Alan Turing, et al." as three.
    Such a list is cut: each format says more exist as it does for one cut at the bound."""
    bibtexparser, rispy = pytest.importorskip("bibtexparser"), pytest.importorskip("rispy")
    endings = [("Ada Lovelace", "Alan Turing", "et al."), ("Ada Lovelace", "Alan Turing et al"),
               ("Ada Lovelace", "Alan Turing", "and others")]
    papers = [replace(rl_paper(n, DAY), authors=names) for n, names in enumerate(endings, 1)]
    with ArxivServer(papers) as arxiv:
        config = full_config(tmp_path, arxiv, enrich={"provider": "none"})
        cli("--config", str(config), "run", "--as-of", "2026-11-02")

    def exported(fmt: str) -> str:
        return cli("--config", str(config), "export", "--format", fmt).stdout

    for entry in bibtexparser.loads(exported("bibtex")).entries:
        assert entry["author"] == "Lovelace, Ada and Turing, Alan and others"
    for item in json.loads(exported("csljson")):
        assert item["author"] == [{"family": "Lovelace", "given": "Ada"}, {"family": "Turing", "given": "Alan"},
                                  {"literal": "others"}]
    for record in rispy.loads(exported("ris")):
        assert record["authors"] == ["Lovelace, Ada", "Turing, Alan"]
        assert "Authors: the first 2 listed here; the paper names more." in record["notes"]
    digest = (tmp_path / "out" / "digests" / "2026-11-02.md").read_text(encoding="utf-8")
    assert digest.count("Ada Lovelace, Alan Turing et al. ·") == 3
    assert "others" not in digest and ", et al." not in digest
