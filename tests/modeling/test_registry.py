from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from modeling.ml import catalog
from modeling.ml.config import ConfigError, LSTMConfig, TempAttConfig
from modeling.ml.presets import model_preset
from modeling.ml.registry import MODELS, UnknownModelError, build_model, lookup

ML_DIR = Path(__file__).resolve().parents[2] / "modeling" / "ml"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_registered_model_builds_from_its_tiny_preset(name):
    model_class, config_class = MODELS[name]
    model = build_model(name, model_preset(name, "tiny"), vocab_size=11)
    assert isinstance(model, model_class)
    assert isinstance(model.config, config_class)
    assert model.config.vocab_size == 11


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(UnknownModelError, match=r"unknown model 'gpt' \(known models: act, bilstm"):
        lookup("gpt")


def test_the_catalog_describes_every_registered_model_as_its_module_does():
    assert sorted(catalog.MODEL_CONFIGS) == sorted(MODELS)
    for name, (model_class, config_class) in MODELS.items():
        assert catalog.config_class(name) is config_class
        assert catalog.uses_video(name) == model_class.uses_video, name


def test_build_model_rejects_another_models_config():
    with pytest.raises(ConfigError, match="takes a TempAttConfig, not a LSTMConfig"):
        build_model("tempatt", LSTMConfig(vocab_size=10))


def test_build_model_accepts_a_dict_strictly():
    model = build_model(
        "tempatt",
        {"vocab_size": 10, "feature_dim": 4, "embed_dim": 8, "encoder_dim": 4, "decoder_dim": 8},
    )
    assert isinstance(model.config, TempAttConfig)
    with pytest.raises(ConfigError, match=r"unknown config key 'model\.heads'"):
        build_model("tempatt", {"vocab_size": 10, "heads": 2})


def test_build_model_needs_a_real_vocabulary_size():
    with pytest.raises(ConfigError, match="vocab_size must cover"):
        build_model("lstm", model_preset("lstm", "tiny"))


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_under_modeling_ml_imports_django():
    files = sorted(ML_DIR.rglob("*.py"))
    assert len(files) > 10
    offenders = [
        str(path.relative_to(ML_DIR))
        for path in files
        if any(name == "django" or name.startswith("django.") for name in _imported_modules(path))
    ]
    assert offenders == []


def _loaded_in_a_fresh_process(modules: str, packages: tuple[str, ...]) -> str:
    """The modules of `packages` that a fresh interpreter holds after importing `modules`."""
    code = (
        f"import sys, {modules}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ML_DIR.parents[1],
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    return out.stdout.strip()


def test_importing_the_captioning_core_loads_no_django():
    modules = (
        "modeling.ml.registry, modeling.ml.trainer, modeling.ml.decoding, "
        "modeling.ml.checkpoint, modeling.ml.data, modeling.ml.video"
    )
    assert _loaded_in_a_fresh_process(modules, ("django",)) == "[]"


def test_the_settings_modules_load_no_torch():
    """Run planning reads these in the web process, which must not load torch (see
    tests/test_import_graph.py)."""
    modules = (
        "modeling.ml.catalog, modeling.ml.config, modeling.ml.config_av, "
        "modeling.ml.config_encoders, modeling.ml.config_features, modeling.ml.config_video, "
        "modeling.ml.presets"
    )
    assert _loaded_in_a_fresh_process(modules, ("torch", "numpy")) == "[]"
