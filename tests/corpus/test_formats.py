from __future__ import annotations

import io
from decimal import Decimal

import pytest

from corpus import formats
from corpus.formats import CorpusFileError, read_audiocaps, read_clotho
from tests.corpus.conftest import AUDIOCAPS, CLOTHO

HEADER = b"audiocap_id,youtube_id,start_time,caption\r\n"


def audiocaps(*rows: bytes) -> bytes:
    return HEADER + b"".join(row + b"\r\n" for row in rows)


def refused(data: bytes, reader=read_audiocaps) -> str:
    with pytest.raises(CorpusFileError) as caught:
        reader(data, name="x.csv")
    return str(caught.value)


def test_it_reads_audiocaps_with_crlf_quotes_and_unicode() -> None:
    rows = read_audiocaps(AUDIOCAPS.read_bytes())

    assert [r.audiocap_id for r in rows] == ["101", "102", "103", "104", "105"]
    assert rows[1].caption == "A dog barks, then a man speaks"
    assert rows[3].caption == 'An engine idles and a horn says "beep"'
    assert rows[3].start == Decimal("12.5")
    assert rows[4].caption == "Café chatter and clinking cups"
    assert [r.line for r in rows] == [2, 3, 4, 5, 6]


def test_it_reads_clotho_keeping_spaces() -> None:
    rows = read_clotho(CLOTHO.read_bytes())

    assert [r.file_name for r in rows] == ["birds at dawn.wav", "Door_creak 01.wav"]
    assert rows[0].captions[3] == " A bird calls loudly "
    assert len(rows[1].captions) == 5


def test_it_refuses_a_wrong_header() -> None:
    message = refused(b"id,youtube_id,start_time,caption\r\n1,AAAAAAAAAAA,0,x y z\r\n")

    assert "x.csv, line 1: header is 'id,youtube_id,start_time,caption'" in message


def test_it_refuses_bad_quoting_with_its_line() -> None:
    data = audiocaps(b"1,AAAAAAAAAAA,0,fine words here", b'2,BBBBBBBBBBB,0,"A dog "barks" here"')

    assert refused(data).startswith("x.csv, line 3: bad CSV quoting")


def test_it_refuses_an_unterminated_quote() -> None:
    data = audiocaps(b"1,AAAAAAAAAAA,0,fine words here", b'2,BBBBBBBBBBB,0,"A dog barks')

    assert "bad CSV quoting" in refused(data)


def test_it_refuses_bad_encoding_with_its_line() -> None:
    data = audiocaps(b"1,AAAAAAAAAAA,0,fine words here", b"2,BBBBBBBBBBB,0,caf\xe9 noise")

    assert refused(data).startswith("x.csv, line 3: not UTF-8 (byte 0xe9")


@pytest.mark.parametrize(
    ("encoding", "described"),
    [
        ("utf-16-le", "UTF-16 (little-endian, no byte-order mark)"),
        ("utf-16-be", "UTF-16 (big-endian, no byte-order mark)"),
        ("utf-16", "UTF-16 (little-endian, with a byte-order mark)"),
    ],
)
def test_it_says_a_utf16_file_is_utf16(encoding: str, described: str) -> None:
    text = audiocaps(b"1,AAAAAAAAAAA,0,a dog barks").decode()

    for reader in (read_audiocaps, read_clotho):
        message = refused(text.encode(encoding), reader)

        assert message.startswith(f"x.csv, line 1: the file is {described} text; save it as UTF-8")


def test_it_refuses_a_row_with_missing_columns() -> None:
    assert "line 2: 3 columns, expected 4" in refused(audiocaps(b"1,AAAAAAAAAAA,0"))


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (b"x1,AAAAAAAAAAA,0,a dog barks", "audiocap_id 'x1' is not a whole number"),
        (b"1,short,0,a dog barks", "youtube_id 'short' is not an 11-character YouTube id"),
        (b"1,AAAAAAAAAAA,-3,a dog barks", "start_time '-3' is not a number of seconds"),
        (b"1,AAAAAAAAAAA,0,  ", "caption is empty"),
        (b'1,AAAAAAAAAAA,0,"two\nlines"', "caption spans several lines"),
        (b"1,AAAAAAAAAAA,0," + b"a" * 501, "has 501 characters"),
        (b"1,AAAAAAAAAAA,0,a dog\x00 barks", "caption contains a control character (U+0000)"),
        (b"1,AAAAAAAAAAA,0,a dog\x1b barks", "caption contains a control character (U+001B)"),
        (
            "1,AAAAAAAAAAA,0,a dog\u2028barks".encode(),
            "caption contains a line break; write the caption on one line",
        ),
    ],
)
def test_it_refuses_bad_cells(row: bytes, reason: str) -> None:
    message = refused(audiocaps(row))

    assert message.startswith("x.csv, line 2:")
    assert reason in message


def test_it_refuses_a_repeated_audiocap_id() -> None:
    data = audiocaps(b"7,AAAAAAAAAAA,0,a dog barks", b"7,BBBBBBBBBBB,0,a cat meows")

    assert "line 3: audiocap_id 7 repeats line 2" in refused(data)


def test_it_refuses_a_clotho_header_with_gaps() -> None:
    data = b"file_name,caption_1,caption_3\na.wav,x,y\n"

    assert "line 1: header is 'file_name,caption_1,caption_3'" in refused(data, read_clotho)


def test_it_refuses_a_repeated_clotho_file() -> None:
    data = b"file_name,caption_1\na.wav,one\nb.wav,two\na.wav,three\n"

    assert "line 4: file_name 'a.wav' repeats line 2" in refused(data, read_clotho)


def test_it_refuses_a_clotho_file_name_with_a_path() -> None:
    data = b"file_name,caption_1\n../a.wav,one\n"

    assert "line 2: file_name '../a.wav' must be a plain file name" in refused(data, read_clotho)


def test_it_refuses_an_empty_file() -> None:
    assert "line 1: empty file" in refused(b"")


@pytest.mark.parametrize(
    ("value", "text"), [(Decimal("20.000"), "20"), (Decimal("12.500"), "12.5")]
)
def test_it_writes_seconds_as_audiocaps_does(value: Decimal, text: str) -> None:
    assert formats.seconds_text(value) == text


def test_a_file_read_and_written_back_is_the_same_bytes() -> None:
    out = io.StringIO(newline="")
    writer = formats.csv_writer(out, line_end=formats.AUDIOCAPS_LINE_END)
    writer.writerow(formats.AUDIOCAPS_HEADER)
    for row in read_audiocaps(AUDIOCAPS.read_bytes()):
        writer.writerow(
            [row.audiocap_id, row.youtube_id, formats.seconds_text(row.start), row.caption]
        )

    assert out.getvalue().encode() == AUDIOCAPS.read_bytes()
