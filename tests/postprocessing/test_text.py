from __future__ import annotations

import pytest

from postprocessing.text import drop_final_period, normalise, train_text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  A  dog\tbarks \n", "A dog barks"),
        ("A\u00a0dog\u2009barks", "A dog barks"),  # no-break and thin spaces
        ("A dog\u200b barks\u00ad\ufeff", "A dog barks"),  # zero-width, soft hyphen, BOM
        ("\u200fA dog barks\u202e", "A dog barks"),  # direction marks and overrides
        ("\uff26\uff55\uff4c\uff4c \uff13", "Full 3"),  # full-width letters and digit
        ("it\u2019s \u201cgo\u201d", 'it\'s "go"'),
        ("ﬁre alarm", "fire alarm"),  # ligature
    ],
)
def test_normalise(raw: str, clean: str) -> None:
    assert normalise(raw) == clean


@pytest.mark.parametrize(
    ("text", "dropped"),
    [
        ("A dog barks.", "A dog barks"),
        ("A dog barks", "A dog barks"),
        ("A dog barks . ", "A dog barks"),
        ("A dog barks...", "A dog barks"),
        ("Is it a dog?", "Is it a dog?"),
        ("2.5 seconds", "2.5 seconds"),
    ],
)
def test_drop_final_period(text: str, dropped: str) -> None:
    assert drop_final_period(text) == dropped


@pytest.mark.parametrize(
    ("text", "train"),
    [
        ("A man's voice, then a high-pitched BEEP!", "a man's voice then a high-pitched beep"),
        ('He says "go" -- twice', "he says go twice"),
        ("Twenty-one dogs; (loud)", "twenty-one dogs loud"),
        ("dog 🐶 + cat = noise", "dog cat noise"),
        ("'quoted' words", "quoted words"),
    ],
)
def test_train_text(text: str, train: str) -> None:
    assert train_text(text) == train
