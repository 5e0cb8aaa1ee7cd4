"""The dataset card (README.md) of an audio snapshot: the Hugging Face card's YAML header
and a body that says what is inside, how to load it and how it was collected. No Django
here: corpus.services.snapshots gathers the facts.

The header is written by hand in YAML's block style with every string as a JSON string
(JSON's strings are YAML double-quoted scalars), so no YAML library is needed to write it
and any project name or recipe text stays one valid scalar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Hugging Face's size_categories buckets, by the number of rows (here: clips)
_SIZE_BUCKETS = [
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
]
# Earmark's split names -> Hugging Face's (as corpus.formats.HF_SPLITS), in this order
_HF_SPLITS = {"train": "train", "val": "validation", "test": "test"}
# audio in, text out (captioning), and text-audio pairs for generation and retrieval
TASK_CATEGORIES = ["audio-text-to-text", "text-to-audio"]
TAGS = ["audio-captioning", "earmark"]


def size_category(rows: int) -> str:
    for limit, name in _SIZE_BUCKETS:
        if rows < limit:
            return name
    return "n>10M"


@dataclass(frozen=True)
class SplitFacts:
    name: str  # the Hugging Face split: train, validation, test
    folder: str  # the audio folder inside the archive
    caption_file: str
    clips: int
    captions: int
    missing_audio: int


@dataclass(frozen=True)
class CardFacts:
    pretty_name: str
    project: str
    version: int
    licence: str
    layout: str  # "clotho" or "audiofolder"
    text: str  # raw or processed
    created_at: str
    earmark_version: str
    splits: list[SplitFacts]
    statistics: dict[str, Any]  # the manifest's statistics (splits and all)
    recipes: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    imports: list[dict[str, Any]] = field(default_factory=list)
    pipeline_versions: list[str] = field(default_factory=list)

    @property
    def clips(self) -> int:
        return sum(s.clips for s in self.splits)

    @property
    def missing_audio(self) -> int:
        return sum(s.missing_audio for s in self.splits)


def _scalar(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def header(facts: CardFacts) -> str:
    lines = [
        "---",
        f"pretty_name: {_scalar(facts.pretty_name)}",
        f"license: {_scalar(facts.licence)}",
        "language:",
        "- en",
        "task_categories:",
        *(f"- {_scalar(t)}" for t in TASK_CATEGORIES),
        "tags:",
        *(f"- {_scalar(t)}" for t in TAGS),
        "size_categories:",
        f"- {_scalar(size_category(facts.clips))}",
    ]
    with_files = [s for s in facts.splits if s.clips]
    if with_files:  # a split without clips has no folder, and a pattern must match files
        lines += ["configs:", "- config_name: default", "  data_files:"]
        for split in with_files:
            lines += [
                f"  - split: {_scalar(split.name)}",
                f"    path: {_scalar(split.folder + '/**')}",
            ]
    lines.append("---")
    return "\n".join(lines) + "\n"


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows),
        "",
    ]


def _loading(facts: CardFacts) -> list[str]:
    lines = [
        "## Loading",
        "",
        "With Hugging Face `datasets` (audio decodes through torchcodec and FFmpeg):",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
    ]
    if facts.layout == "audiofolder":
        lines += ['dataset = load_dataset("audiofolder", data_dir="path/to/this/folder")']
    else:  # Clotho's folder names are not split names datasets knows: the card maps them
        lines += ['dataset = load_dataset("path/to/this/folder")  # splits from this card']
    lines += [
        'row = dataset["train"][0]  # audio, captions, clip_id, labels, ...',
        "```",
        "",
    ]
    if facts.layout == "clotho":
        lines += [
            "With pandas, as Clotho is read:",
            "",
            "```python",
            "import pandas as pd",
            "",
            'captions = pd.read_csv("clotho_captions_development.csv")',
            'metadata = pd.read_csv("clotho_metadata_development.csv")',
            "# audio: development/<file_name>",
            "```",
            "",
        ]
    return lines


def _files(facts: CardFacts) -> list[str]:
    lines = ["## Files", ""]
    for split in facts.splits:
        if not split.clips:
            lines.append(f"- {split.name}: no clips (no `{split.folder}/` folder)")
            continue
        lines.append(
            f"- `{split.folder}/`: {_count(split.clips, 'WAV file')} and `metadata.jsonl` (one row "
            f"per clip: file_name, captions, clip_id, source, source_id, start and end "
            f"seconds, labels, licence); captions also in `{split.caption_file}`"
        )
    if facts.layout == "clotho":
        lines.append(
            "- `clotho_metadata_<folder>.csv`: per audio file its clip id, source, source "
            "id, start and end seconds, AudioSet labels and licence"
        )
    lines += [
        "- `missing_audio.csv`: clips whose audio file was missing or unreadable at export; "
        "they and their captions are left out of every other file",
        "- `manifest.json`: counts, checksums, recipes, post-processing versions, statistics",
        "- `SHA256SUMS`: the SHA-256 of every other file (`sha256sum -c SHA256SUMS`)",
        "",
    ]
    return lines


def _collection(facts: CardFacts) -> list[str]:
    lines = ["## How it was collected", "", "### Clips", ""]
    if facts.recipes:
        for recipe in facts.recipes:
            spec = json.dumps(recipe.get("spec", {}), sort_keys=True, ensure_ascii=False)
            name = recipe.get("recipe") or "no saved recipe"
            lines.append(f"- subset `{recipe['subset']}` ({recipe['name']}; {name}): `{spec}`")
    else:
        lines.append("- no subset recorded")
    lines += ["", "### Captions", ""]
    if facts.batches:
        rows = [
            [
                b["name"],
                _HF_SPLITS.get(b["split"], b["split"]),
                b["captions_per_clip"],
                f"{b['min_words']} to {b['max_words']}",
                f"${b['reward_cents'] / 100:.2f} per HIT",
                b["requirements"],
            ]
            for b in facts.batches
        ]
        lines += [
            "Written by crowd workers in caption batches, each approved by a reviewer:",
            "",
            *_table(
                ["batch", "split", "captions per clip", "words", "reward", "requirements"],
                rows,
            ),
        ]
    if facts.imports:
        lines += ["Imported from caption files:", ""]
        lines += [
            f"- `{i['file_name']}` ({i['format']}, {i['split']}, {i['rows']:,} rows, "
            f"sha256 `{i['sha256']}`)"
            for i in facts.imports
        ]
        lines.append("")
    if not facts.batches and not facts.imports:
        lines += ["- none recorded", ""]
    lines += ["### Post-processing", ""]
    if facts.text == "processed":
        versions = ", ".join(facts.pipeline_versions) or "unknown"
        lines.append(f"Captions are the post-processed text (pipeline {versions}).")
    else:
        lines.append("Captions are the text as written, with reviewers' fixes applied.")
    return [*lines, ""]


def _statistics(facts: CardFacts) -> list[str]:
    splits = facts.statistics.get("splits", {})
    rows = []
    ordered = [(s, splits.get(s)) for s in _HF_SPLITS] + [("all", facts.statistics.get("all"))]
    for key, row in ordered:
        if not row:
            continue
        rows.append(
            [
                _HF_SPLITS.get(key, key),
                f"{row['clips']:,}",
                f"{row['captions']:,}",
                row["captions_per_clip"],
                row["words_per_caption_mean"],
                f"{row['vocabulary']:,}",
            ]
        )
    head = ["split", "clips", "captions", "captions/clip", "words/caption", "vocabulary"]
    return ["## Statistics", "", *_table(head, rows)]


def body(facts: CardFacts) -> str:
    lines = [
        f"# {facts.pretty_name}",
        "",
        f"Audio captions exported by Earmark {facts.earmark_version} from project "
        f"`{facts.project}`: snapshot v{facts.version} ({facts.text} text), "
        f"{facts.created_at}.",
        "",
    ]
    lines += _table(
        ["split", "audio folder", "clips", "captions", "missing audio"],
        [
            [s.name, f"{s.folder}/", f"{s.clips:,}", f"{s.captions:,}", s.missing_audio]
            for s in facts.splits
        ],
    )
    if facts.missing_audio:
        lines += [
            f"**{_count(facts.missing_audio, 'clip')} had no readable audio** and "
            f"{'is' if facts.missing_audio == 1 else 'are'} left out; "
            "`missing_audio.csv` names them and why.",
            "",
        ]
    lines += _loading(facts) + _files(facts) + _collection(facts) + _statistics(facts)
    lines += [
        "## Licence",
        "",
        f"The captions and metadata are released under `{facts.licence}`. Each audio clip "
        "keeps its source's terms: a YouTube clip (an AudioSet segment) belongs to whoever "
        "uploaded the video, a local clip to whoever supplied the file.",
        "",
    ]
    return "\n".join(lines)


def card(facts: CardFacts) -> str:
    return header(facts) + "\n" + body(facts)
