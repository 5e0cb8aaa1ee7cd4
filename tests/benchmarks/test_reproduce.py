"""benchmarks/reproduce.py at a tiny size on CPU: the table it writes, the papers' orderings
it checks, and the runs it plans (speed is measured by running the script, not here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import reproduce

COLUMNS = (
    "model", "recipe", "epochs", "steps", "best val epoch", "BLEU-4", "METEOR", "ROUGE-L",
    "CIDEr-D", "train clips/s", "beam", "beam clips/s", "peak RSS MB", "GPU util %",
)  # fmt: skip


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_it_trains_two_models_and_appends_their_table(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Results\n\nan earlier section\n")
    section = reproduce.main([
        "--train", "8", "--val", "3", "--test", "3", "--epochs", "1", "--preset", "tiny",
        "--models", "nn,lstm", "--frames-per-second", "5", "--threads", "1",
        "--results", str(results),
    ])  # fmt: skip
    lines = section.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| model |"))
    assert tuple(_cells(lines[header])) == COLUMNS
    rows = {cells[0]: dict(zip(COLUMNS, cells, strict=True))
            for cells in map(_cells, lines[header + 2 : header + 4])}  # fmt: skip
    assert set(rows) == {"nn", "lstm"}
    assert rows["nn"]["epochs"] == "0"
    assert rows["nn"]["beam"] == "1"
    # the LSTM trained its one (scaled) caption epoch and was decoded with its recipe's beam
    assert rows["lstm"]["epochs"] == "1"
    assert rows["lstm"]["best val epoch"] == "1 of 1"
    assert rows["lstm"]["beam"] == "3"
    assert float(rows["lstm"]["train clips/s"]) > 0
    assert "| learned model beats 1NN | lstm > nn |" in section
    written = results.read_text()
    assert written.startswith("# Results\n\nan earlier section\n")
    assert written.endswith("\n" + section)
    assert "Machine: " in section
    assert "--models nn,lstm" in section


def _row(model: str, cider: float, best: int, epochs: int) -> reproduce.Row:
    return reproduce.Row(
        model=model, recipe="", epochs=str(epochs), steps=10 * epochs, best_epoch=best,
        validated_epochs=epochs,
        scores={"BLEU-4": 0.0, "METEOR": 0.0, "ROUGE-L": 0.0, "CIDEr-D": cider},
        train_clips_per_s=1.0, beam=3, beam_clips_per_s=1.0, peak_memory_mb=1.0,
        gpu_utilisation=None, example="",
    )  # fmt: skip


def test_orderings_say_which_paper_ranking_holds_and_why_one_differs() -> None:
    text = reproduce.orderings([
        _row("nn", 0.9, 0, 0), _row("lstm", 1.0, 3, 8), _row("tempatt", 1.2, 8, 8),
        _row("topdown", 1.1, 8, 8),
    ])  # fmt: skip
    audiocaps = next(line for line in text.splitlines() if line.startswith("| AudioCaps"))
    assert "tempatt 1.200 > topdown 1.100 > lstm 1.000 > nn 0.900" in audiocaps
    assert "differs: topdown was still improving at its last epoch (8, 80 steps)" in audiocaps
    assert "| learned model beats 1NN | lstm > nn | 1.000 vs 0.900 | holds |" in text


def test_a_model_behind_1nn_is_named_with_where_it_peaked() -> None:
    text = reproduce.orderings([_row("nn", 0.9, 0, 0), _row("act", 0.5, 4, 6)])
    assert "| act > nn | 0.500 vs 0.900 | misses: act peaked at epoch 4 of 6 (60 steps) |" in text


def test_a_lower_frame_rate_keeps_the_recipe_masks_in_seconds() -> None:
    # ACT reads 50 frames/s with time masks of up to 64 frames; at 25 frames/s: 32
    run, features, _ = reproduce.plan(
        "act", preset="tiny", epochs=3, frames_per_second=25, device="cpu", video_fps=2,
        video_size=24,
    )  # fmt: skip
    assert features.hop_length == 1280
    assert features.frames_per_second == 25
    assert run.train.spec_time_mask == 32
    assert run.train.epochs == 3
    assert run.train.warmup_epochs == 1.0  # 5 of 15 scaled to 3


def test_a_set_value_changes_that_models_plan_only() -> None:
    settings = reproduce.model_settings(["bilstm:train.lr=0.001"], ["nn", "bilstm", "act"])
    assert settings == {"bilstm": ["train.lr=0.001"]}
    run, _, _ = reproduce.plan(
        "bilstm", preset="tiny", epochs=3, frames_per_second=None, device="cpu", video_fps=2,
        video_size=24, settings=settings["bilstm"],
    )  # fmt: skip
    assert run.train.lr == 0.001
    act, _, _ = reproduce.plan(
        "act", preset="tiny", epochs=3, frames_per_second=None, device="cpu", video_fps=2,
        video_size=24, settings=settings.get("act", []),
    )  # fmt: skip
    assert act.train.lr == 1e-4


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("train.lr=0.001", "expected MODEL:KEY=VALUE"),
        ("bilstm:train.lr", "expected MODEL:KEY=VALUE"),
        ("maac:train.lr=0.001", "'maac' is not among --models (nn, bilstm)"),
    ],
)
def test_a_malformed_set_value_is_refused_by_name(value: str, named: str) -> None:
    with pytest.raises(SystemExit, match=re.escape(named)):
        reproduce.model_settings([value], ["nn", "bilstm"])
