"""The ctypes mirrors against the headers: a C program generated from the
mirrors prints sizeof and offsetof as the compiler sees them."""

import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import TREE
from advlock import _binding as B

# Structures whose fields are private: only their size is ABI.
OPAQUE = {"advlock_machine", "advlock_sim", "advlock_fake_db"}
INCLUDE = os.path.join(TREE, "include")


def probe_source():
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "advlock_fake.h"',
             'int main(void) {']
    for cname, mirror in B.MIRRORS.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        if cname in OPAQUE:
            continue
        for field, _ in mirror._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));'
                         % (cname, field, cname, field))
    lines += ['return 0;', '}']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = os.environ.get("CC", "cc").split()[0]
    if not shutil.which(cc) or not os.path.exists(os.path.join(INCLUDE, "advlock_fake.h")):
        pytest.skip("needs a C compiler and the source tree's headers")
    d = tmp_path_factory.mktemp("layout")
    src, exe = d / "probe.c", d / "probe"
    src.write_text(probe_source())
    subprocess.run([cc, "-std=c11", "-I" + INCLUDE, "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return dict((k, int(v)) for k, v in (line.split() for line in out.splitlines()))


def test_every_mirror_has_the_size_the_compiler_gives(c_layout):
    for cname, mirror in B.MIRRORS.items():
        assert ctypes.sizeof(mirror) == c_layout[cname], cname


def test_every_public_field_sits_where_the_compiler_puts_it(c_layout):
    for cname, mirror in B.MIRRORS.items():
        if cname in OPAQUE:
            continue
        for field, _ in mirror._fields_:
            assert getattr(mirror, field).offset == c_layout["%s.%s" % (cname, field)], \
                "%s.%s" % (cname, field)


def test_the_machine_is_264_bytes():
    assert ctypes.sizeof(B.MachineStorage) == 264


def test_a_known_report_reads_back_through_the_mirror():
    # The core writes a report; the mirror must read what it wrote.
    import advlock
    m = advlock.Machine()
    m.start_acquire("migrations", 1500, now=1000)
    m.on_result(B.RESULT_FALSE, now=1003)
    a = m.next_action()
    assert (a.kind, a.sleep_ms, a.wake_at_ms) == (B.ACTION_SLEEP, 100, 1103)
    r = a.report.contents
    assert (r.key, r.timeout_ms, r.attempts) == (advlock.derive_key("migrations"), 1500, 1)


def test_the_soname_version_is_the_makefiles():
    with open(os.path.join(TREE, "Makefile"), encoding="utf-8") as f:
        line = next(line for line in f if line.startswith("SOVERSION"))
    assert line.split(":=")[1].strip() == B.SOVERSION
