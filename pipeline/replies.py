"""What the LLM is asked to reply, and how a reply it sent is read.

Apart from the Enricher because it is pure: no client, no cache, no templates. The reply
models (pydantic, extra="forbid") say what each task's answer must hold; wire_schema gives
a model's schema in the subset strict mode accepts; parse_reply takes the text a model sent
(reasoning blocks, code fences, Markdown, a refusal, the wrong language) to a valid reply
or a ReplyError that says what was wrong, which the Enricher asks again with. doctor reads
its probe's reply with the same parse_reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from pipeline.text import at_sentence, clean, clean_name, clip

# --- reply models --------------------------------------------------------------------------


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value.strip()


# Checked here, not in the schema: strict mode has no minLength (see wire_schema).
# Every field is bounded: a reply over a bound is refused and asked for again, and the
# second reply is cut at a sentence, a list to its first items (parse_reply(fit=True)).
# Characters, not bytes.
Label = Annotated[str, StringConstraints(max_length=40), AfterValidator(_not_blank)]
Line = Annotated[str, StringConstraints(max_length=400), AfterValidator(_not_blank)]
Text = Annotated[str, StringConstraints(max_length=1500), AfterValidator(_not_blank)]
Long = Annotated[str, StringConstraints(max_length=4000), AfterValidator(_not_blank)]


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PaperKind = Literal["method", "analysis", "benchmark", "system", "survey", "position"]


class PaperSummary(Reply):
    title_zh: Line = Field(description="the title in Chinese; method names kept as they are")
    summary_zh: Text = Field(description="1-2 sentences: 本文提出了…，通过…，从而…")
    summary_en: Text = Field(description="one sentence in English saying the same")
    why_zh: Text = Field(description="为何值得读: one sentence, grounded in the abstract")
    why_en: Text = Field(description="why it matters: the same sentence in English")
    kind: PaperKind = Field(description="what kind of paper it is")
    key_points_zh: list[Line] = Field(min_length=2, max_length=4, description="2-4 short points")
    key_points_en: list[Line] = Field(min_length=2, max_length=4,
                                      description="the same points in English, same order")


class RelevanceVerdict(Reply):
    relevant: bool = Field(description="true when the paper's main contribution is RL or "
                                       "preference optimisation applied to a language model")
    reason_en: Line = Field(description="one short English sentence saying why")


class SeedTranslation(Reply):
    summary_en: Long = Field(description="faithful English translation of the curated Chinese")


class Translation(Reply):
    texts_en: list[Text] = Field(description="the English of each numbered text, in order")


class Part(Reply):
    label_zh: Label = Field(description="2-5 characters, e.g. 解决方案")
    label_en: Label = Field(description="1-3 words, e.g. Approach")
    text_zh: Text
    text_en: Text


class FeaturedReading(Reply):
    headline_zh: Line = Field(description="one sentence: the paper's core problem or finding")
    headline_en: Line
    parts: list[Part] = Field(min_length=3, max_length=4, description=(
        "3-4 parts in order: problem or finding; method or design; key results; "
        "caveat or implication"))


class Cell(Reply):
    zh: Line
    en: Line


class Row(Reply):
    label_zh: Label = Field(description="the dimension, e.g. 核心问题")
    label_en: Label = Field(description="the dimension, e.g. Core problem")
    cells: list[Cell] = Field(min_length=1, description="one per paper, in the order given")


class Comparison(Reply):
    rows: list[Row] = Field(min_length=4, max_length=6, description="4-6 dimensions")
    synthesis_zh: Text = Field(description="综合洞察: 1-3 sentences connecting the papers")
    synthesis_en: Text


class FeaturedPick(Reply):
    papers: list[int] = Field(max_length=10, description=(
        "the numbers of the papers that speak to one shared question, best first; "
        "empty when no two papers share one"))
    question_zh: Annotated[str, StringConstraints(max_length=200)] = Field(
        description="the shared question in Chinese, one short sentence; empty when none")
    question_en: Annotated[str, StringConstraints(max_length=300)] = Field(
        description="the same question in English; empty when none")


class Takeaway(Reply):
    paper: int = Field(description="the number of the paper it is about, as listed")
    zh: Line = Field(description="the takeaway in Chinese, one sentence")
    en: Line = Field(description="the same takeaway in English")


class Highlights(Reply):
    items: list[Takeaway] = Field(min_length=3, max_length=5,
                                  description="3-5 takeaways of the week, the most important first")


def wire_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema in the subset OpenAI's strict mode accepts.

    extra="forbid" gives every object additionalProperties: false, and no field has a
    default, so every property is required, as strict mode wants. Length limits
    (minItems/maxItems, maxLength) are outside the subset that every strict implementation
    accepts, so they move into the description and pydantic checks them on return.
    """
    schema = model.model_json_schema()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            low, high = node.pop("minItems", None), node.pop("maxItems", None)
            longest = node.pop("maxLength", None)
            note = None
            if low is not None or high is not None:
                span = f"{low}-{high}" if high is not None else f"at least {low}"
                note = f"{span} items"
            if longest is not None:
                note = f"at most {longest} characters"
            if note:
                text = node.get("description")
                node["description"] = f"{text} ({note})" if text else note
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


# --- reading a reply -----------------------------------------------------------------------


class ReplyError(ValueError):
    """The reply was blank, not JSON, or not the schema; the message says which, briefly."""


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)  # where a code fence opens


def parse_reply(content: str | None, model: type[Reply], fit: bool = False,
                shown: Sequence[str] = ("zh", "en")) -> Reply:
    """Strip <think> blocks and code fences, parse the JSON object, clean and validate it.

    fit: a string over its bound is cut at a sentence, a list to its first items (each
    list is asked for best first), instead of refusing the reply.
    shown: the languages the digest shows; a field in another one is not checked.
    """
    try:
        return _parsed(content, model, fit, shown)
    except RecursionError:  # json and the walks below recurse: a reply nested 500 deep
        raise ReplyError("the reply was nested too deeply to be the JSON object asked for") from None


def _parsed(content: str | None, model: type[Reply], fit: bool, shown: Sequence[str]) -> Reply:
    data = _cleaned(_json_in(content))
    wrong = _unreadable(data, shown)
    if wrong:
        raise ReplyError("; ".join(wrong[:5]))
    return _validated(data, model, fit)


# braces tried for the object's start: each try reads on from it, so a long reply that is no
# JSON costs a few passes over it, not one a brace
_BRACES = 8


def _json_in(content: str | None) -> Any:
    """The JSON a reply holds, without its <think> blocks and code fence; among words, the
    first object."""
    text = _THINK.sub("", content or "")
    if re.match(r"\s*<think>", text, re.IGNORECASE):  # reasoning that never closed
        text = ""
    text = text.strip()
    fenced = _FENCE.match(text)  # a fence cut off unclosed is still taken off
    if fenced:  # string ends, not a regex: a lazy match backtracked quadratically over whitespace
        text = text[fenced.end():].removesuffix("```").strip()
    if not text:
        raise ReplyError("the reply was blank")
    try:
        return json.loads(text)
    except ValueError:  # the object among words: the first that reads whole, whatever follows it
        pass            # (a note "the {kind} field is set", a second copy of the object)
    decoder, start = json.JSONDecoder(), text.find("{")
    for _ in range(_BRACES):  # braces before it hold no object ("I filled the {summary_en} field:")
        if start < 0:
            break
        try:
            return decoder.raw_decode(text, start)[0]
        except ValueError:
            start = text.find("{", start + 1)
    raise ReplyError("the reply was not a JSON object")


def _validated(data: Any, model: type[Reply], fit: bool) -> Reply:
    """The reply as `model`; with fit, what is only over its bounds is cut once, then checked again."""
    for _ in range(2):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not fit or any(e["type"] not in ("string_too_long", "too_long") for e in errors):
                problems = [f"{_where(e['loc'])}: {e['msg']}" for e in errors]
                raise ReplyError("; ".join(problems[:5])) from None
            # strings first, then lists from the innermost: a cut list moves no string's place
            for error in sorted(errors, key=lambda e: (e["type"] == "too_long", -len(e["loc"]))):
                _cut(data, error["loc"], error["ctx"]["max_length"])
            fit = False
    raise AssertionError("unreachable")


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ENGLISH_WORD = re.compile(r"\b[a-z]{2,}\b")  # prose: a name is capitalised (GRPO, Qwen3-VL)
# a word with a small letter, hyphened words as one: "This", "off-policy" (not GRPO, PPO, LLM)
_LATIN_WORD = re.compile(r"\b[A-Za-z]*[a-z][A-Za-z]*(?:-[A-Za-z]+)*\b")
# A Chinese field reads as Chinese when its Han characters are at least twice its English
# words (a Chinese word is about two characters). Chosen on 2,668 Chinese summaries of
# another pipeline's LLM, full of GRPO, LLM and model names, and the seeds': all pass, the
# lowest at 0.83; "This paper proposes a method，一种方法" is 0.44.
_CHINESE_SHARE = 2 / 3
# a field that opens as a model declining ("I'm sorry, but I can't help with that.", "抱歉，
# 我无法…"): valid JSON, but no summary; a paper's own title may say anything (not checked)
_REFUSAL = re.compile(
    r"\s*(?:I(?:['’]m| am) (?:sorry|unable|not able)|Sorry,|I apologi[sz]e|As an AI\b"
    r"|I (?:can(?:['’]t|not| not)|won['’]t|will not) (?:help|assist|provide|comply|fulfil|do |"
    r"write|summari[sz]e|translate|answer)|Unfortunately, I (?:can|am)"
    r"|(?:非常|很)?抱歉|对不起|不好意思|我(?:无法|不能|没法)(?:帮|协助|提供|完成|满足|回答|处理|总结|翻译|为)"
    r"|作为(?:一个)?(?:AI|人工智能|语言模型))")
# fields a model may rightly leave in English: a title, a 2-5 character label ("RL"), the
# comparison's cells (a model name, a benchmark: "Qwen2.5-7B on MATH-500")
_EITHER = ("title_zh", "label_zh", "cells")


def _unreadable(data: Any, shown: Sequence[str], path: str = "",
                    lang: str | None = None) -> list[str]:
    """Chinese fields written in English, English ones in Chinese (small local models do
    both): a reply a reader of that language could not read, asked again, then left out.
    A Chinese field is wrong when it has English prose (three small-letter words or more) and
    is not mostly Chinese (_CHINESE_SHARE), so a key point that is a model name and a score
    ("AIME 2024: 50 pts (Qwen2.5-32B)") and a short point with two terms stay, and "This
    paper proposes a method，一种方法" does not. An English field is wrong when a third of it is
    Han characters, or when it has four or more and its Chinese words (two characters each)
    are as many as its English ones: a Chinese point full of names and scores ("在 Qwen2.5-7B
    与 Llama-3.1-8B 上，AIME 2024 提升 12.5 分") is mostly not Han, while an English sentence
    naming one Chinese term stays. Only the `shown` languages are checked: no reader sees the
    others. A field that is a refusal (_REFUSAL) is unreadable in any language."""
    if isinstance(data, dict):
        return [problem for key, value in data.items() if key not in _EITHER
                for problem in _unreadable(value, shown, f"{path}.{key}".strip("."),
                                               _language(key, lang))]
    if isinstance(data, list):
        return [problem for n, value in enumerate(data)
                for problem in _unreadable(value, shown, f"{path}.{n}", lang)]
    if not isinstance(data, str):
        return []
    if _REFUSAL.match(data):
        return [f"{_where((path,))}: the model refused ({clip(clean_name(data), 100)})"]
    if lang not in shown or len(data.strip()) < 12:
        return []
    han = len(_HAN.findall(data))
    if lang == "zh" and len(_ENGLISH_WORD.findall(data)) >= 3:  # a short point: "rollout 与 token 对齐"
        words = len(_LATIN_WORD.findall(data))
        if han < (han + words) * _CHINESE_SHARE:
            return [f"{_where((path,))}: not in Chinese"]
    if lang == "en" and (han > len(data) * 0.3 or han >= 4 and han >= 2 * len(_LATIN_WORD.findall(data))):
        return [f"{_where((path,))}: not in English"]
    return []


def _language(key: str, outer: str | None) -> str | None:
    """The language a reply's field is to be in, by its name (`zh`, `summary_en`), else
    its parent's."""
    for lang in ("zh", "en"):
        if key == lang or key.endswith("_" + lang):
            return lang
    return outer


def _where(loc: tuple[Any, ...]) -> str:
    """A field's path in a reply, as an error names it: a key the model made up is outside
    text, so one short line (a newline in it split the log line, and status's)."""
    return clip(clean_name(".".join(str(p) for p in loc)), 80) or "reply"


# Markdown and HTML a model writes into a field though the prompt asks for plain text
# ("**GRPO-X** improves *reasoning*", "`rollout reuse`", "<b>Table 1</b>", a point "- Method:
# …"): the digest escapes every field, so a reader saw the asterisks, backticks and tags.
# (not in a word: "x**2", "Q*"; each mark's text bounded, so an unclosed one is not read on)
_MARKUP = re.compile(r"(?<![A-Za-z0-9_*])(\*{1,3})(?=[^\s*])(?P<text>[^*\n]{1,300}?)(?<=[^\s*])\1"
                     r"(?![A-Za-z0-9_*])|`(?=\S)(?P<code>[^`\n]{1,300}?)(?<=\S)`")
_TAG = re.compile(r"(?i)</?(?:b|i|em|strong|code|u)>")
_BULLET = re.compile(r"^\s*[-*•]\s+")


def _plain(text: str) -> str:
    """The text without Markdown emphasis, code marks, inline HTML tags or a leading bullet."""
    if not any(mark in text for mark in "*`<-•"):
        return text
    text = _BULLET.sub("", text)
    for _ in range(2):  # "**`code`**": one mark inside another
        text = _MARKUP.sub(lambda m: m.group("text") or m.group("code"), text)
    return _TAG.sub("", text)


def _cleaned(data: Any, key: str = "") -> Any:
    """Every string of a reply through clean() (no lone surrogates, controls or overrides)
    and _plain()."""
    if isinstance(data, str):
        return _plain(clean_name(data) if key.startswith("title") else clean(data))
    if isinstance(data, dict):
        return {k: _cleaned(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [_cleaned(v, key) for v in data]
    return data


def _cut(data: Any, loc: tuple[Any, ...], limit: int) -> None:
    """Shorten the string at `loc` in place to its last whole sentence within `limit`, or
    the list there to its first `limit` items."""
    *path, last = loc
    for step in path:
        data = data[step]
    value = data[last]
    data[last] = value[:limit] if isinstance(value, list) else at_sentence(value.strip(), limit)
