"""Caption metrics as audio-captioning papers report them, computed by pycocoevalcap 1.2.

Pure Python, no Django: the training code in modeling/ml imports it for validation.

`evaluate(predictions=..., references=...)` scores one caption per clip against that clip's
references; `human_upper_bound(references=...)` scores each reference against the others
(the AudioCaps paper's "Human" row). Both return every metric under the name papers use:

    BLEU-1..4, METEOR, ROUGE-L   pycocoevalcap's Bleu(4), Meteor, Rouge
    CIDEr-D                      pycocoevalcap's `Cider` class. Despite its name it computes
                                 CIDEr-D (clipped n-gram counts, a Gaussian length penalty
                                 with sigma 6, scores x10, no stemming), which is what the
                                 captioning papers and the DCASE baselines report as CIDEr(-D).
    SPICE                        pycocoevalcap's Spice; needs Stanford CoreNLP 3.6.0 jars
    SPIDEr                       mean of CIDEr-D and SPICE

The numbers are the ones pycocoevalcap gives when called directly: captions go through its
PTB tokenizer, then through its scorers with the same inputs. What differs is where the Java
parts run. pycocoevalcap writes temporary files into its own package folder, which fails
on a read-only install, so `Toolkit` lays its jars out in a writable cache folder and runs
them from there. METEOR costs ~10 s of JVM start-up, so one METEOR process per worker
process is kept alive (`shared_meteor`) and reused by every evaluation.

A metric that cannot be computed (SPICE without CoreNLP) is None in `scores`, with the reason
in `unavailable`; it is never reported as 0.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS

BLEU = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4")
METRICS = (*BLEU, "METEOR", "ROUGE-L", "CIDEr-D", "SPICE", "SPIDEr")
# what callers choose from; SPIDEr comes with "cider" and "spice" together
FAMILIES: dict[str, tuple[str, ...]] = {
    "bleu": BLEU,
    "meteor": ("METEOR",),
    "rouge": ("ROUGE-L",),
    "cider": ("CIDEr-D",),
    "spice": ("SPICE",),
}
ALL_FAMILIES = tuple(FAMILIES)
CIDER_NOTE = (
    "CIDEr-D as the captioning papers report it: pycocoevalcap's Cider (clipped counts, "
    "Gaussian length penalty sigma=6, x10, no stemming)"
)
CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
# PTBTokenizer with -preserveLines starts a new line at each of these, which would shift
# every later caption onto the wrong clip; pycocoevalcap only replaces "\n"
METEOR_ARGS = ("-", "-", "-stdio", "-l", "en", "-norm")
LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\x0b\x0c\u2028\u2029"})

Progress = Callable[[str], None]
K = TypeVar("K")


class EvaluationError(ValueError):
    """The inputs cannot be scored (missing predictions, empty captions...)."""


class JavaError(RuntimeError):
    """A Java part of pycocoevalcap failed; the message carries the tail of its stderr."""


# Where the Java parts run ---------------------------------------------------------------


def pycocoevalcap_dir() -> Path:
    import pycocoevalcap

    return Path(next(iter(pycocoevalcap.__path__)))


def default_cache_dir() -> Path:
    """$EARMARK_VAR_DIR/cache, else ~/.cache/earmark (the Django side passes VAR_DIR)."""
    var = os.environ.get("EARMARK_VAR_DIR")
    return Path(var) / "cache" if var else Path.home() / ".cache" / "earmark"


@dataclass(frozen=True)
class Toolkit:
    """pycocoevalcap's jars laid out in a writable folder, and the java to run them with.

    Layout under `root`: tokenizer/ and meteor/ hold links to the package's jars (they only
    read them); spice/ holds a copy of spice-1.0.jar, because the JVM resolves the jar's
    manifest class path (lib/...) next to the real file, plus lib/ with links to the
    package's spice/lib jars and any CoreNLP jars an admin drops there, and SPICE's tmp/
    and cache/ folders.
    """

    root: Path
    source: Path
    java: str = "java"

    @property
    def tokenizer_jar(self) -> Path:
        return self.root / "tokenizer" / "stanford-corenlp-3.4.1.jar"

    @property
    def meteor_jar(self) -> Path:
        return self.root / "meteor" / "meteor-1.5.jar"

    @property
    def spice_dir(self) -> Path:
        return self.root / "spice"

    def spice_missing(self) -> str:
        """Why SPICE cannot run here, or "" when it can."""
        lib = self.spice_dir / "lib"
        for name in CORENLP_JARS:  # installed into the package since this process started
            if not (lib / name).is_file() and (self.source / "spice" / "lib" / name).is_file():
                _link(self.source / "spice" / "lib" / name, lib)
        missing = [name for name in CORENLP_JARS if not (lib / name).is_file()]
        if not missing:
            return ""
        return (
            f"SPICE needs Stanford CoreNLP 3.6.0, which is not installed ({', '.join(missing)} "
            f"missing). Put stanford-corenlp-3.6.0.jar and stanford-corenlp-3.6.0-models.jar "
            f"(from stanford-corenlp-full-2015-12-09.zip; pycocoevalcap's "
            f"spice/get_stanford_models.py downloads them) into {self.source / 'spice' / 'lib'} "
            f"or {lib}."
        )


def toolkit(
    cache_dir: Path | str | None = None, *, java: str = "java", source: Path | None = None
) -> Toolkit:
    """Prepares (once per process and folder) and returns the Java toolkit."""
    source = (source or pycocoevalcap_dir()).resolve()
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = (base / f"pycocoevalcap-{_package_version()}").resolve()
    _prepare(root, source)
    return Toolkit(root=root, source=source, java=java)


@lru_cache(maxsize=1)
def _package_version() -> str:
    return metadata.version("pycocoevalcap")


_prepared: set[tuple[Path, Path]] = set()
_prepare_lock = threading.Lock()


def _prepare(root: Path, source: Path) -> None:
    with _prepare_lock:
        if (root, source) in _prepared and _layout_intact(root):
            return
        for folder in ("tokenizer", "meteor/data", "spice/lib", "spice/tmp", "spice/cache"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        _link(source / "tokenizer" / "stanford-corenlp-3.4.1.jar", root / "tokenizer")
        _link(source / "meteor" / "meteor-1.5.jar", root / "meteor")
        _link(source / "meteor" / "data" / "paraphrase-en.gz", root / "meteor" / "data")
        for jar in sorted((source / "spice" / "lib").glob("*.jar")):
            _link(jar, root / "spice" / "lib")
        _copy(source / "spice" / "spice-1.0.jar", root / "spice")
        _prepared.add((root, source))


def _layout_intact(root: Path) -> bool:
    jars = ("tokenizer/stanford-corenlp-3.4.1.jar", "meteor/meteor-1.5.jar", "spice/spice-1.0.jar")
    return all((root / jar).is_file() for jar in jars)


def _link(target: Path, folder: Path) -> None:
    """A symlink to a read-only file (a copy where links are not allowed)."""
    if not target.is_file():
        raise JavaError(f"pycocoevalcap is incomplete: {target} is missing.")
    link = folder / target.name
    if link.is_symlink() and link.resolve() == target.resolve():
        return
    if link.is_file() and not link.is_symlink() and link.stat().st_size == target.stat().st_size:
        return  # a copy from an earlier run
    temp = folder / f".{target.name}.{os.getpid()}.tmp"
    temp.unlink(missing_ok=True)
    try:
        temp.symlink_to(target)
    except OSError:
        shutil.copyfile(target, temp)
    os.replace(temp, link)  # atomic: a concurrent worker never sees a half-made link


def _copy(target: Path, folder: Path) -> None:
    copy = folder / target.name
    if copy.is_file() and not copy.is_symlink() and copy.stat().st_size == target.stat().st_size:
        return
    temp = folder / f".{target.name}.{os.getpid()}.tmp"
    shutil.copyfile(target, temp)
    os.replace(temp, copy)


def _tail(stream: IO[bytes] | None, limit: int = 2000) -> str:
    if stream is None:
        return ""
    stream.seek(0)
    return stream.read().decode(errors="replace")[-limit:].strip()


# Tokenizer --------------------------------------------------------------------------------


def ptb_tokenize(captions: Mapping[K, Sequence[str]], *, kit: Toolkit) -> dict[K, list[str]]:
    """pycocoevalcap's PTBTokenizer.tokenize for {key: [caption, ...]}, run from the toolkit.

    Same command, same punctuation removal; the captions go to Java in one file either way,
    and each line is tokenized on its own, so several caption sets can share one call.
    """
    keys = [key for key, texts in captions.items() for _ in texts]
    lines = [text.translate(LINE_BREAKS) for texts in captions.values() for text in texts]
    folder = kit.tokenizer_jar.parent
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".txt", delete=False) as handle:
        handle.write("\n".join(lines).encode())
    try:
        done = subprocess.run(
            [
                *(kit.java, "-cp", kit.tokenizer_jar.name, "edu.stanford.nlp.process.PTBTokenizer"),
                *("-preserveLines", "-lowerCase", Path(handle.name).name),
            ],
            cwd=folder,
            capture_output=True,
            check=False,
        )
    finally:
        os.remove(handle.name)
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace")[-2000:].strip()
        raise JavaError(f"The PTB tokenizer failed (exit {done.returncode}): {stderr}")
    out = done.stdout.decode().split("\n")
    if len(out) == len(lines) + 1 and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        raise JavaError(f"The PTB tokenizer returned {len(out)} lines for {len(lines)} captions.")
    tokenized: dict[K, list[str]] = {}
    for key, line in zip(keys, out, strict=True):
        words = [word for word in line.rstrip().split(" ") if word not in PUNCTUATIONS]
        tokenized.setdefault(key, []).append(" ".join(words))
    return tokenized


# METEOR -----------------------------------------------------------------------------------


class MeteorProcess:
    """One METEOR 1.5 JVM (`-stdio`), started on first use and kept for later evaluations.

    Speaks the protocol of pycocoevalcap's Meteor (one SCORE line per clip, then one EVAL
    line) so scores are identical. Thread-safe; a JVM that died (killed, out of memory)
    is restarted once and the evaluation retried; after a fork the child starts its own.
    """

    def __init__(self, *, kit: Toolkit, memory: str = "2G") -> None:
        self.kit = kit
        self.memory = memory
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._pid = 0
        self.starts = 0  # JVMs started so far, for tests and benchmarks

    @property
    def jvm_pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    @property
    def running(self) -> bool:
        return self._proc is not None and self._pid == os.getpid() and self._proc.poll() is None

    def score(
        self, gts: Mapping[str, Sequence[str]], res: Mapping[str, Sequence[str]]
    ) -> tuple[float, list[float]]:
        """METEOR of res[key][0] against gts[key]: (corpus score, per-clip scores)."""
        if gts.keys() != res.keys():
            raise EvaluationError("METEOR needs the same clips in predictions and references.")
        with self._lock:
            try:
                return self._score(gts, res)
            except (BrokenPipeError, JavaError, ValueError):
                self._stop()
            return self._score(gts, res)

    def _score(
        self, gts: Mapping[str, Sequence[str]], res: Mapping[str, Sequence[str]]
    ) -> tuple[float, list[float]]:
        proc = self._ensure_started()
        assert proc.stdin is not None
        eval_line = "EVAL"
        for key in gts:
            hypothesis = res[key][0].replace("|||", "").replace("  ", " ")
            score_line = " ||| ".join(("SCORE", " ||| ".join(gts[key]), hypothesis))
            proc.stdin.write(f"{score_line}\n".encode())
            proc.stdin.flush()
            eval_line += f" ||| {self._readline(proc)}"
        proc.stdin.write(f"{eval_line}\n".encode())
        proc.stdin.flush()
        scores = [float(self._readline(proc)) for _ in gts]
        return float(self._readline(proc)), scores

    def _readline(self, proc: subprocess.Popen[bytes]) -> str:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            raise JavaError(f"METEOR stopped (exit {code}): {_tail(self._stderr)}")
        return line.decode().strip()

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self.running:
            assert self._proc is not None
            return self._proc
        if self._pid != os.getpid():
            # inherited from a parent process: its pipes are the parent's to use
            self._proc, self._stderr = None, None
        self._stop()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the JVM)
        jar = self.kit.meteor_jar
        self._proc = subprocess.Popen(
            [self.kit.java, "-jar", f"-Xmx{self.memory}", jar.name, *METEOR_ARGS],
            cwd=jar.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._pid = os.getpid()
        self.starts += 1
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._pid == os.getpid():
            if proc.stdin:
                with contextlib.suppress(OSError):
                    proc.stdin.close()  # METEOR exits at the end of its input
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        with self._lock:
            self._stop()


_shared_meteor: dict[tuple[Path, str], MeteorProcess] = {}
_shared_lock = threading.Lock()


def shared_meteor(kit: Toolkit) -> MeteorProcess:
    """The process-wide METEOR for this toolkit; Celery worker processes keep it warm."""
    with _shared_lock:
        key = (kit.root, kit.java)
        if key not in _shared_meteor:
            _shared_meteor[key] = MeteorProcess(kit=kit)
        return _shared_meteor[key]


@atexit.register
def close_shared_meteor() -> None:
    with _shared_lock:
        for meteor in _shared_meteor.values():
            meteor.close()
        _shared_meteor.clear()


# SPICE ------------------------------------------------------------------------------------


def spice_score(
    gts: Mapping[str, Sequence[str]], res: Mapping[str, Sequence[str]], *, kit: Toolkit
) -> tuple[float, dict[str, float]]:
    """pycocoevalcap's Spice.compute_score, with its temp and cache folders in the toolkit.

    Returns the mean of the per-clip "All" F-scores (NaN where SPICE gives none, as
    pycocoevalcap does) and those per-clip scores.
    """
    ids = sorted(gts)
    data = [{"image_id": key, "test": res[key][0], "refs": list(gts[key])} for key in ids]
    folder = kit.spice_dir
    with tempfile.NamedTemporaryFile(
        "w", dir=folder / "tmp", suffix=".json", delete=False
    ) as handle:
        json.dump(data, handle, indent=2)
    out_name = f"{handle.name}.out"
    try:
        done = subprocess.run(
            [
                *(kit.java, "-jar", "-Xmx8G", "spice-1.0.jar", handle.name),
                *("-cache", str(folder / "cache"), "-out", out_name, "-subset", "-silent"),
            ],
            cwd=folder,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            stderr = done.stderr.decode(errors="replace")[-2000:].strip()
            raise JavaError(f"SPICE failed (exit {done.returncode}): {stderr}")
        with open(out_name) as results:
            items = json.load(results)
    finally:
        Path(handle.name).unlink(missing_ok=True)
        Path(out_name).unlink(missing_ok=True)
    per_clip = {str(item["image_id"]): _float(item["scores"]["All"]["f"]) for item in items}
    # the mean over SPICE's output order, with numpy, exactly as pycocoevalcap takes it
    average = float(np.mean(np.array([_float(item["scores"]["All"]["f"]) for item in items])))
    return average, per_clip


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# Scoring ----------------------------------------------------------------------------------


@dataclass
class Scores:
    """Corpus-level scores by metric name (None: unavailable, with the reason)."""

    scores: dict[str, float | None] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    per_clip: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    meteor: dict[str, int] | None = None  # the METEOR JVM used: pid, JVMs started so far


@dataclass
class Evaluation:
    scores: dict[str, float | None]
    unavailable: dict[str, str]
    clips: int
    references: int
    seconds: dict[str, float]
    per_clip: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)
    meteor: dict[str, int] | None = None

    def as_dict(self, *, per_clip: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scores": self.scores,
            "unavailable": self.unavailable,
            "clips": self.clips,
            "references": self.references,
            "seconds": self.seconds,
            "meteor_process": self.meteor,
            "pycocoevalcap": _package_version(),
            "cider": CIDER_NOTE,
        }
        if per_clip:
            out["per_clip"] = self.per_clip
        return out


@dataclass
class HumanBound:
    """The AudioCaps "Human" row: the mean over rounds of each reference vs the others."""

    scores: dict[str, float | None]
    unavailable: dict[str, str]
    clips: int
    skipped: int  # clips with fewer than two references, which cannot take part
    rounds: list[dict[str, float | None]]
    references_per_clip: dict[int, int]  # how many clips have n references
    seconds: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "scores": self.scores,
            "unavailable": self.unavailable,
            "clips": self.clips,
            "skipped": self.skipped,
            "rounds": self.rounds,
            "references_per_clip": {str(n): c for n, c in self.references_per_clip.items()},
            "seconds": self.seconds,
            "pycocoevalcap": _package_version(),
            "cider": CIDER_NOTE,
        }


def families(names: Collection[str] | None) -> tuple[str, ...]:
    if names is None:
        return ALL_FAMILIES
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown:
        raise ValueError(
            f"Unknown metric {', '.join(unknown)}; choose from {', '.join(ALL_FAMILIES)}."
        )
    return tuple(name for name in ALL_FAMILIES if name in names)


def score_tokenized(
    gts: Mapping[str, Sequence[str]],
    res: Mapping[str, Sequence[str]],
    *,
    metrics: Collection[str] | None = None,
    kit: Toolkit,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> Scores:
    """Runs the chosen scorers on PTB-tokenized captions, as pycocoevalcap's COCOEvalCap does."""
    chosen = families(metrics)
    gts = {key: list(value) for key, value in gts.items()}
    res = {key: list(value) for key, value in res.items()}
    keys = list(gts)
    out = Scores(per_clip={key: {} for key in keys})

    def timed(name: str, run: Callable[[], Any]) -> Any:
        if progress:
            progress(name)
        started = time.perf_counter()
        value = run()
        out.seconds[name] = round(time.perf_counter() - started, 3)
        return value

    if "bleu" in chosen:
        score, per = timed("BLEU", lambda: Bleu(4).compute_score(gts, res, verbose=0))
        for n, name in enumerate(BLEU):
            out.scores[name] = float(score[n])
            _spread(out.per_clip, keys, name, per[n])
    if "meteor" in chosen:
        process = meteor or shared_meteor(kit)
        score, per = timed("METEOR", lambda: process.score(gts, res))
        out.scores["METEOR"] = float(score)
        _spread(out.per_clip, keys, "METEOR", per)
        out.meteor = {"pid": process.jvm_pid, "starts": process.starts}
    if "rouge" in chosen:
        score, per = timed("ROUGE-L", lambda: Rouge().compute_score(gts, res))
        out.scores["ROUGE-L"] = float(score)
        _spread(out.per_clip, keys, "ROUGE-L", per)
    if "cider" in chosen:
        score, per = timed("CIDEr-D", lambda: Cider().compute_score(gts, res))
        out.scores["CIDEr-D"] = float(score)
        _spread(out.per_clip, keys, "CIDEr-D", per)
    if "spice" in chosen:
        missing = kit.spice_missing()
        if missing:
            out.scores["SPICE"] = None
            out.unavailable["SPICE"] = missing
        else:
            try:
                score, per_key = timed("SPICE", lambda: spice_score(gts, res, kit=kit))
            except JavaError as exc:
                out.scores["SPICE"] = None
                out.unavailable["SPICE"] = str(exc)
            else:
                out.scores["SPICE"] = score
                _spread(out.per_clip, keys, "SPICE", [per_key[key] for key in keys])
    if "cider" in chosen and "spice" in chosen:
        spice = out.scores["SPICE"]
        if spice is None:
            out.scores["SPIDEr"] = None
            out.unavailable["SPIDEr"] = "the mean of CIDEr-D and SPICE; SPICE is unavailable"
        else:
            cider = out.scores["CIDEr-D"]
            assert cider is not None
            out.scores["SPIDEr"] = (cider + spice) / 2
            for key in keys:
                clip = out.per_clip[key]
                if "SPICE" in clip:
                    clip["SPIDEr"] = (clip["CIDEr-D"] + clip["SPICE"]) / 2
    return out


def _spread(
    per_clip: dict[str, dict[str, float]], keys: list[str], name: str, values: Sequence[Any]
) -> None:
    for key, value in zip(keys, values, strict=True):
        per_clip[key][name] = float(value)


def check_inputs(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> None:
    """Raises EvaluationError naming what is wrong: clips without a prediction or without
    references, predictions for unknown clips, empty captions."""
    if not references:
        raise EvaluationError("There are no references to evaluate against.")
    missing = [key for key in references if key not in predictions]
    extra = [key for key in predictions if key not in references]
    problems = []
    if missing:
        problems.append(f"{len(missing)} clip(s) have no prediction ({_few(missing)})")
    if extra:
        problems.append(f"{len(extra)} prediction(s) name clips without references ({_few(extra)})")
    no_refs = [key for key, refs in references.items() if not refs]
    if no_refs:
        problems.append(f"{len(no_refs)} clip(s) have an empty reference list ({_few(no_refs)})")
    blank = [key for key, text in predictions.items() if not str(text).strip()]
    blank += [key for key, refs in references.items() if any(not str(t).strip() for t in refs)]
    if blank:
        problems.append(f"{len(blank)} clip(s) have an empty caption ({_few(blank)})")
    if problems:
        raise EvaluationError("; ".join(problems) + ".")


def _few(keys: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(repr(key) for key in keys[:limit])
    return shown + (", ..." if len(keys) > limit else "")


def evaluate(
    *,
    predictions: Mapping[str, str],
    references: Mapping[str, Sequence[str]],
    metrics: Collection[str] | None = None,
    kit: Toolkit | None = None,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Scores one predicted caption per clip against the clip's reference captions.

    `predictions` maps a clip key to its caption, `references` the same keys to lists of
    captions; both must cover exactly the same clips. `metrics` picks families from
    FAMILIES (default all).
    """
    check_inputs(predictions, references)
    kit = kit or toolkit()
    chosen = families(metrics)
    if progress:
        progress("tokenizing")
    started = time.perf_counter()
    both = {("r", key): list(refs) for key, refs in references.items()}
    both.update({("p", key): [predictions[key]] for key in references})
    tokenized = ptb_tokenize(both, kit=kit)
    tokenize_seconds = round(time.perf_counter() - started, 3)
    gts = {key: tokenized[("r", key)] for key in references}
    res = {key: tokenized[("p", key)] for key in references}
    out = score_tokenized(gts, res, metrics=chosen, kit=kit, meteor=meteor, progress=progress)
    return Evaluation(
        scores=out.scores,
        unavailable=out.unavailable,
        clips=len(references),
        references=sum(len(refs) for refs in references.values()),
        seconds={"tokenize": tokenize_seconds, **out.seconds},
        per_clip=out.per_clip,
        meteor=out.meteor,
    )


def human_upper_bound(
    *,
    references: Mapping[str, Sequence[str]],
    metrics: Collection[str] | None = None,
    kit: Toolkit | None = None,
    meteor: MeteorProcess | None = None,
    progress: Progress | None = None,
) -> HumanBound:
    """Each reference in turn as the prediction, scored against the clip's other references;
    the mean over rounds is the human upper bound (AudioCaps, Table 3, "Human").

    Round i takes reference i of every clip (in the given order) as the candidate. With N
    references per clip there are N rounds, each scored with N-1 references. Clips with
    fewer references than the most any clip has take reference i mod n in round i. Clips
    with a single reference are skipped (and counted).
    """
    usable = {key: list(refs) for key, refs in references.items() if len(refs) >= 2}
    if not usable:
        raise EvaluationError("No clip has two or more references; a human bound needs them.")
    for key, refs in usable.items():
        if any(not text.strip() for text in refs):
            raise EvaluationError(f"Clip {key!r} has an empty reference caption.")
    kit = kit or toolkit()
    chosen = families(metrics)
    if progress:
        progress("tokenizing")
    started = time.perf_counter()
    tokenized = ptb_tokenize(usable, kit=kit)  # lines are tokenized independently
    seconds: dict[str, float] = {"tokenize": round(time.perf_counter() - started, 3)}
    count = max(len(refs) for refs in usable.values())
    rounds: list[Scores] = []
    for i in range(count):
        gts, res = {}, {}
        for key, refs in tokenized.items():
            pick = i % len(refs)
            res[key] = [refs[pick]]
            gts[key] = refs[:pick] + refs[pick + 1 :]

        def step(name: str, i: int = i) -> None:
            if progress:
                progress(f"round {i + 1}/{count}: {name}")

        scored = score_tokenized(gts, res, metrics=chosen, kit=kit, meteor=meteor, progress=step)
        rounds.append(scored)
        for name, value in scored.seconds.items():
            seconds[name] = round(seconds.get(name, 0.0) + value, 3)
    scores: dict[str, float | None] = {}
    for name in rounds[0].scores:
        values = [r.scores[name] for r in rounds]
        present = [v for v in values if v is not None]
        scores[name] = sum(present) / len(present) if len(present) == len(values) else None
    unavailable = {name: why for r in rounds for name, why in r.unavailable.items()}
    sizes: dict[int, int] = {}
    for refs in usable.values():
        sizes[len(refs)] = sizes.get(len(refs), 0) + 1
    return HumanBound(
        scores=scores,
        unavailable=unavailable,
        clips=len(usable),
        skipped=len(references) - len(usable),
        rounds=[r.scores for r in rounds],
        references_per_clip=dict(sorted(sizes.items())),
        seconds=seconds,
    )


def format_table(scores: Mapping[str, float | None], unavailable: Mapping[str, str]) -> str:
    """A plain-text table of scores; unavailable metrics say so, with the reasons below."""
    lines = [f"{'metric':<9} score"]
    for name, value in scores.items():
        lines.append(f"{name:<9} {value:.4f}" if value is not None else f"{name:<9} unavailable")
    lines += [f"{name}: {why}" for name, why in unavailable.items()]
    return "\n".join(lines)
