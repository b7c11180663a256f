"""The project's processes (the CLI's, a Spark app's) end without the interpreter's last garbage collections."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytestmark = pytest.mark.unit


def test_at_exit_every_object_is_frozen_after_the_other_exit_handlers():
    script = """
import atexit, gc
from housekeeping.core.process_exit import skip_garbage_collection_at_exit
order = []
skip_garbage_collection_at_exit()
atexit.register(lambda: order.append(gc.get_freeze_count()))  # registered later, runs earlier
assert gc.get_freeze_count() == 0
atexit._run_exitfuncs()
print(order[0], gc.get_freeze_count() > 1000)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]


def test_the_installed_command_ends_so():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "housekeeping"]
    assert script.value == "housekeeping.cli.main:command"
    from housekeeping.cli import main as cli_main

    registered: list = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_main, "skip_garbage_collection_at_exit", lambda: registered.append(True))
        patch.setattr(cli_main, "main", lambda: 0)
        assert cli_main.command() == 0
    assert registered == [True]
