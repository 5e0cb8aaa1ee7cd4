"""Build hook: a wheel carries the site's templates/ and static/ inside the earmark package.

The checkout keeps both folders at the repository root, where earmark.settings finds them;
an installed earmark has no repository root, so a wheel build copies them to
earmark/templates and earmark/static (settings look there first). Editable installs keep
reading the checkout's own folders. Everything else is declared in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SITE_FOLDERS = ("templates", "static")


class BuildPyWithSiteFolders(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for folder in SITE_FOLDERS:
            self.copy_tree(folder, str(Path(self.build_lib) / "earmark" / folder))


setup(cmdclass={"build_py": BuildPyWithSiteFolders})
