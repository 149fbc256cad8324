"""The package against the headers. Constants reach Python from the
libraries' tables (advlock_constants, advlock_fake_constants): a C program
compiled from the headers prints every enumerator, limit and type size they
declare, and each must be in the table with the same value. The ctypes
structures mirrored by hand are checked the same way (sizeof, offsetof), and
each public enum of the package must have exactly the C enum's values."""

import ctypes
import os
import re
import shutil
import subprocess

import pytest

from conftest import TREE
import advlock
from advlock import _binding as B
from advlock import _fake_binding as F
from advlock import fake

INCLUDE = os.path.join(TREE, "include")
HEADERS = {"advlock.h": B.CONSTANTS, "advlock_fake.h": F.CONSTANTS}
MIRRORS = dict(B.MIRRORS, **F.MIRRORS)
# Types whose fields are private: only their size is ABI.
OPAQUE = {"advlock_machine", "advlock_lease", "advlock_peer", "advlock_peers", "advlock_prng",
          "advlock_fake_clock", "advlock_fake_db", "advlock_sim", "advlock_member",
          "advlock_conn_slot", "advlock_conn"}
# The package's enums and the C enum each one is.
ENUMS = {"advlock_mode": advlock.Mode, "advlock_scope": advlock.Scope,
         "advlock_wait": advlock.Wait, "advlock_backoff": advlock.Backoff,
         "advlock_outcome": advlock.Outcome, "advlock_failure": advlock.Failure,
         "advlock_detail": advlock.Detail, "advlock_sql": advlock.Sql,
         "advlock_lease_expiry": advlock.LeaseExpiry,
         "advlock_sim_step_kind": fake.StepKind, "advlock_fake_status": fake.FakeStatus}


def declared(header):
    """What a header declares, read from its text: {group: [C names]}, the
    groups named as advlock_constants names them."""
    with open(os.path.join(INCLUDE, header), encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    groups = {}
    for m in re.finditer(r"typedef enum (\w+)\s*\{(.*?)\}\s*\w+;", text, re.S):
        groups[m.group(1)] = [e.split("=")[0].strip() for e in m.group(2).split(",") if e.strip()]
    groups["limit"] = [m.group(1) for m in re.finditer(r"^#define (ADVLOCK_\w+)\s+\S", text, re.M)
                       if not m.group(1).endswith(("_H", "_API", "_VERSION"))]
    enums = set(groups) - {"limit"}
    groups["sizeof"] = [m.group(1) for m in re.finditer(r"^\} (advlock_\w*[a-z]);", text, re.M)
                        if m.group(1) not in enums]
    return groups


def probe_source():
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "advlock_fake.h"',
             'int main(void) {']
    for header in HEADERS:
        for group, names in declared(header).items():
            for name in names:
                value = "sizeof(%s)" % name if group == "sizeof" else name
                lines.append('printf("%s %s %%lld\\n", (long long)(%s));' % (group, name, value))
    for cname, mirror in MIRRORS.items():
        if cname in OPAQUE:
            continue
        for field, _ in mirror._fields_:
            lines.append('printf("offset %s.%s %%zu\\n", offsetof(%s, %s));'
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
    return dict((group + " " + name, int(v))
                for group, name, v in (line.split() for line in out.splitlines()))


def test_each_library_lists_every_constant_of_its_header_with_the_compilers_value(c_layout):
    for header, table in HEADERS.items():
        for group, names in declared(header).items():
            for name in names:
                assert table.get(group, {}).get(name) == c_layout[group + " " + name], \
                    "%s: %s %s" % (header, group, name)


def test_each_library_lists_nothing_its_header_does_not_declare():
    for header, table in HEADERS.items():
        names = declared(header)
        for group, values in table.items():
            assert set(values) <= set(names.get(group, ())), "%s: %s" % (header, group)


def test_every_mirror_has_the_size_the_library_gives():
    sizes = dict(B.CONSTANTS["sizeof"], **F.CONSTANTS["sizeof"])
    for cname, mirror in MIRRORS.items():
        assert ctypes.sizeof(mirror) == sizes[cname], cname


def test_every_public_field_sits_where_the_compiler_puts_it(c_layout):
    for cname, mirror in MIRRORS.items():
        if cname in OPAQUE:
            continue
        for field, _ in mirror._fields_:
            assert getattr(mirror, field).offset == c_layout["offset %s.%s" % (cname, field)], \
                "%s.%s" % (cname, field)


def test_every_public_enum_has_exactly_the_c_enums_values():
    tables = dict(B.CONSTANTS, **F.CONSTANTS)
    for cname, py_enum in ENUMS.items():
        values = {v for name, v in tables[cname].items() if not name.endswith("_COUNT")}
        assert {int(m) for m in py_enum} == values, cname


def test_the_sql_table_is_read_whole():
    assert len(advlock.Sql) == B.SQL_COUNT == len(advlock._machine.SQL_TEXT)


def test_a_known_report_reads_back_through_the_mirror():
    # The core writes a report; the mirror must read what it wrote.
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
