"""What a killed eval leaves behind: a summary's temporary file of a killed writer is
removed by the next write, and a launched rank whose launcher died stops instead of writing on.
``test_eval_torchrun.py`` kills a real ``torchrun`` agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from specdec.bench.rundir import pid_running, write_json
from specdec.testing.paths import REPO
from specdec.testing.procs import gone

ROOT = REPO


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """Old code: ``.summary.json.<pid>.tmp`` of a writer killed before its replace stayed."""
    dead, alive = dead_pid(), os.getppid()  # pytest's parent runs while pytest does
    stale = tmp_path / f".summary.json.{dead}.tmp"
    busy = tmp_path / f".summary.json.{alive}.tmp"  # a writer still running: left alone
    other = tmp_path / f".progress.json.{dead}.tmp"  # another file's: its own next write's
    for path in (stale, busy, other):
        path.write_text('{"half": ')
    assert not pid_running(dead) and pid_running(alive)
    write_json(tmp_path / "summary.json", {"prompts": 3})
    assert json.loads((tmp_path / "summary.json").read_text()) == {"prompts": 3}
    assert not stale.exists() and busy.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["summary.json", busy.name, other.name]
    )


LAUNCHER = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]],
                             start_new_session=True)  # as torchrun starts its ranks
    print(child.pid, flush=True)
    time.sleep(600)
""")
RANK = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from specdec.bench.run.launcher import stop_with_launcher
    assert stop_with_launcher(interval_s=0.1)
    out = Path(sys.argv[1])
    while True:  # a rank appending records
        with out.open("a") as f:
            f.write("record\\n")
        time.sleep(0.05)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_rank_whose_launcher_is_killed_stops_writing(tmp_path):
    """Old code: the rank, in a session of its own, never heard of its launcher's SIGKILL and
    wrote on (here: until the test's timeout)."""
    out = tmp_path / "records.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORLD_SIZE": "2", "RANK": "1"}
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, RANK, str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    rank = int(launcher.stdout.readline())
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_text().count("\n") >= 2):
            assert not gone(rank), "the rank ended before writing (see its stderr)"
            assert time.monotonic() < deadline, "the rank never wrote"
            time.sleep(0.05)
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 20
        while not gone(rank) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(rank), "the rank outlived its launcher"
        written = out.read_text()
        time.sleep(0.3)
        assert out.read_text() == written  # nothing written after it stopped
    finally:
        if not gone(rank):
            os.kill(rank, signal.SIGKILL)


def test_a_single_process_eval_is_not_watched(monkeypatch):
    from specdec.bench.run.launcher import stop_with_launcher

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert stop_with_launcher() is False
