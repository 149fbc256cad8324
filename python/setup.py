"""The wheel's build step: setuptools with one addition, the C libraries.

The package loads libadvlock and libadvlock_fake with ctypes; a wheel
carries them inside the package (python/advlock/_binding.py finds them
there). They are built by the project's own make, from the same sources
with the same flags as `make all`, into the checkout's build directory
(ADVLOCK_BUILD, default build, as for the source tree), and copied in under
their sonames. The version is the C header's ADVLOCK_VERSION, as
scripts/version.sh reads it.
"""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70 has its own; Debian 12's comes with python3-wheel
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        raise SystemExit("advlock: building the wheel needs the wheel package (Debian: "
                         "python3-wheel; in a venv, --system-site-packages)") from None

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ADVLOCK_BUILD", "build")
LIBRARIES = ("libadvlock.so", "libadvlock_fake.so")


def header_version():
    if not os.path.exists(os.path.join(TREE, "include", "advlock.h")):
        raise SystemExit("advlock: the wheel builds from a checkout of the whole repository "
                         "(python/ beside include/ and src/), not from an sdist")
    return subprocess.run([os.path.join(TREE, "scripts", "version.sh")], check=True,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()


class BuildPyWithLibraries(build_py):
    """build_py, then make's shared libraries into the built package."""

    def run(self):
        super().run()
        built = os.path.join(TREE, BUILD)
        subprocess.run(["make", "-C", TREE, "--no-print-directory", "BUILD=" + BUILD]
                       + [os.path.join(BUILD, lib) for lib in LIBRARIES], check=True)
        for lib in LIBRARIES:
            # build/libadvlock.so -> libadvlock.so.1 (the soname) -> the file.
            soname = os.readlink(os.path.join(built, lib))
            shutil.copy(os.path.realpath(os.path.join(built, lib)),
                            os.path.join(self.build_lib, "advlock", soname))


class WithLibraries(Distribution):
    """A distribution with binaries: installed as platform code (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """Tagged for the platform the libraries were built for, and for any
    Python 3: ctypes loads them, no CPython ABI is involved."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


setup(version=header_version(), distclass=WithLibraries,
      cmdclass={"build_py": BuildPyWithLibraries, "bdist_wheel": PlatformWheel},
      # Setuptools' scratch files go to the build directory, not python/.
      options={"build": {"build_base": os.path.join(TREE, BUILD, "python")},
               "egg_info": {"egg_base": os.path.join(TREE, BUILD, "python")}})
