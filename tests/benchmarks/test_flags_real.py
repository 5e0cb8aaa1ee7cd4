"""benchmarks/flags_real.py on a fixture slice: the table and the last line it promises."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks import flags_real
from tests.conftest import FLAG_FIXTURES

LAST = re.compile(r"^flags: precision \d\.\d{3} recall \d\.\d{3} untouched_flagged \d\.\d{3}$")


def test_it_prints_the_table_and_ends_with_the_summary_line(
    flag_model_installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = flags_real.main(
        ["--captions", str(FLAG_FIXTURES / "clotho_validation_head.csv"), "--seed", "3"]
    )

    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert lines[0].startswith("clotho_validation_head.csv: 120 clips, 600 captions, 24 corrupted")
    assert "flag model loaded" in lines[0]
    for kind in ("off-topic", "generic", "truncated", "wrong-source", "untouched"):
        assert any(line.startswith(kind) for line in lines), kind
    assert LAST.match(lines[-1]), lines[-1]


def test_the_audiocaps_format_is_read_and_a_forced_wrong_format_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag_model_installed: Any
) -> None:
    rows = ["audiocap_id,youtube_id,start_time,caption"]
    rows += [f"{n},vid{n // 5},0,a dog barks number {n}" for n in range(20)]
    path = tmp_path / "ac.csv"
    path.write_text("\r\n".join(rows) + "\r\n", encoding="utf-8")

    assert flags_real.main(["--captions", str(path), "--format", "audiocaps"]) == 0
    assert "ac.csv: 4 clips, 20 captions" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not a Clotho caption file"):
        flags_real.main(["--captions", str(path), "--format", "clotho"])


def test_it_says_when_the_ontology_is_missing_and_the_fixture_stands_in(
    tmp_path: Path, flag_model_installed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-ontology.json"
    code = flags_real.main(
        [
            "--captions",
            str(FLAG_FIXTURES / "clotho_validation_head.csv"),
            "--ontology",
            str(missing),
        ]
    )

    assert code == 0
    assert f"--ontology {missing}: no such file; using the test fixture" in (
        capsys.readouterr().err
    )
