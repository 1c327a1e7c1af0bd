"""Word 1- and 2-grams of many texts at once: as strings to train on, as hashes to score with.

The text model reads lower-cased words (runs of a-z and 0-9); a word up to three words
after a negation, separated from it by blanks only, is read as negated ("without rl or
grpo" gives "~rl", "~or", "~grpo"): a bag of words cannot otherwise tell "trained with RL"
from "trained without RL". Scoring a week of papers one regex and one Python string per
word at a time was the slow half of ranking, so the words are found with numpy over all
texts at once and named by a 64-bit polynomial hash; training and `strongest` take the
same words as strings, so both sides read the same grams by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NEGATIONS = ("without", "no", "not", "unlike", "instead", "rather", "beyond")
REACH = 3  # words after a negation that it covers
_SEPARATOR = "\x00"  # between texts: neither a word nor a blank, so nothing runs across it
_P = 0x100000001B3  # odd multipliers (mod 2**64) of the word hash and of gram composition
_P_INVERSE = pow(_P, -1, 1 << 64)
_NEGATED_MIX, _PAIR_MIX = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
_BLANK = np.zeros(256, dtype=bool)
_BLANK[[ord(c) for c in " \t\n"]] = True


@dataclass(frozen=True)
class Words:
    """The words of a batch of texts: where each starts and ends in the joined lower-cased
    text, which text it belongs to, whether it is negated, and its hash."""

    joined: str
    starts: np.ndarray
    ends: np.ndarray
    text: np.ndarray  # index of the text each word belongs to
    negated: np.ndarray
    hashes: np.ndarray  # uint64, negation included


_POWERS: dict[int, np.ndarray] = {}


def _powers(base: int, n: int) -> np.ndarray:
    """base**0 .. base**(n-1) modulo 2**64 (kept, and grown when a longer text comes)."""
    known = _POWERS.get(base)
    if known is None or len(known) < n:
        out = np.full(max(n, 1 << 19), base, dtype=np.uint64)
        out[:1] = 1
        known = _POWERS[base] = np.cumprod(out, dtype=np.uint64)
    return known[:n]


def _tokens(joined: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(codes, wordish, starts, ends, hashes) of the words of lower-cased text. One byte a
    character: what is not Latin-1 becomes "?", like any character above 126 neither a
    word nor a blank (a quarter of the memory of 32-bit codes, and as many characters)."""
    codes = np.frombuffer(joined.encode("latin-1", "replace"), dtype=np.uint8)
    wordish = ((codes - np.uint8(97)) < 26) | ((codes - np.uint8(48)) < 10)  # a-z, 0-9 (wrapping)
    padded = np.zeros(len(codes) + 2, dtype=bool)
    padded[1:-1] = wordish
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[0::2], edges[1::2]
    # the hash of chars s..e-1, sum(c[s+i] * P**i), is (A[e] - A[s]) * P**-s with A the prefix sums
    prefix = np.zeros(len(codes) + 1, dtype=np.uint64)
    np.cumsum(codes.astype(np.uint64) * _powers(_P, len(codes)), dtype=np.uint64, out=prefix[1:])
    hashes = (prefix[ends] - prefix[starts]) * _powers(_P_INVERSE, len(codes) + 1)[starts]
    return codes, wordish, starts, ends, hashes


def _pairs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return first * _PAIR_MIX + second


_NEGATION_HASHES = _tokens(" ".join(NEGATIONS))[4]


def words(texts: Sequence[str]) -> Words:
    """Every word of every text, in order."""
    joined = _SEPARATOR.join([text.lower() for text in texts])  # most texts are ASCII: quick to lower
    if joined.count(_SEPARATOR) != max(0, len(texts) - 1):  # a text of its own holds one
        joined = _SEPARATOR.join(t.replace(_SEPARATOR, " ") for t in texts).lower()
    small, wordish, starts, ends, hashes = _tokens(joined)
    n = len(starts)
    text = np.searchsorted(np.flatnonzero(small == ord(_SEPARATOR)), starts)
    # a gap between two words is blank when it holds only blanks (a separator is not one)
    # most gaps are one character: look at it; count the strange characters of the others
    blank_gap = np.zeros(n, dtype=bool)
    wide = starts[1:] - ends[:-1] > 1
    blank_gap[1:] = _BLANK[small[ends[:-1]]]
    if wide.any():
        strange = np.flatnonzero(~(wordish | _BLANK[small]))
        after, before = ends[:-1][wide], starts[1:][wide]
        blank_gap[1:][wide] = np.searchsorted(strange, after) == np.searchsorted(strange, before)
    is_negation = np.zeros(n, dtype=bool)
    for negation in _NEGATION_HASHES:
        is_negation |= hashes == negation
    negated = np.zeros(n, dtype=bool)
    chain = blank_gap.copy()  # chain[j]: the gaps before words j-back+1 .. j are all blank
    for back in range(1, REACH + 1):
        if back > 1:
            chain[back - 1:] &= blank_gap[:n - back + 1]
        negated[back:] |= chain[back:] & is_negation[:n - back]
    hashes = np.where(negated, hashes * _NEGATED_MIX + np.uint64(1), hashes)
    return Words(joined, starts, ends, text, negated, hashes)


def strings(found: Words, count: int) -> list[list[str]]:
    """The grams of each of `count` texts as strings ("~rl", "policy optimization")."""
    out: list[list[str]] = [[] for _ in range(count)]
    names = [("~" if neg else "") + found.joined[s:e] for s, e, neg in
             zip(found.starts.tolist(), found.ends.tolist(), found.negated.tolist(), strict=True)]
    for index, name in zip(found.text.tolist(), names, strict=True):
        out[index].append(name)
    return [w + [f"{a} {b}" for a, b in zip(w, w[1:], strict=False)] for w in out]


def hashed(found: Words) -> tuple[np.ndarray, np.ndarray]:
    """(gram hashes, index of their text): the words, then the pairs of neighbours in one text."""
    same = found.text[1:] == found.text[:-1]
    pairs = _pairs(found.hashes[:-1], found.hashes[1:])[same]
    return np.concatenate((found.hashes, pairs)), np.concatenate((found.text, found.text[1:][same]))


def hash_grams(grams: Sequence[str]) -> np.ndarray:
    """The hash `hashed` gives each gram written as `strings` writes it (one or two words,
    "~" before a negated one)."""
    return hash_joined(_SEPARATOR.join(grams), _SEPARATOR) if grams else np.zeros(0, dtype=np.uint64)


def hash_joined(joined: str, separator: str) -> np.ndarray:
    """`hash_grams` of the grams of `joined`, one string with `separator` between them (the
    shipped model keeps its grams so: one string loads faster than 40,000). A piece of about
    _PIECE characters at a time: the prefix sums of a refit's 4 MB of grams took 200 MB."""
    pieces, start = [], 0
    while len(joined) - start > _PIECE and (cut := joined.rfind(separator, start, start + _PIECE)) > start:
        pieces.append(_hash_piece(joined[start:cut], separator))
        start = cut + 1
    return np.concatenate([np.zeros(0, dtype=np.uint64), *pieces, _hash_piece(joined[start:], separator)])


_PIECE = 1 << 18


def _hash_piece(joined: str, separator: str) -> np.ndarray:
    if not joined:
        return np.zeros(0, dtype=np.uint64)
    small, _, starts, _, hashes = _tokens(joined)
    negated = np.zeros(len(starts), dtype=bool)
    negated[starts > 0] = small[starts[starts > 0] - 1] == ord("~")
    hashes = np.where(negated, hashes * _NEGATED_MIX + np.uint64(1), hashes)
    text = np.searchsorted(np.flatnonzero(small == ord(separator)), starts)
    first = np.searchsorted(text, np.arange(joined.count(separator) + 1))
    sizes = np.diff(np.append(first, len(starts)))
    second = np.minimum(first + 1, len(starts) - 1)
    return np.where(sizes == 1, hashes[first], _pairs(hashes[first], hashes[second]))


@dataclass(frozen=True)
class Table:
    """Gram hash -> row, an open-addressing hash table in numpy (linear probing): a look-up
    is one or two gathers, where a binary search over 40k sorted hashes takes sixteen."""

    hashes: np.ndarray  # uint64, 0 where a slot is empty
    rows: np.ndarray  # int32, the row of the gram in each slot
    shift: np.uint64
    longest: int  # the most slots any key is past its home

    @classmethod
    def build(cls, keys: np.ndarray) -> Table:
        keys = np.where(keys == 0, np.uint64(1), keys)  # 0 marks an empty slot
        bits = max(4, int(len(keys) * 6 - 1).bit_length())  # at most a sixth full: short walks
        size, shift = 1 << bits, np.uint64(64 - bits)
        hashes, rows = np.zeros(size, dtype=np.uint64), np.full(size, -1, dtype=np.int32)
        home = _home(keys, shift)
        waiting, probe, longest = np.arange(len(keys)), np.zeros(len(keys), dtype=np.int64), 0
        while len(waiting):
            slot = (home[waiting] + probe[waiting]) & (size - 1)
            free = hashes[slot] == 0
            taken, first = np.unique(slot[free], return_index=True)  # one key per free slot
            winners = waiting[free][first]
            hashes[taken], rows[taken] = keys[winners], winners
            longest = max(longest, int(probe[winners].max(initial=0)))
            done = np.zeros(len(waiting), dtype=bool)
            done[np.flatnonzero(free)[first]] = True
            waiting = waiting[~done]
            probe[waiting] += 1
        return cls(hashes, rows, shift, longest)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The row of each key, -1 where it is not in the table. The first probe settles most
        keys (a gram in its home slot, or an empty one), so it runs on all keys without
        indirection; the few left walk on."""
        keys = np.where(keys == 0, np.uint64(1), keys)
        mask = len(self.hashes) - 1
        slot = _home(keys, self.shift)
        held = self.hashes[slot]
        found = held == keys
        out = np.where(found, self.rows[slot], -1)
        active = np.flatnonzero(~found & (held != 0))
        slot = (slot[active] + 1) & mask
        for _ in range(self.longest):
            if not len(active):
                break
            held = self.hashes[slot]
            found = held == keys[active]
            out[active[found]] = self.rows[slot[found]]
            going = ~found & (held != 0)
            active, slot = active[going], (slot[going] + 1) & mask
        return out


def _home(keys: np.ndarray, shift: np.uint64) -> np.ndarray:
    """A key's first slot: the top bits of key x an odd constant (short words hash to small
    numbers, so their own top bits are all zero)."""
    return ((keys * _NEGATED_MIX) >> shift).astype(np.int64)
