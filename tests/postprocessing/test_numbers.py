"""Numbers to words: each case num2words alone would raise on, or read wrongly."""

from __future__ import annotations

import pytest
from num2words import num2words

from postprocessing.numbers import numbers_to_words


@pytest.mark.parametrize("text", ["3rd", "1990s", "10%", "1,000", "$5"])
def test_num2words_alone_raises_on_these(text: str) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever num2words raises
        num2words(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a dog barks 3 times", "a dog barks three times"),
        ("the 3rd knock", "the third knock"),
        ("1st, 2nd, 22nd and 101st", "first, second, twenty-second and one hundred and first"),
        ("music from the 1990s", "music from the nineteen nineties"),
        ("a man in his 40s speaks", "a man in his forties speaks"),
        ("songs of the '80s", "songs of the eighties"),
        ("songs of the 80's", "songs of the eighties"),
        ("hundreds: 100s", "hundreds: hundreds"),
        ("10% louder", "ten percent louder"),
        ("2.5% slower", "two point five percent slower"),
        ("1,000 bees buzz", "one thousand bees buzz"),
        ("1,000,000 voices", "one million voices"),
        ("1,000th time", "one thousandth time"),
        ("2.5 seconds", "two point five seconds"),
        (".5 seconds", "zero point five seconds"),
        ("$5 please", "five dollars please"),
        ("$1 coin", "one dollar coin"),
        ("$5.50 change", "five dollars and fifty cents change"),
        ("$0.99 each", "ninety-nine cents each"),
        ("£3 and €1.01", "three pounds and one euro and one cent"),
        ("in 1999 a bell", "in nineteen ninety-nine a bell"),
        ("1999 bells", "one thousand nine hundred and ninety-nine bells"),
        ("at 3:30 and 7:05", "at three thirty and seven oh five"),
        ("at 12:00", "at twelve o'clock"),
        ("agent 007", "agent zero zero seven"),
        ("-4 degrees", "minus four degrees"),
        ("2-3 times", "two-three times"),
        ("an mp3 plays", "an mp three plays"),
        ("a 5kg weight", "a five kg weight"),
        ("1,00 odd", "one,zero zero odd"),
    ],
)
def test_it_writes_numbers_out(text: str, words: str) -> None:
    assert numbers_to_words(text) == words


def test_it_leaves_text_without_digits_alone() -> None:
    text = "A dog barks. Then 'quoted' 's things"
    assert numbers_to_words(text) is text


def test_it_leaves_non_ascii_digits_alone() -> None:
    assert numbers_to_words("٣ dogs") == "٣ dogs"


def test_it_reads_a_very_long_number_digit_by_digit() -> None:
    words = numbers_to_words("9" * 400)
    assert words == " ".join(["nine"] * 400)


def test_it_never_puts_commas_inside_a_number() -> None:
    assert "," not in numbers_to_words("1234567 ants")
