"""pycocoevalcap's Java parts, run from a writable folder: the jar layout (`Toolkit`), the
PTB tokenizer, a long-lived METEOR process per worker process and SPICE.

pycocoevalcap writes temporary files into its own package folder, which fails on a
read-only install, so `Toolkit` lays the jars out in a writable cache folder and runs them
from there; the commands and their inputs are pycocoevalcap 1.2's own, so the numbers are
the ones it gives when called directly. METEOR costs ~10 s of JVM start-up, so one METEOR
process per worker process is kept alive (`shared_meteor`) and reused by every evaluation.
`corpus.evaluation` scores with these; pure Python, no Django.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
from pycocoevalcap.tokenizer.ptbtokenizer import PUNCTUATIONS

CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
METEOR_ARGS = ("-", "-", "-stdio", "-l", "en", "-norm")
# PTBTokenizer with -preserveLines starts a new line at each of these, which would shift
# every later caption onto the wrong clip; pycocoevalcap only replaces "\n"
LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\x0b\x0c\u2028\u2029"})

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
        # no server paths: the reason is stored with scores and shown on run pages
        return (
            f"SPICE needs Stanford CoreNLP 3.6.0, which is not installed on this server "
            f"({', '.join(missing)} missing). Put stanford-corenlp-3.6.0.jar and "
            f"stanford-corenlp-3.6.0-models.jar (from stanford-corenlp-full-2015-12-09.zip; "
            f"pycocoevalcap's spice/get_stanford_models.py downloads them) into the spice/lib "
            f"folder of the installed pycocoevalcap package."
        )


def toolkit(
    cache_dir: Path | str | None = None, *, java: str = "java", source: Path | None = None
) -> Toolkit:
    """Prepares (once per process and folder) and returns the Java toolkit."""
    source = (source or pycocoevalcap_dir()).resolve()
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = (base / f"pycocoevalcap-{package_version()}").resolve()
    _prepare(root, source)
    return Toolkit(root=root, source=source, java=java)


@lru_cache(maxsize=1)
def package_version() -> str:
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
