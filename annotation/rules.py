"""The caption rules: one table for the server and the HIT page.

AudioCaps asked workers to describe only what is heard, in one present-tense sentence,
without transcribing speech, naming people or starting with "there is". Each rule here has
a code, a level ("error" blocks submitting, "warning" only advises), a message and a check.
`assignment_submit` runs `check()`; the HIT page embeds `table()` as JSON and
static/caption_rules.js runs the very same rules while the worker types, so both sides
give the same messages.

The regular expressions are written in the subset of syntax that Python's `re` (with
re.ASCII) and JavaScript's RegExp (without the u flag) read the same way: no named groups,
no inline flags, no \\A or \\Z, no \\p{…}, no possessive quantifiers, and no \\s (its Unicode
reach differs; whitespace is spelt out). At most one capturing group: what it matches, or
else the whole match, is the `{found}` of the message. tests/annotation/test_rules.py
compiles every pattern in both engines and compares their verdicts on sample captions.

Rules are checks a machine can make without understanding the sentence, so the ones
about meaning (present tense, detail) are conservative word lists, and the ones that may
misfire on a good caption are warnings.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from core.text import normalise

Level = Literal["error", "warning"]
# How a rule's pattern is used: "found" breaks the rule on a match, "missing" when nothing
# matches; the others are counts that need no pattern.
Check = Literal["found", "missing", "empty", "max_chars", "min_words", "max_words"]

# Only ASCII whitespace is trimmed, the same in both languages (Python's str.strip() would
# also drop U+001C..U+001F and U+0085, which the control rule must see).
TRIM = " \t\n\r"
# A word: a run of anything but spaces, tabs, line breaks, no-break and ideographic spaces.
WORD_PATTERN = r"[^ \t\n\r\u00a0\u3000]+"
_WORD = re.compile(WORD_PATTERN)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Rule:
    code: str
    level: Level
    check: Check
    # completes "The caption for clip 2 …"; placeholders: {found} {codepoint} {words}
    # {chars} {min_words} {max_words} {max_chars}
    message: str
    # how the instructions state the rule; empty for rules no honest caption meets
    guidance: str = ""
    pattern: str = ""
    ignore_case: bool = False


@dataclass(frozen=True)
class Limits:
    min_words: int
    max_words: int
    max_chars: int


@dataclass(frozen=True)
class Problem:
    code: str
    level: Level
    message: str  # the predicate: "has 2 words; write at least 3"


RULES: tuple[Rule, ...] = (
    Rule("empty", "error", "empty", "is empty"),
    Rule(
        "max_chars",
        "error",
        "max_chars",
        "is {chars} characters long; the limit is {max_chars}",
    ),
    Rule(
        "control",
        "error",
        "found",
        "contains a control character ({codepoint}); please remove it",
        # C0 and C1 controls but line breaks (the line_break rule names them), tab included: a
        # caption is one line of one CSV cell; lone UTF-16 surrogates (a JS string
        # holds an emoji as a surrogate pair, which this does not match)
        pattern=r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]"
        r"|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]",
    ),
    Rule(
        "line_break",
        "error",
        "found",
        "contains a line break; write the caption on one line",
        # inside the caption (the ends are trimmed): a caption is one line of an exported
        # CSV row, and one sentence; also the Unicode line and paragraph separators
        pattern=r"[\n\r\u2028\u2029]",
    ),
    Rule(
        "bidi",
        "error",
        "found",
        "contains a text-direction control character ({codepoint}); "
        "please type the caption without it",
        # embeddings, overrides, isolates and marks: they make text display differently
        # from its characters (a caption that reads backwards on the review page)
        pattern=r"[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]",
    ),
    Rule(
        "markup",
        "error",
        "found",
        "contains “{found}”; captions are plain text, so please leave out < and >",
        pattern=r"[<>]",
    ),
    Rule(
        "formula",
        "error",
        "found",
        "starts with “{found}”, which a spreadsheet opening the exported captions would run "
        "as a formula; start with the sound itself, e.g. “a dog barks …”",
        # The characters that start a formula in Excel, LibreOffice and Google Sheets (also
        # full-width, which some convert), after spaces a spreadsheet may skip, and a leading
        # tab or carriage return (OWASP's CSV injection list). Exports (AudioCaps, Clotho CSV)
        # keep captions byte for byte, so such a caption is refused where it is typed.
        pattern=r"^(?:[\t\r]|[ \u00a0\u3000]*[=+@\uff1d\uff0b\uff20\uff0d-])",
    ),
    Rule(
        "min_words",
        "error",
        "min_words",
        "has {words}; write at least {min_words}",
        guidance="Write one sentence of {min_words} to {max_words} words.",
    ),
    Rule("max_words", "error", "max_words", "has {words}; the limit is {max_words}"),
    Rule(
        "opener",
        "error",
        "found",
        "starts with “{found}”; start with the sound itself, e.g. “a dog barks …”",
        guidance="Start with the sound itself, not with “this is”, “there is”, "
        "“you can hear”, “in this video” or “sounds like”.",
        pattern=r"^(this is|there(?:'s| is| are| was| were)"
        r"|(?:you|we|i) (?:can )?hear|in (?:this|the) (?:video|clip|recording|audio)"
        r"|(?:it |this )?sounds like)\b",
        ignore_case=True,
    ),
    Rule(
        "quotes",
        "error",
        "found",
        "contains quotation marks; do not transcribe speech, describe it instead (“a man speaks”)",
        guidance="Do not transcribe what people say: write “a woman speaks”, not her words.",
        # double quotes of any kind, or a quoted passage in single quotes (apostrophes in
        # "dog's" and "don't" are fine)
        pattern=r"[\"\u201c\u201d\u201e\u00ab\u00bb]"
        r"|(?<![^ ])['\u2018][^'\u2018\u2019]+['\u2019](?= |[.,;!?]|$)",
    ),
    Rule(
        "proper_name",
        "error",
        "found",
        "mentions “{found}”, which looks like a name; describe people by gender and "
        "age instead (“a woman”, “a young boy”)",
        guidance="No names of people, places or brands: say “a man”, “an old woman”, “a child”.",
        # Conservative: a capitalised word right after a lower-case word or a comma, so
        # sentence starts, "I", acronyms ("TV") and numbers pass.
        pattern=r"[a-z,;] ([A-Z][a-z]+)\b",
    ),
    Rule(
        "visual",
        "error",
        "found",
        "mentions “{found}”, which is seen rather than heard; describe only what you hear",
        guidance="Describe only what you hear: no colours, looks or anything seen in the video.",
        # "white noise", "pink noise" and hyphenated words ("see-saw") are sounds
        pattern=r"\b(see|sees|seen|seeing|look|looks|looking|watching|visible|wearing"
        r"|colou?rs?|colou?rful|red|blue|green|yellow|orange|purple|pink|brown|black"
        r"|white|gr[ae]y)\b(?!-| noise)",
        ignore_case=True,
    ),
    Rule(
        "one_sentence",
        "error",
        "found",
        "has more than one sentence; join them into one, e.g. with “while”, “as” or “and”",
        guidance="One coherent sentence, not several and not a list of words.",
        # conservative: "etc. and" or "... a car" are not flagged, "barks. A car" is
        pattern=r"[.!?]+ +[A-Z]",
    ),
    Rule(
        "word_list",
        "error",
        "found",
        "is a list of words; write a sentence that says what makes each sound and how "
        "(“a dog barks while cars pass”)",
        # three or more items of one or two words, separated by commas
        pattern=r"^(?:[A-Za-z'-]+(?: [A-Za-z'-]+)?, ?){2,}(?:and )?[A-Za-z'-]+"
        r"(?: [A-Za-z'-]+)?[.!]?$",
    ),
    Rule(
        "tense",
        "warning",
        "found",
        "uses “{found}”, which sounds like the past tense; write in the present tense "
        "(“a dog barks”)",
        guidance="Use the present tense: “a dog barks”, not “a dog barked”.",
        pattern=r"\b(was|were|had|did|went|came|began|started|stopped|barked|honked|"
        r"rang|sang|spoke|said|talked|walked|laughed|cried|screamed|yelled|shouted)\b",
        ignore_case=True,
    ),
    Rule(
        "detail",
        "warning",
        "missing",
        "says nothing about loudness, distance, pitch or speed; add it if you can hear it "
        "(“loudly”, “in the distance”, “high-pitched”, “repeatedly”)",
        guidance="Say how loud, how near, how high or low, how fast or how often, "
        "when you can hear it.",
        pattern=r"\b(loud|louder|loudly|quiet|quieter|quietly|soft|softly|faint|faintly"
        r"|muffled|distant|distance|far|nearby|near|close|closer|approach|approaches"
        r"|approaching|passing|passes|pass|away|high|low|pitched|deep|shrill|fast|quickly"
        r"|rapid|rapidly|slow|slowly|steady|steadily|repeated|repeatedly|continuous"
        r"|continuously|constant|constantly|intermittent|intermittently|occasional"
        r"|occasionally|once|twice|several|briefly|background|echo|echoes|echoing)\b",
        ignore_case=True,
    ),
)
RULES_BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}


def _compile(rule: Rule) -> re.Pattern[str]:
    return re.compile(rule.pattern, re.ASCII | (re.IGNORECASE if rule.ignore_case else 0))


_COMPILED: dict[str, re.Pattern[str]] = {r.code: _compile(r) for r in RULES if r.pattern}


def trim(text: str) -> str:
    return text.strip(TRIM)


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def _words(n: int) -> str:
    return f"{n:,} word" if n == 1 else f"{n:,} words"


def _format(message: str, values: dict[str, str]) -> str:
    # one pass, so a {placeholder} inside the worker's own text is never expanded
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), message)


def _problem(rule: Rule, values: dict[str, str]) -> Problem:
    return Problem(rule.code, rule.level, _format(rule.message, values))


def check(text: str, limits: Limits) -> list[Problem]:
    """Every rule the (trimmed) caption breaks, in table order. A text over the length
    limit gets only that problem: the patterns are not run on 100 KB of input."""
    values = {
        "min_words": f"{limits.min_words:,}",
        "max_words": f"{limits.max_words:,}",
        "max_chars": f"{limits.max_chars:,}",
    }
    if not text:
        return [_problem(RULES_BY_CODE["empty"], values)]
    if len(text) > limits.max_chars:
        values["chars"] = f"{len(text):,}"
        return [_problem(RULES_BY_CODE["max_chars"], values)]
    words = word_count(text)
    values["words"] = _words(words)
    problems: list[Problem] = []
    for rule in RULES:
        too_few = rule.check == "min_words" and words < limits.min_words
        too_many = rule.check == "max_words" and words > limits.max_words
        if too_few or too_many:
            problems.append(_problem(rule, values))
        elif rule.check in ("found", "missing"):
            match = _COMPILED[rule.code].search(text)
            if rule.check == "missing" and match is None:
                problems.append(_problem(rule, values))
            elif rule.check == "found" and match is not None:
                found = match.group(1) if match.re.groups and match.group(1) else match.group(0)
                codepoint = f"U+{ord(found[0]):04X}" if found else ""
                problems.append(_problem(rule, {**values, "found": found, "codepoint": codepoint}))
    return problems


def errors(text: str, limits: Limits) -> list[Problem]:
    return [p for p in check(text, limits) if p.level == "error"]


# The rules about what a caption may hold whatever its style or length: text from another
# tool (a caption file, Label Studio), which no batch's word limits or style rules bind,
# passes these; a caption typed here passes every error rule.
SAFETY_CODES = ("control", "line_break", "bidi", "markup", "formula")


def _errors_of(text: str, limits: Limits | None) -> list[Problem]:
    if limits is not None:
        return errors(text, limits)
    problems = []
    for code in SAFETY_CODES:
        if match := _COMPILED[code].search(text):
            found = match.group(1) if match.re.groups and match.group(1) else match.group(0)
            values = {"found": found, "codepoint": f"U+{ord(found[0]):04X}" if found else ""}
            problems.append(_problem(RULES_BY_CODE[code], values))
    return problems


def gate(text: str, limits: Limits | None = None) -> list[Problem]:
    """The one text gate every caption passes on its way in (a HIT submit on any page, a
    reviewer's fix, a qualification answer, Label Studio, a caption file): the errors of
    the (trimmed) text as typed, which is stored and exported raw, and of its normal form
    (core.text.normalise, NFKC), which post-processing stores and exports: "\u2002=1+1"
    passes the formula rule as typed but starts with "=" once an en space folds to a space
    and is stripped. Without `limits` only SAFETY_CODES apply. A problem of both forms is
    reported once, as typed."""
    problems = _errors_of(text, limits)
    normal = normalise(text)
    if normal != text and normal:
        seen = {problem.code for problem in problems}
        problems += [p for p in _errors_of(normal, limits) if p.code not in seen]
    return problems


def unsafe_characters(text: str, codes: tuple[str, ...] = ("control", "bidi")) -> Problem | None:
    """The first control or text-direction character of any free text a worker types
    (report notes), with the caption rules' message; `codes` picks the character rules
    (caption imports check "control" and "line_break")."""
    for code in codes:
        if match := _COMPILED[code].search(text):
            found = match.group(0)
            return _problem(RULES_BY_CODE[code], {"codepoint": f"U+{ord(found[0]):04X}"})
    return None


# Shown in the instructions with the rules each bad one breaks; test_rules checks them.
GOOD_EXAMPLES = (
    "A man speaks while a dog barks in the distance",
    "Rain falls steadily on a roof as thunder rumbles loudly",
    "A car engine idles and then revs up quickly",
)
BAD_EXAMPLES = (
    "There is a dog barking",
    "dog, car, wind",
    'A man says "come here" to John',
    "A red car drives past. A horn honks.",
)


def examples(limits: Limits) -> dict[str, Any]:
    """The instructions' examples: good ones, and bad ones with what is wrong with them."""
    return {
        "good": list(GOOD_EXAMPLES),
        "bad": [
            {"text": text, "problems": [p.message for p in errors(text, limits)]}
            for text in BAD_EXAMPLES
        ],
    }


def guidance(limits: Limits) -> list[str]:
    """The rules as the instructions state them."""
    values = {"min_words": str(limits.min_words), "max_words": str(limits.max_words)}
    return [_format(rule.guidance, values) for rule in RULES if rule.guidance]


def table(limits: Limits) -> dict[str, Any]:
    """The rules and limits as JSON for static/caption_rules.js (json_script)."""
    return {
        "rules": [asdict(rule) for rule in RULES],
        "limits": asdict(limits),
        "trim": TRIM,
        "word_pattern": WORD_PATTERN,
    }
