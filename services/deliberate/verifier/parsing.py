"""Deterministic extraction of answers, numbers and JSON from LLM drafts.

Everything here is pure: no I/O, no randomness, and nothing raises. Each function bounds its work so a
hostile draft (megabytes of text, 100k nested brackets, 10,000-digit numbers, lone surrogates) costs
milliseconds and yields "nothing found" or an error string instead of an exception.

Conventions:

* Numbers are read by the project's one number parser, `deliberate.selection.numbers` (what counts as
  a number, its normalized text and exact value are defined there).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import json_repair

from ..selection.numbers import last_number, normalized_if_number
from .latex import last_boxed, to_plain

# Drafts are a few hundred tokens; anything far larger is hostile or broken.
MAX_JSON_SCAN_CHARS = 200_000
# json_repair is pure Python (~1 s per 100k hostile characters): only small spans are repaired.
MAX_JSON_REPAIR_CHARS = 20_000
# Deeper than any real output schema, far below the recursion limits of json and json_repair.
MAX_JSON_DEPTH = 100


# --------------------------------------------------------------------------------------------------
# Final answers
# --------------------------------------------------------------------------------------------------

# One line that states the answer. "final answer" may appear mid-sentence ("so the final answer is
# 42"); a bare "answer" only counts at the start of a line, where it is unlikely to be prose.
_FINAL_ANSWER_LINE = re.compile(
    r"""
    (?:
        \bfinal\s+answer[*_\s]*(?:is\b|[:=])
      | ^[\s>#*_-]*(?:the\s+)?answer[*_\s]*(?:is\b|[:=])
      | ^\s*\#\#\#\#                     # GSM8K style: "#### 72"
    )
    (?P<answer>.*)
    """,
    re.IGNORECASE | re.VERBOSE,
)
# Markdown and punctuation that decorate an answer without being part of it.
_ANSWER_DECORATION = " \t*_`:"


@dataclass(frozen=True)
class FinalAnswer:
    """The answer a draft gives, and whether it came from an explicit final-answer line."""

    text: str
    from_final_line: bool


def extract_final_answer(text: str) -> str | None:
    """The answer stated by ``text``, or None when there is none.

    The LAST ``\\boxed{…}`` wins (LaTeX, as many models mark their answer). Without one, the LAST
    final-answer line wins ("Final answer: 42", "the final answer is $1,200.50", "#### 72",
    "Answer: 18"; case-insensitive; an empty marker line takes the next non-empty line). Without one,
    the last number in the text is the answer. LaTeX is read as plain text first (`latex.to_plain`:
    ``\\frac{3}{4}`` -> "3/4", ``\\( 72 \\)`` -> "72", ``\\$1{,}200`` -> "$1,200"); Markdown decoration,
    ``$…$`` math delimiters and a trailing period are stripped; an answer that is a single number is
    returned as its normalized text ("$1,200.50" -> "1200.50", "**72**" -> "72"), any other answer as
    written ("42 apples").
    """
    answer = find_final_answer(text)
    return answer.text if answer is not None else None


def find_final_answer(text: str) -> FinalAnswer | None:
    """Like `extract_final_answer`, but also tells whether a final-answer line was found."""
    if not isinstance(text, str):
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        # Braces left after the LaTeX rewrite only group ("\\boxed{{72}}"); an answer does not need them.
        answer = _clean_answer(" ".join(to_plain(boxed).replace("{", " ").replace("}", " ").split()))
        if answer:
            return FinalAnswer(text=normalized_if_number(answer), from_final_line=True)
    text = to_plain(text)
    lines = text.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = _FINAL_ANSWER_LINE.search(lines[index])
        if match is None:
            continue
        answer = _clean_answer(match["answer"]) or _answer_on_next_line(lines, index)
        if answer:
            return FinalAnswer(text=normalized_if_number(answer), from_final_line=True)
    last = last_number(text)
    return FinalAnswer(text=last.text, from_final_line=False) if last is not None else None


def _answer_on_next_line(lines: list[str], marker_index: int) -> str:
    """For "Final answer:" alone on its line: the next non-empty line, unless it is another marker."""
    for line_index in range(marker_index + 1, len(lines)):  # indexes, not a slice: no copy per marker
        line = lines[line_index]
        answer = _clean_answer(line)
        if answer:
            return "" if _FINAL_ANSWER_LINE.search(line) else answer
    return ""


def _clean_answer(answer: str) -> str:
    answer = answer.strip(_ANSWER_DECORATION)
    if answer.endswith("."):
        answer = answer[:-1].strip(_ANSWER_DECORATION)
    if len(answer) > 1 and answer[0] == "$" and answer[-1] == "$":  # math mode "$72$", "$$72$$"
        answer = answer.strip("$").strip(_ANSWER_DECORATION)
        if answer.endswith("."):
            answer = answer[:-1].strip(_ANSWER_DECORATION)
    return answer


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------

_CURLY_DOUBLE_QUOTES = str.maketrans({"“": '"', "”": '"'})
_CURLY_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})
# Curly quotes next to JSON punctuation delimit strings; elsewhere they are text inside strings.
_CURLY_DELIMITER = re.compile(r"[{\[,:]\s*[“‘]|[”’]\s*[:,}\]]")
_SINGLE_QUOTE_DELIMITER = re.compile(r"[{\[,:]\s*'|'\s*[:,}\]]")
_TRAILING_COMMA = re.compile(r",\s*[}\]]")
# A JSON string (kept as it is), or a comma before a closing bracket outside strings (dropped).
_STRING_OR_TRAILING_COMMA = re.compile(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])')
_UNQUOTED_KEY = re.compile(r"[{,]\s*[A-Za-z_$][\w$-]*\s*:")
# Only the characters that change the bracket scanner's state; everything else is skipped in C.
_SCANNER_TOKEN = re.compile(r'[\[\]{}"\\]')
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_CLOSING = {"{": "}", "[": "]"}
_JSON_FENCE_LABELS = ("json", "jsonc", "json5")


@dataclass(frozen=True)
class JsonParse:
    """The outcome of `parse_json`: a value or an error, and the repairs that were needed."""

    value: object | None
    error: str | None
    repairs: tuple[str, ...] = ()


def extract_json(text: str) -> tuple[object | None, str | None]:
    """Find and parse the JSON object or array in a free-text draft: ``(value, None)`` or
    ``(None, error)``.

    A fenced ```` ```json ```` block wins, then an unlabelled fenced block that holds an object or
    array, then the first balanced ``{...}`` / ``[...]`` span of the text (an unclosed span runs to
    the end of the text). Strict JSON is tried first; what LLMs typically break (curly quotes,
    trailing commas, single quotes, unquoted keys, truncation) is repaired with ``json_repair``.
    Never raises: oversized text, nesting deeper than ``MAX_JSON_DEPTH`` and unrepairable spans are
    reported as error strings.
    """
    result = parse_json(text)
    return result.value, result.error


def parse_json(text: str) -> JsonParse:
    """Like `extract_json`, but also names the repairs that made the JSON parseable."""
    if not isinstance(text, str):
        return JsonParse(None, f"expected text, got {type(text).__name__}")
    if len(text) > MAX_JSON_SCAN_CHARS:
        return JsonParse(None, f"draft is too large to search for JSON: {len(text)} characters > {MAX_JSON_SCAN_CHARS}")
    block = _fenced_json_block(text)
    source = block if block is not None else text
    span, parsed, strict_error = _whole_json(source)
    if span is None:
        span, error = _first_json_span(source)
        if span is None:
            return JsonParse(None, error)
        # Usually the span is the text _whole_json already failed to load strictly: not loaded twice.
        parsed = _parse_span(span, strict_error if strict_error and span.text == source.strip() else None)
    if parsed.value is None or not _ESCAPED_SURROGATE.search(span.text):
        return parsed
    value = _replace_lone_surrogates(parsed.value)
    if value == parsed.value:  # only whole pairs, which decode to one character
        return parsed
    return JsonParse(value, None, (*parsed.repairs, "unpaired surrogate escapes"))


def _replace_lone_surrogates(value: object) -> object:
    """JSON may escape half of a surrogate pair (`"\\ud83d"`: an emoji cut in two). No text holds one, and
    nothing downstream accepts it (protobuf, CEL, the answer sent back), so each becomes U+FFFD, as a lenient
    UTF-16 decoder does. Recursion is bounded: the span's nesting was checked (`MAX_JSON_DEPTH`)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(key): _replace_lone_surrogates(item) for key, item in value.items()}
    return value


def _fenced_json_block(text: str) -> str | None:
    """The content of the first ```json fence, else of the first unlabelled fence holding JSON.

    Fences are recognised only at the start of a line (as in Markdown), so a "```" inside a JSON
    string cannot open one. An unclosed fence (a draft cut off mid-block) runs to the end.
    """
    if "```" not in text:
        return None
    # split("\n"), not splitlines(): the latter also breaks at U+2028 etc., which JSON strings may hold.
    lines = text.split("\n")
    fences = [index for index, line in enumerate(lines) if "```" in line and line.strip().startswith("```")]
    fences.append(len(lines))  # an unclosed fence runs to the end
    blocks = [
        (lines[opening].strip()[3:].strip().lower(), "\n".join(lines[opening + 1 : closing]))
        for opening, closing in zip(fences[0:-1:2], fences[1::2], strict=False)
    ]

    for label, body in blocks:
        if label in _JSON_FENCE_LABELS:
            return body
    for label, body in blocks:
        if not label and body.lstrip()[:1] in ("{", "["):
            return body
    return None


def closed_json_fence(text: str) -> tuple[str, int] | None:
    """The first ```json block once its closing fence is on a complete line: its content and where that line
    ends. From then on it is the JSON `parse_json` reads whatever the draft adds (the first json-labelled block
    wins, and fences pair in order), so it can be judged before the draft ends. None while it is not closed."""
    complete = text[: text.rfind("\n") + 1]
    if "```" not in complete:
        return None
    lines = complete.split("\n")[:-1]  # split("\n") as `_fenced_json_block` does; the last piece is ""
    fences = [index for index, line in enumerate(lines) if "```" in line and line.strip().startswith("```")]
    for opening, closing in zip(fences[0::2], fences[1::2], strict=False):
        if lines[opening].strip()[3:].strip().lower() in _JSON_FENCE_LABELS:
            end = sum(len(line) + 1 for line in lines[: closing + 1])
            return "\n".join(lines[opening + 1 : closing]), end
    return None


@dataclass(frozen=True)
class _Span:
    text: str
    closed: bool  # False when the draft ends before the brackets do


def _whole_json(text: str) -> tuple[_Span | None, JsonParse | None, str | None]:
    """The common case first: `text` is exactly one strict JSON object or array (a fenced block usually is).
    Then it is also what `_first_json_span` and `_parse_span` would find and parse, so scanning it bracket by
    bracket can be skipped; that holds only while it has at most MAX_JSON_DEPTH brackets, so the scanner could
    not have refused its nesting. Otherwise (None, None, why the stripped text did not load, if it was tried)."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or stripped.count("{") + stripped.count("[") > MAX_JSON_DEPTH:
        return None, None, None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError) as exc:
        return None, None, _short(str(exc))
    return _Span(stripped, closed=True), JsonParse(value, None), None


def _first_json_span(text: str) -> tuple[_Span | None, str | None]:
    """The first balanced {...} or [...] span, tracking strings so brackets inside them don't count."""
    starts = [position for position in (text.find("{"), text.find("[")) if position >= 0]
    if not starts:
        return None, "no JSON object or array found in the draft"
    start = min(starts)
    depth = 0
    in_string = False
    escaped_position = -1
    for token in _SCANNER_TOKEN.finditer(text, start):
        char, position = token.group(), token.start()
        if in_string:
            if position == escaped_position:
                continue
            if char == "\\":
                escaped_position = position + 1
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in _CLOSING:
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return None, f"JSON nesting is deeper than {MAX_JSON_DEPTH} levels"
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return _Span(text[start : position + 1], closed=True), None
    # Unclosed: a draft cut off mid-JSON, left for the repair step to close.
    return _Span(text[start:], closed=False), None


def _parse_span(span: _Span, strict_error: str | None = None) -> JsonParse:
    """`strict_error`: why span.text did not load strictly, when that was already tried."""
    value, error = (None, strict_error) if strict_error else _strict_loads(span.text)
    if error is None:
        return JsonParse(value, None)
    # Curly double quotes used as delimiters and trailing commas are the commonest breaks, and both fix exactly
    # (json_repair costs ten times as much).
    curly_delimiters = _CURLY_DELIMITER.search(span.text) is not None
    exact = span.text.translate(_CURLY_DOUBLE_QUOTES) if curly_delimiters else span.text
    if curly_delimiters:
        value, _ = _strict_loads(exact)
        if value is not None:
            return JsonParse(value, None, ("curly quotes",))
    if _TRAILING_COMMA.search(exact):
        value, _ = _strict_loads(_STRING_OR_TRAILING_COMMA.sub(_keep_string_drop_comma, exact))
        if value is not None:
            return JsonParse(value, None, ("curly quotes", "trailing commas")[not curly_delimiters :])
    if len(span.text) > MAX_JSON_REPAIR_CHARS:
        size = len(span.text)
        return JsonParse(
            None, f"invalid JSON ({error}); too large to repair: {size} characters > {MAX_JSON_REPAIR_CHARS}"
        )
    candidate = span.text.translate(_CURLY_QUOTES) if curly_delimiters else span.text
    try:
        value = json_repair.repair_json(candidate, return_objects=True)
    except Exception as exc:  # json_repair is third-party: never let its failures escape
        return JsonParse(None, f"invalid JSON ({error}); repair failed: {type(exc).__name__}")
    if not _is_plausible_repair(span.text, value):
        return JsonParse(None, f"invalid JSON ({error}); nothing parseable to repair")
    return JsonParse(value, None, _describe_repairs(span, curly_delimiters))


def _keep_string_drop_comma(match: re.Match[str]) -> str:
    return match.group(1) or match.group(2)


def _strict_loads(span: str) -> tuple[object | None, str | None]:
    try:
        value = json.loads(span)
    except (ValueError, RecursionError) as exc:  # ValueError also covers ints over Python's digit limit
        return None, _short(str(exc))
    if not isinstance(value, dict | list):
        return None, f"expected an object or array, got {type(value).__name__}"
    return value, None


def _is_plausible_repair(span: str, value: object) -> bool:
    """json_repair always returns something; keep it only if it is the kind of container the span
    opened and not an empty one conjured from junk (json_repair("{x}") is ['x}'])."""
    expected_type = dict if span.startswith("{") else list
    if not isinstance(value, expected_type):
        return False
    return bool(value) or "".join(span.split()) in ("{}", "[]")


def _describe_repairs(span: _Span, curly_delimiters: bool) -> tuple[str, ...]:
    """Name what was broken, for an auditable message; best effort, in a fixed order."""
    repairs = []
    if curly_delimiters:
        repairs.append("curly quotes")
    if _SINGLE_QUOTE_DELIMITER.search(span.text):
        repairs.append("single quotes")
    if _TRAILING_COMMA.search(span.text):
        repairs.append("trailing commas")
    if _UNQUOTED_KEY.search(span.text):
        repairs.append("unquoted keys")
    if not span.closed:
        repairs.append("unclosed brackets")
    return tuple(repairs) or ("malformed JSON",)


def _short(message: str, limit: int = 120) -> str:
    first_line = message.splitlines()[0] if message else ""
    return first_line if len(first_line) <= limit else first_line[: limit - 1] + "…"
