"""Every example in docs/python.md, run as printed: each ```python block
after a <!-- tested: NAME.py --> marker."""

import os
import re
import subprocess
import sys

import pytest

from conftest import TREE

DOC = os.path.join(TREE, "docs", "python.md")


def examples():
    text = open(DOC, encoding="utf-8").read()
    return re.findall(r"<!-- tested: (\S+\.py) -->\n```python\n(.*?)```", text, re.S)


def test_the_page_has_its_examples():
    names = [n for n, _ in examples()]
    assert len(names) >= 6 and len(set(names)) == len(names)


@pytest.mark.parametrize("name,code", examples(), ids=[n for n, _ in examples()])
def test_example_runs_as_printed(name, code, tmp_path):
    if name != "deterministic.py" and not os.environ.get("PGHOST"):
        pytest.skip("needs the throwaway server")
    path = tmp_path / name
    path.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(TREE, "python") + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
