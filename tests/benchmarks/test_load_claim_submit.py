"""benchmarks/load_claim_submit.py's pure parts: the command line (plain and side by side
with Label Studio), the ratio table and the last line."""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.asyncrun import run_async

# the script imports its siblings (`from _deployment import …`) through its own folder;
# appended, so that benchmarks/corpus.py never shadows the corpus app
sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))

from load_claim_submit import Level, _worker, loop_line, parse_args, ratio_table


def _level(workers: int, loops: int, elapsed: float, server_cpu: float, **errors: int) -> Level:
    return Level(
        workers=workers,
        loops=loops,
        elapsed=elapsed,
        server_cpu=server_cpu,
        loop_ms=[10.0 * (i + 1) for i in range(20)],
        errors=Counter(errors),
    )


def test_without_the_flag_the_defaults_are_the_plain_load_test() -> None:
    args = parse_args([])

    assert (args.levels, args.duration, args.passes) == ([1, 10, 50, 100], 30.0, 1)
    assert not args.compare_label_studio


def test_with_the_flag_the_defaults_are_the_side_by_side_run() -> None:
    args = parse_args(["--compare-label-studio", "--label-studio-venv", "/x/ls-venv"])

    assert (args.levels, args.duration, args.passes) == ([1, 10, 50], 60.0, 2)
    assert args.label_studio_venv == Path("/x/ls-venv")
    assert args.label_studio_database == "ls_bench"


def test_seconds_and_passes_override_the_side_by_side_defaults() -> None:
    args = parse_args(
        ["--compare-label-studio", "--label-studio-venv", "v", "--seconds", "30", "--passes", "3"]
    )

    assert (args.duration, args.passes) == (30.0, 3)


def test_the_flag_without_a_venv_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--compare-label-studio"])

    assert "--compare-label-studio needs --label-studio-venv PATH" in capsys.readouterr().err


def test_a_venv_without_the_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--label-studio-venv", "v"])

    assert "only read with --compare-label-studio" in capsys.readouterr().err


def test_label_studio_cannot_share_earmarks_database(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(
            [
                *("--compare-label-studio", "--label-studio-venv", "v"),
                *("--database", "same", "--label-studio-database", "same"),
            ]
        )

    assert "--label-studio-database must differ from --database" in capsys.readouterr().err


def test_levels_that_are_not_numbers_are_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--levels", "1,ten"])

    assert "--levels '1,ten'" in capsys.readouterr().err


def test_the_ratio_table_has_a_row_per_level_and_a_cell_per_pass() -> None:
    runs = {
        1: [
            (_level(1, 120, 60.0, 30.0), _level(1, 720, 60.0, 36.0)),
            (_level(1, 100, 50.0, 30.0), _level(1, 500, 50.0, 25.0, **{"claim 500": 2})),
        ],
        10: [(_level(10, 0, 60.0, 1.0), _level(10, 600, 60.0, 30.0))],
    }

    lines = ratio_table(runs).splitlines()

    assert lines[0].startswith("| c | Label Studio loops/s | Earmark loops/s | Earmark / LS |")
    assert "| Earmark server CPU per loop ms |" in lines[0]
    assert len(lines) == 4
    cells = [cell.strip() for cell in lines[2].strip("|").split("|")]
    x = "\N{MULTIPLICATION SIGN}"
    assert cells[:5] == ["1", "2.00 / 2.00", "12.00 / 10.00", f"6.0{x} / 5.0{x}", "50.0 / 50.0"]
    assert cells[5] == "250.0 / 300.0"  # Label Studio's CPU per loop
    assert cells[-1] == "0, 0 / 0, 2"  # errors, each pass
    # no Label Studio loop: no ratio, no CPU per loop, rather than a division by zero
    ten = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert ten[:6] == ["10", "0.00", "10.00", "-", "50.0", "-"]


def test_the_last_line_sums_every_level() -> None:
    levels = [_level(1, 100, 10.0, 2.0), _level(10, 300, 10.0, 4.0)]

    line = loop_line(levels)

    assert line == "loop: server_cpu_ms 15.0 loops_per_s 20.0"
    assert re.fullmatch(r"loop: server_cpu_ms \d+\.\d loops_per_s \d+\.\d", line)


def test_no_loop_starts_after_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # a clock that only the loop moves, 50 ms a loop: nothing else on the machine counts
    now = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    starts: list[float] = []

    async def loop(session: Any, number: int) -> float:
        starts.append(now[0])
        now[0] += 0.05
        return now[0]

    level = Level(workers=1)

    run_async(_worker(None, loop, level, 0.12, 0, 0.0))

    assert starts == [0.0, 0.05, 0.1]
    assert level.loops == 3
