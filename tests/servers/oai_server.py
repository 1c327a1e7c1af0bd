"""The OAI-PMH part of the arXiv stand-in: Identify and ListRecords with arXivRaw records.

Shapes follow arXiv's OAI-PMH 2.0 answers (https://oaipmh.arxiv.org/oai): sets
per category (`cs:cs:LG`), `from` on the record's datestamp, resumption tokens
with completeListSize and cursor, noRecordsMatch for an empty range, and an
arXivRaw record with every version and its date.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from xml.sax.saxutils import escape

from pipeline.models import Paper

_HEAD = (
    "<?xml version='1.0' encoding='UTF-8'?>\n"
    '<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/ '
    'http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">\n'
    "  <responseDate>{now}</responseDate>\n"
    "  <request{attrs}>{base}</request>\n"
)


def answer(papers: list[Paper], query: dict[str, str], base: str, page_size: int,
           datestamp) -> bytes:
    """One OAI-PMH answer; `datestamp(paper)` says when arXiv last changed its record."""
    verb = query.get("verb", "")
    attrs = "".join(f' {k}="{escape(v)}"' for k, v in sorted(query.items()))
    head = _HEAD.format(now=_iso(datetime.now(UTC)), attrs=attrs, base=escape(base))
    if verb == "Identify":
        body = (
            "  <Identify>\n    <repositoryName>arXiv</repositoryName>\n"
            f"    <baseURL>{escape(base)}</baseURL>\n    <protocolVersion>2.0</protocolVersion>\n"
            "    <adminEmail>help@arxiv.org</adminEmail>\n"
            "    <earliestDatestamp>2005-09-16</earliestDatestamp>\n"
            "    <deletedRecord>persistent</deletedRecord>\n"
            "    <granularity>YYYY-MM-DD</granularity>\n  </Identify>\n"
        )
    elif verb == "ListRecords":
        body = _list_records(papers, query, page_size, datestamp)
    else:
        body = f'  <error code="badVerb">Illegal OAI verb: {escape(verb)}</error>\n'
    return (head + body + "</OAI-PMH>\n").encode()


def _list_records(papers: list[Paper], query: dict[str, str], page_size: int, datestamp) -> str:
    token = query.get("resumptionToken")
    if token:
        spec, since, offset = token.split("|")
        cursor = int(offset)
    else:
        if query.get("metadataPrefix") != "arXivRaw":
            return '  <error code="cannotDisseminateFormat">only arXivRaw here</error>\n'
        spec, since, cursor = query.get("set", ""), query.get("from", "0001-01-01"), 0
    start = date.fromisoformat(since)
    found = sorted((p for p in papers if _in_set(p, spec) and datestamp(p) >= start),
                   key=lambda p: (datestamp(p), p.id))
    if not found:
        return '  <error code="noRecordsMatch">No records match</error>\n'
    page = found[cursor : cursor + page_size]
    records = "".join(_record(p, spec, datestamp(p)) for p in page)
    more = cursor + page_size < len(found)
    next_token = f"{spec}|{since}|{cursor + page_size}" if more else ""
    resumption = (f'    <resumptionToken cursor="{cursor}" completeListSize="{len(found)}">'
                  f"{escape(next_token)}</resumptionToken>\n") if token or more else ""
    return f"  <ListRecords>\n{records}{resumption}  </ListRecords>\n"


def cut(page: bytes, records: int | None) -> bytes:
    """The page as a dropped connection passes it on: ending right after the given record."""
    if records is None:
        return page
    end = 0
    for _ in range(records):
        end = page.index(b"</record>", end) + len(b"</record>")
    return page[:end]


def _in_set(paper: Paper, spec: str) -> bool:
    parts = spec.split(":")
    wanted = f"{parts[1]}.{parts[2]}" if len(parts) == 3 else parts[0]
    return any(cat == wanted or cat.startswith(wanted + ".") for cat in paper.categories)


def _record(p: Paper, spec: str, stamp: date) -> str:
    first = p.submitted or datetime(2000, 1, 1, tzinfo=UTC)
    last = p.updated or first
    versions = "".join(
        f'<version version="v{n}"><date>{format_datetime((first if n == 1 else last).astimezone(UTC), usegmt=True)}'
        f"</date><size>{100 + n}kb</size><source_type>D</source_type></version>\n"
        for n in range(1, p.version + 1)
    )
    optional = "".join(f"<{tag}>{escape(value)}</{tag}>\n" for tag, value in
                       (("comments", p.comment), ("journal-ref", p.journal_ref)) if value)
    return (
        "    <record>\n      <header>\n"
        f"        <identifier>oai:arXiv.org:{p.id}</identifier>\n"
        f"        <datestamp>{stamp.isoformat()}</datestamp>\n"
        f"        <setSpec>{escape(spec)}</setSpec>\n      </header>\n      <metadata>\n"
        '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://arxiv.org/OAI/arXivRaw/ http://arxiv.org/OAI/arXivRaw.xsd">\n'
        f"<id>{p.id}</id>\n<submitter>{escape(p.authors[0] if p.authors else 'Anon')}</submitter>\n"
        f"{versions}<title>{escape(p.title)}</title>\n"
        f"<authors>{escape(_authors(p.authors))}</authors>\n"
        f"<categories>{' '.join(p.categories)}</categories>\n{optional}"
        "<license>http://creativecommons.org/licenses/by/4.0/</license>\n"
        f"<abstract>  {escape(p.abstract)}\n</abstract>\n</arXivRaw>\n"
        "      </metadata>\n    </record>\n"
    )


def _authors(names: tuple[str, ...]) -> str:
    """arXivRaw writes 'A, B and C'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def default_datestamp(paper: Paper) -> date:
    """arXiv stamps a record when it is announced: the evening after submission, give or take."""
    return ((paper.updated or paper.submitted or datetime(2000, 1, 1, tzinfo=UTC)) + timedelta(days=1)).date()
