"""The sandbox for model-written code: clean passes only, and containment of what the code tries.

Every containment test runs a program that attempts the harmful thing and checks the effect
from outside (the file, the listener, the processes), with a control showing the check can see
it. Isolation layers the OS refuses are skipped with the reason, after asserting the result does
not claim them.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specdec.bench.sandbox import Limits, SandboxResult, run_sandboxed

LINUX = sys.platform.startswith("linux")


def _netns_possible() -> bool:
    """Whether this machine lets a process create a network namespace (as ``unshare`` does)."""
    exe = shutil.which("unshare")
    if not LINUX or exe is None:
        return False
    probe = [exe, "--net", "--map-root-user", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped) according to /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _alive_in_group(pgid: int) -> list[int]:
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    members = []
    for pid in pids:
        try:
            pgrp = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
        except (FileNotFoundError, ProcessLookupError):
            continue
        if pgrp == pgid and _alive(pid):
            members.append(pid)
    return members


def _unique_name() -> str:
    """A process name (``comm``, at most 15 bytes) no other process has."""
    return f"sbx{os.getpid() % 1000}{time.monotonic_ns() % 10**8}"[:15]


def _name_self(name: str) -> str:
    """A line of code giving the calling process the name ``name`` (``PR_SET_NAME``)."""
    return f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)"


def _named(name: str) -> set[int]:
    """Host pids of the processes whose ``comm`` is ``name``."""
    found = set()
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and (p / "comm").read_text().strip() == name:
                found.add(int(p.name))
        except OSError:
            continue
    return found


def _run_watching(name: str, source: str, **kw) -> tuple[SandboxResult, list[int]]:
    """Run ``source`` sandboxed while watching the host's /proc for processes named ``name``."""
    box: dict[str, SandboxResult] = {}
    runner = threading.Thread(target=lambda: box.update(res=run_sandboxed(source, **kw)))
    runner.start()
    found: set[int] = set()
    while runner.is_alive():
        found |= _named(name)
        time.sleep(0.02)
    runner.join()
    return box["res"], sorted(found)


def _gone_soon(check, seconds: float = 2.0) -> bool:
    """SIGKILLed processes take a moment to leave the process table."""
    deadline = time.monotonic() + seconds
    while check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_only_a_clean_run_passes():
    ok = run_sandboxed("assert sum([1, 2]) == 3\nprint('ran')\n", timeout_s=5)
    assert ok.passed and ok.reason == "passed" and ok.output == "ran\n" and not ok.timed_out
    wrong = run_sandboxed("assert 1 == 2\n", timeout_s=5)
    assert not wrong.passed and "AssertionError" in wrong.reason and not wrong.killed
    assert not run_sandboxed("def f(:\n", timeout_s=5).passed  # syntax error
    # leaving early with status 0 is not a pass: the tests after it never ran
    early = run_sandboxed("import os\nos._exit(0)\nassert False\n", timeout_s=5)
    assert not early.passed and early.returncode == 0 and "before" in early.reason
    assert not run_sandboxed("import sys\nsys.exit(0)\n", timeout_s=5).passed


def test_the_parents_environment_and_folder_stay_out_of_reach(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECDEC_SECRET", "hunter2")
    monkeypatch.chdir(tmp_path)
    res = run_sandboxed(
        "import os\nprint(sorted(os.environ.items()))\nprint(os.getcwd())\n", timeout_s=5
    )
    env_line, cwd = res.output.splitlines()
    assert res.passed and "SPECDEC_SECRET" not in env_line and "hunter2" not in env_line
    assert os.environ["SPECDEC_SECRET"] == "hunter2"  # the control: the parent has it
    assert Path(cwd) != tmp_path and not Path(cwd).exists()  # its own folder, removed after


def test_the_working_folder_is_removed_even_when_the_program_locks_it():
    res = run_sandboxed(
        "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').write('x')\n"
        "os.chmod('a/b', 0)\nos.chmod('a', 0)\nprint(os.getcwd())\n",
        timeout_s=5,
    )
    assert res.passed and not Path(res.output.strip()).exists()


def test_no_connection_reaches_a_local_listener():
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp.settimeout(0.5)
    udp.settimeout(0.5)
    with tcp, udp:
        with socket.create_connection(tcp.getsockname(), timeout=2):  # control: it listens
            tcp.accept()[0].close()
        res = run_sandboxed(
            "import socket\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"try:\n    u.sendto(b'leak', {udp.getsockname()!r})\n"
            "except OSError as e:\n    print('udp refused:', e)\n"
            f"socket.create_connection({tcp.getsockname()!r}, timeout=2)\nprint('CONNECTED')\n",
            timeout_s=5,
        )
        assert "CONNECTED" not in res.output and not res.passed
        with pytest.raises(TimeoutError):
            tcp.accept()
        if not _netns_possible():
            assert not res.network_isolated
            pytest.skip(
                "this OS refuses network namespaces (unshare --net fails); the result "
                "reports network_isolated=False"
            )
        assert res.network_isolated and "netns" in res.layers
        with pytest.raises(TimeoutError):  # UDP too: no route at all, not just a TCP rule
            udp.recvfrom(16)
        assert "udp refused" in res.output


def test_writes_outside_the_working_folder_fail(tmp_path):
    target = tmp_path / "escaped.txt"
    res = run_sandboxed(f"open({str(target)!r}, 'w').write('x')\n", timeout_s=5)
    assert not res.passed and "PermissionError" in res.reason and not target.exists()
    inside = run_sandboxed(
        "open('inside.txt', 'w').write('x')\nassert open('inside.txt').read() == 'x'\n", timeout_s=5
    )
    assert inside.passed  # the control: its own folder is writable
    # below the Python guard: libc's open() through ctypes meets only the OS layer (Landlock)
    res = run_sandboxed(
        "import ctypes, os\n"
        f"fd = ctypes.CDLL(None).open({str(target).encode()!r}, os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "print('fd', fd)\n",
        timeout_s=5,
    )
    if "landlock-fs" not in res.layers:
        pytest.skip("no Landlock on this kernel: only the Python guard stops writes outside")
    assert res.output.strip() == "fd -1" and not target.exists()


def test_memory_is_capped_in_the_child_only():
    before = resource.getrlimit(resource.RLIMIT_AS)
    res = run_sandboxed(
        "x = bytearray(10 * 2**30)\nprint('ALLOCATED')\n",
        timeout_s=5,
        limits=Limits(memory_bytes=1 << 30),
    )
    assert not res.passed and "MemoryError" in res.output and "ALLOCATED" not in res.output
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert run_sandboxed("x = bytearray(64 * 2**20)\n", timeout_s=5).passed  # control


@pytest.mark.skipif(not LINUX, reason="reads the process table from /proc")
def test_timeout_kills_the_whole_process_group_and_returns_on_time():
    # The child names itself (its host pid is found by that name: the sandbox's own /proc
    # shows its namespace's pids only), then both it and its parent sleep far past the timeout.
    name = _unique_name()
    start = time.monotonic()
    res, found = _run_watching(
        name,
        "import ctypes, os, time\n"
        "if os.fork() == 0:\n"
        f"    {_name_self(name)}\n"
        "    time.sleep(60)\n"
        "time.sleep(60)\n",
        timeout_s=3,
    )
    assert time.monotonic() - start < 3 + 2
    assert res.timed_out and res.killed and not res.passed
    assert len(found) == 1, found  # the control: the grandchild was seen alive
    assert _gone_soon(lambda: _alive_in_group(res.pgid)) and not _alive(found[0])


@pytest.mark.skipif(not LINUX, reason="reads the process table from /proc")
def test_a_process_that_leaves_the_group_dies_with_the_pid_namespace():
    name = _unique_name()
    res, found = _run_watching(
        name,
        "import ctypes, os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.setsid()\n"
        f"    {_name_self(name)}\n"
        "    time.sleep(60)\n"
        "while open(f'/proc/{pid}/comm').read().strip() != "
        f"{name!r}:\n"
        "    time.sleep(0.01)\n"
        "time.sleep(1.0)\n",
        timeout_s=5,
    )
    assert len(found) == 1, (found, res)  # the control: the escaped process was seen alive
    escaped = found[0]
    if "pidns" not in res.layers:
        os.kill(escaped, 9)
        pytest.skip("no PID namespace here: a process that calls setsid() outlives the group")
    assert res.passed and _gone_soon(lambda: _alive(escaped))


def test_processes_are_capped_and_limits_cannot_be_raised():
    res = run_sandboxed(
        "import os, time\nn = 0\ntry:\n"
        "    while n < 500:\n"
        "        if os.fork() == 0:\n            time.sleep(10)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError:\n    print('LIMIT', n)\n",
        timeout_s=5,
        limits=Limits(nproc=16),
    )
    if os.geteuid() == 0 and "userns" not in res.layers:
        pytest.skip("root outside a user namespace is exempt from RLIMIT_NPROC")
    assert res.passed and res.output.split()[0] == "LIMIT" and int(res.output.split()[1]) < 16
    raise_as = run_sandboxed(
        "import resource\nm = resource.RLIM_INFINITY\n"
        "resource.setrlimit(resource.RLIMIT_AS, (m, m))\n",
        timeout_s=5,
    )
    assert not raise_as.passed and "not allowed to raise" in raise_as.reason
