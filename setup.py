"""Packs python/pagellm with what the CMake build made: the extension pagellm/_pagellm*.so
and the pagellm executable (installed as pagellm/bin/pagellm, which the console script and
pagellm.entrypoints.openai.api_server run). Nothing is compiled here; build first with
scripts/build.sh. PAGELLM_BUILD_DIR overrides ./build."""

import glob
import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.abspath(os.environ.get("PAGELLM_BUILD_DIR", os.path.join(ROOT, "build")))


def built_files():
    extensions = glob.glob(os.path.join(BUILD_DIR, "python", "pagellm", "_pagellm*.so"))
    binary = os.path.join(BUILD_DIR, "pagellm")
    if len(extensions) != 1 or not os.access(binary, os.X_OK):
        raise SystemExit(f"pagellm: no built extension and binary in {BUILD_DIR}; run "
                         "scripts/build.sh first (or set PAGELLM_BUILD_DIR)")
    return extensions[0], binary


class BuildPyWithEngine(build_py):
    """build_py that also copies the compiled extension and binary into the package."""

    def run(self):
        super().run()
        extension, binary = built_files()
        package_dir = os.path.join(self.build_lib, "pagellm")
        shutil.copy2(extension, package_dir)
        os.makedirs(os.path.join(package_dir, "bin"), exist_ok=True)
        shutil.copy2(binary, os.path.join(package_dir, "bin", "pagellm"))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled extension: tag it for this interpreter and platform."""

    def has_ext_modules(self):
        return True


# setuptools' scratch (build/, egg-info) goes under the CMake build dir, not the source tree.
SCRATCH = os.path.join(BUILD_DIR, "setuptools")
os.makedirs(SCRATCH, exist_ok=True)

setup(
    package_dir={"": "python"},
    packages=["pagellm", "pagellm.engine", "pagellm.entrypoints", "pagellm.entrypoints.openai",
              "pagellm.transformers_utils", "pagellm.v1", "pagellm.v1.engine"],
    cmdclass={"build_py": BuildPyWithEngine},
    distclass=BinaryDistribution,
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
    zip_safe=False,
)
