"""Reading predictions and references for evaluation: every accepted shape, and a clear
message (file, line or item, reason) for every kind of bad file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus.evaluation_files import (
    EvaluationFileError,
    clip_key,
    read_predictions,
    read_references,
)
from tests.conftest import FIXTURES

EVAL = FIXTURES / "evaluation"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def test_it_reads_audiocaps_references_by_clip() -> None:
    refs = read_references(EVAL / "audiocaps_references.csv")
    assert len(refs) == 8
    assert {len(captions) for captions in refs.values()} == {5}
    assert refs["7fmOlUlwoNg_20"][0] == "Constant rattling noise and sharp vibrations"
    assert refs["Me4npKmtchA_270"][0] == "Water is trickling, and a man talks"


def test_it_reads_clotho_references_by_file_name() -> None:
    refs = read_references(EVAL / "clotho_references.csv")
    assert len(refs) == 4
    assert refs["Garage Nat Sound_01.wav"][1] == (
        "Birds are chirping while an air conditioning machine runs."
    )


def test_it_reads_the_same_predictions_from_csv_and_jsonl() -> None:
    from_csv = read_predictions(EVAL / "audiocaps_predictions.csv")
    assert from_csv == read_predictions(EVAL / "audiocaps_predictions.jsonl")
    assert from_csv["_xylo5_IiaM_470"] == 'A woman talks to a "baby"'


def test_it_reads_dcase_submission_predictions() -> None:
    predictions = read_predictions(EVAL / "clotho_predictions.csv")
    assert set(predictions) == set(read_references(EVAL / "clotho_references.csv"))


def test_it_keys_json_clips_like_audiocaps(tmp_path: Path) -> None:
    items = [
        {"youtube_id": "7fmOlUlwoNg", "start_time": "20.0", "caption": "rattling"},
        {"youtube_id": "6BJ455B1aAs", "start_time": 0, "caption": "an explosion"},
    ]
    path = write(tmp_path, "p.json", json.dumps(items))
    assert read_predictions(path) == {"7fmOlUlwoNg_20": "rattling", "6BJ455B1aAs_0": "an explosion"}


def test_it_reads_reference_lists_from_json(tmp_path: Path) -> None:
    items = [{"id": 7, "captions": ["a dog barks", "dogs bark"]}, {"id": "7", "caption": "woof"}]
    path = write(tmp_path, "r.json", json.dumps(items))
    assert read_references(path) == {"7": ["a dog barks", "dogs bark", "woof"]}


def test_it_reads_an_id_caption_csv(tmp_path: Path) -> None:
    path = write(tmp_path, "p.csv", '\ufeffid,caption\r\na,"rain, then thunder"\r\n\r\nb,wind\r\n')
    assert read_predictions(path) == {"a": "rain, then thunder", "b": "wind"}


def test_it_formats_clip_keys_as_audiocaps_writes_seconds() -> None:
    assert clip_key("7fmOlUlwoNg", "20.000") == "7fmOlUlwoNg_20"
    assert clip_key("7fmOlUlwoNg", 12.5) == "7fmOlUlwoNg_12.5"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("p.csv", b"id,caption\na,ok\nb,caf\xe9\n", "p.csv, line 3: not UTF-8 (byte 0xe9)"),
        ("p.csv", "clip,text\na,b\n", "p.csv, line 1: header is 'clip,text'; expected"),
        ("p.csv", "id,caption\na,b\nc,d,e\n", "p.csv, line 3: 3 columns, expected 2"),
        (
            "p.csv",
            'id,caption\na,"never closed\n',
            "p.csv, line 2: bad CSV quoting (unexpected end of data)",
        ),
        ("p.csv", "id,caption\na,b\nc,  \n", "p.csv, line 3: the caption is empty"),
        ("p.csv", "id,caption\na,b\n,c\n", "p.csv, line 3: the id is empty"),
        ("p.csv", "", "p.csv, line 1: empty file"),
        ("p.csv", "id,caption\n", "p.csv: no captions in the file"),
        (
            "p.csv",
            "id,caption\na,x\nb,y\na,z\n",
            "line 4: a second prediction for 'a' (first at line 2)",
        ),
        (
            "p.json",
            '[{"id": "a", "caption": "x"},\n {"id": "b" "caption": "y"}]',
            "p.json, line 2: not valid JSON",
        ),
        ("p.json", '{"a": "x"}', "p.json: expected a JSON list of objects"),
        ("p.json", '[{"id": "a", "caption": 3}]', "p.json, item 1: the caption must be a string"),
        ("p.json", '[{"id": "a"}, {"name": "b", "caption": "y"}]', 'item 1: no "caption"'),
        (
            "p.json",
            '[{"id": "a", "caption": "x"}, {"name": "b", "caption": "y"}]',
            'item 2: no "id"',
        ),
        ("p.json", '[{"id": [1], "caption": "x"}]', "item 1: the id must be a string or a number"),
        (
            "p.json",
            '[{"youtube_id": "x", "start_time": "soon", "caption": "y"}]',
            "start_time a number",
        ),
        (
            "p.jsonl",
            '{"id": "a", "caption": "x"}\n\n{"id": "b", "caption": \n',
            "p.jsonl, line 3: not valid JSON",
        ),
        ("p.jsonl", '["a", "x"]\n', "p.jsonl, line 1: expected an object"),
        ("p.txt", "a dog barks\n", "p.txt: cannot tell the format from the name"),
        (
            "p.jsonl",
            json.dumps({"id": "a", "caption": "x" * 2001}),
            "2001 characters (at most 2000)",
        ),
    ],
)
def test_it_names_the_file_line_and_reason(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    with pytest.raises(EvaluationFileError) as caught:
        read_predictions(write(tmp_path, name, content))
    assert message in str(caught.value)


def test_it_refuses_a_malformed_audiocaps_file_with_its_line(tmp_path: Path) -> None:
    content = "audiocap_id,youtube_id,start_time,caption\r\n1,7fmOlUlwoNg,twenty,a dog\r\n"
    with pytest.raises(EvaluationFileError, match=r"r\.csv, line 2: start_time 'twenty'"):
        read_references(write(tmp_path, "r.csv", content))


def test_it_holds_a_file_to_the_format_it_is_given() -> None:
    with pytest.raises(EvaluationFileError, match="line 1: header is 'file_name,caption_1"):
        read_references(EVAL / "clotho_references.csv", fmt="audiocaps")


def test_it_refuses_several_captions_a_clip_as_predictions() -> None:
    with pytest.raises(EvaluationFileError, match="a second prediction for 'noisy stuff"):
        read_predictions(EVAL / "clotho_references.csv")


def test_it_says_when_a_file_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(EvaluationFileError, match=r"missing\.csv: cannot read it"):
        read_references(tmp_path / "missing.csv")


def test_it_names_unknown_formats() -> None:
    with pytest.raises(EvaluationFileError, match="Unknown format 'xml'; choose from audiocaps"):
        read_references(EVAL / "clotho_references.csv", fmt="xml")
