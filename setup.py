"""Build hook only (the metadata is in pyproject.toml).

The top-level ``signatures/``, ``optimizers/`` and ``datasets/`` folders are the editable sources of the
shipped prompt variants, search spaces and dataset declarations; a wheel gets a copy of them as package data
under ``declrag/defaults/<kind>/`` (``declrag.resources`` finds them). MANIFEST.in puts the folders in the sdist, so a wheel built from the sdist
has them too. An editable install copies nothing: it reads the checkout's folders.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
KINDS = ("signatures", "optimizers", "datasets")


class build_py_with_defaults(build_py):
    def run(self) -> None:
        if not getattr(self, "editable_mode", False):
            # a build folder an earlier build left (build/lib, which pip reuses for a checkout) still holds modules
            # removed from src/ since: the package is copied afresh, so a wheel never ships one
            shutil.rmtree(Path(self.build_lib) / "declrag", ignore_errors=True)
        super().run()
        if getattr(self, "editable_mode", False):
            return
        pkg = Path(self.build_lib) / "declrag"
        for kind in KINDS:
            src, dest = ROOT / kind, pkg / "defaults" / kind
            files = sorted(src.glob("*.yaml")) + sorted(src.glob("README.md"))
            if not any(f.suffix == ".yaml" for f in files):
                raise SystemExit(f"declrag build: {src} has no *.yaml files to package (build from a checkout "
                                 "or from an sdist made by `python -m build`)")
            shutil.rmtree(dest, ignore_errors=True)  # no stale files from an earlier build
            dest.mkdir(parents=True)
            for f in files:
                self.copy_file(str(f), str(dest / f.name))


setup(cmdclass={"build_py": build_py_with_defaults})
