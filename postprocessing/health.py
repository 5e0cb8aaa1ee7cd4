"""Post-processing's /healthz check: is LanguageTool reachable or installed?"""

from __future__ import annotations

from core.health import Check


def check_languagetool() -> Check:
    # the same resolution post-processing uses (URL, offline install, download cache)
    from postprocessing.languagetool import describe
    from postprocessing.services import grammar_config

    return Check(*describe(grammar_config()))
