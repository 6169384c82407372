"""The `autocomp` command ends with a quick exit; main() (what tests call) does not freeze."""

import subprocess
import sys

PROBE = """
import gc, sys
from autocomp.cli import main as cli
sys.argv = ["autocomp", "families"]
code = cli.{call}()
print(code, gc.get_freeze_count() > 0)
"""


def _run(call: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(call=call)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_entry_point_freezes_before_exit_and_main_does_not():
    assert _run("entry") == "0 True"
    assert _run("main") == "0 False"
