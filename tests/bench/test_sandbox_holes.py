"""Four holes an earlier sandbox had: each attempted inside the sandbox and checked from outside.

1. a path-based Unix-domain socket listener on the host;
2. ``chmod`` (setuid included) and ``setxattr`` of a file outside the working folder;
3. totals: memory of several processes together, bytes written in many files together;
4. a forged pass: writing ``done`` to every descriptor and leaving with status 0.

Each test has a control showing its check can see the effect, asserts the attempt failed, and
then asserts the layer that stops it WAS obtained wherever this machine allows that layer (the
probes below ask the OS directly, not the sandbox); only where it does not, it skips with why.
Also here: a root caller's fresh uid (root's own files), the sandbox's folder off the program's
``sys.path``, and the shape of the syscall filter on both architectures it knows.
"""

from __future__ import annotations

import os
import platform
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from specdec.bench.sandbox import Limits, run_sandboxed
from specdec.testing.paths import REPO

LINUX = sys.platform.startswith("linux")


def _unshare_ok(*flags: str) -> bool:
    """Whether ``unshare FLAGS true`` works here (the util-linux tool, not the sandbox's code)."""
    exe = "/usr/bin/unshare" if Path("/usr/bin/unshare").exists() else None
    if not LINUX or exe is None:
        return False
    return subprocess.run([exe, *flags, "true"], capture_output=True, check=False).returncode == 0


def _kernel_at_least(major: int, minor: int) -> bool:
    release = platform.release().split("-")[0].split(".")
    return tuple(int(x) for x in release[:2]) >= (major, minor)


def _mounts_possible() -> bool:
    """A private mount namespace, and ``mount_setattr`` (5.12) to make it read-only."""
    return _kernel_at_least(5, 12) and (
        _unshare_ok("--user", "--map-root-user", "--mount")
        or (os.geteuid() == 0 and _unshare_ok("--mount"))
    )


def _seccomp_possible() -> bool:
    if not LINUX or platform.machine() not in ("x86_64", "aarch64"):
        return False
    return "Seccomp:" in Path("/proc/self/status").read_text()


def _cgroup_parent(controller: str) -> Path | None:
    """This process's ``controller`` cgroup (v1, or delegated v2) if a child can be made in it."""
    if not LINUX:
        return None
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point, fstype, options = line.split()[1:4]
        if fstype == "cgroup" and controller in options.split(",") and controller in own:
            parent = Path(point + own[controller])
        elif fstype == "cgroup2" and "" in own:
            parent = Path(point + own[""])
            try:
                if controller not in (parent / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        else:
            continue
        probe = parent / f"specdec-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
            return parent
        except OSError:
            continue
    return None


def test_no_path_based_unix_socket_is_reached(tmp_path):
    path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    listener.settimeout(0.5)
    with listener:
        with socket.socket(socket.AF_UNIX) as c:  # control: it listens and is reachable
            c.connect(str(path))
            listener.accept()[0].close()
        res = run_sandboxed(
            "import socket\n"
            "try:\n    socket.socket(socket.AF_UNIX).close()\n"
            "except OSError as e:\n    print('refused', e.errno)\n"
            "a, b = socket.socketpair()\na.sendall(b'pair')\nassert b.recv(4) == b'pair'\n"
            f"s = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\ns.sendall(b'leak')\n"
            "print('CONNECTED')\n",
            timeout_s=5,
        )
        if not (_seccomp_possible() or _mounts_possible()):
            pytest.skip("neither seccomp nor a private /tmp here: a Unix socket stays reachable")
        assert "CONNECTED" not in res.output and not res.passed
        with pytest.raises(TimeoutError):
            listener.accept()
    if not _seccomp_possible():
        pytest.skip("no seccomp here: only the empty /tmp and /run hide sockets, not one elsewhere")
    assert "seccomp" in res.layers and "refused 97" in res.output  # EAFNOSUPPORT, any path


@pytest.fixture
def outside_file():
    """A file outside the sandbox's folder and outside the temp dirs it hides (/tmp, /run)."""
    folder = Path(tempfile.mkdtemp(prefix=".sandbox-victim-", dir=REPO))
    target = folder / "victim"
    target.write_text("x")
    target.chmod(0o644)
    yield target
    shutil.rmtree(folder)


def test_metadata_of_files_outside_cannot_change(outside_file):
    target = outside_file
    try:
        os.setxattr(target, "user.control", b"1")  # control: this file system keeps xattrs
        os.removexattr(target, "user.control")
        xattrs = True
    except OSError:
        xattrs = False
    # through libc, below the Python audit hook: only the OS layers can stop these
    res = run_sandboxed(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"p = {str(target).encode()!r}\n"
        "print('suid', libc.chmod(p, 0o4777))\nprint('chmod', libc.chmod(p, 0o600))\n"
        "print('xattr', libc.setxattr(p, b'user.evil', b'1', 1, 0))\n"
        "print('remount', libc.mount(None, b'/', None, 32 | 4096, None))\n",
        timeout_s=5,
    )
    lines = dict(line.split() for line in res.output.splitlines())
    assert lines["remount"] == "-1" and ("nocaps" in res.layers or not LINUX), res
    if _seccomp_possible():  # a setuid bit and an xattr are refused anywhere
        assert "seccomp" in res.layers and lines["suid"] == lines["xattr"] == "-1", res.output
        assert not stat.S_IMODE(target.stat().st_mode) & 0o7000
        assert not xattrs or os.listxattr(target) == []
    if not _mounts_possible():
        pytest.skip(
            "no private mount namespace here: a plain chmod of the caller's own files "
            "outside the folder stays possible"
        )
    assert "ro-root" in res.layers and set(lines.values()) == {"-1"}, res.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_root_caller_leaves_uid_0_behind(outside_file):
    if os.geteuid() != 0:
        pytest.skip("not run as root: there is no uid 0 to give up")
    outside_file.chmod(0o600)  # readable by its owner, root, only
    program = (
        f"import os\nprint(os.geteuid(), flush=True)\nprint(open({str(outside_file)!r}).read())\n"
    )
    res = run_sandboxed(program, timeout_s=5)
    if not _mounts_possible():
        pytest.skip("no user and mount namespace for a fresh uid: root's own files stay readable")
    assert "fresh-uid" in res.layers and int(res.output.split()[0]) != 0
    assert not res.passed and "PermissionError" in res.reason


def test_all_files_together_are_capped(tmp_path):
    # 8 files of 2 MiB each (per-file cap 4 MiB) against a 6 MiB total
    res = run_sandboxed(
        "n = 0\ntry:\n    for i in range(8):\n"
        "        with open(f'f{i}', 'wb') as f:\n"
        "            f.write(b'x' * (2 << 20))\n        n += 1\n"
        "except OSError as e:\n    print('full', e.errno)\nprint('files', n)\n",
        timeout_s=5,
        limits=Limits(file_bytes=4 << 20, disk_bytes=6 << 20),
    )
    if not _mounts_possible():
        pytest.skip("no private mount namespace here: only RLIMIT_FSIZE caps one file")
    assert "tmpfs-disk" in res.layers and res.passed
    assert "full 28" in res.output and int(res.output.split()[-1]) <= 3  # ENOSPC at 6 MiB


def test_memory_of_all_processes_together_is_capped():
    # 4 processes of 96 MiB each, below the per-process RLIMIT_AS, against a 160 MiB total
    res = run_sandboxed(
        "import os\nkids = []\nfor i in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        x = b'\\x01' * (96 << 20)\n        import time\n        time.sleep(1.5)\n"
        "        os._exit(0)\n    kids.append(pid)\n"
        "codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]\n"
        "print('held', sum(c == 0 for c in codes))\n",
        timeout_s=10,
        limits=Limits(memory_bytes=512 << 20, total_memory_bytes=160 << 20),
    )
    held = int(res.output.split()[-1]) if res.output.startswith("held") else None
    parents = [p for p in (_cgroup_parent("pids"), _cgroup_parent("memory")) if p is not None]
    assert not [d for p in parents for d in p.glob("specdec-sandbox-*")]  # removed after the run
    if _cgroup_parent("pids") is not None:
        assert "cgroup-pids" in res.layers
    if _cgroup_parent("memory") is None:
        pytest.skip("no writable memory cgroup here: RLIMIT_AS caps each process only")
    assert "cgroup-memory" in res.layers and held is not None and held <= 1, res.output


def test_a_completion_cannot_forge_a_pass(monkeypatch):
    monkeypatch.setattr(secrets, "token_hex", lambda n=16: "feedface" * 4)
    forged = run_sandboxed(
        "import os, sys\nseen = [sys.argv, open('/proc/self/cmdline', 'rb').read()]\n"
        "for fd in range(3, 64):\n    try:\n        os.set_blocking(fd, False)\n"
        "        seen.append(os.read(fd, 4096))\n    except OSError:\n        pass\n"
        "print(seen)\nfor fd in range(3, 64):\n    try:\n"
        "        os.write(fd, b'done\\n')\n    except OSError:\n        pass\n"
        "os._exit(0)\nassert False, 'the tests'\n",
        timeout_s=5,
    )
    assert forged.returncode == 0 and not forged.passed, forged
    assert "feedface" not in forged.output  # the host's nonce was never within its reach
    honest = run_sandboxed("print('ok')\n", timeout_s=5)
    assert honest.passed  # the control: the same nonce passes a program that ran to its end


def test_the_sandboxs_own_folder_is_off_the_programs_path():
    res = run_sandboxed(
        "import sys\n"
        "print([p for p in sys.path if p.endswith(('bench', 'sandbox'))])\n"
        "import importlib.util as u\n"
        "print([m for m in ('confine', 'judge', 'wire', 'uid', 'supervisor')\n"
        "       if u.find_spec(m) is not None])\n",
        timeout_s=5,
    )
    # its modules (calibration, markdown; confine, uid, wire) shadow nothing the program imports
    assert res.passed and res.output == "[]\n[]\n", res.output


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_syscall_filter_is_well_formed(machine):
    from specdec.bench.sandbox import seccomp as sc

    for allow_inet in (True, False):
        prog = sc.build_filter(machine, allow_inet=allow_inet)
        assert prog[0] == (sc.LD_W_ABS, 0, 0, sc.OFF_ARCH) and prog[-1][0] == sc.RET_K
        for i, (code, jt, jf, _) in enumerate(prog):
            if code in (sc.JEQ_K, sc.JSET_K, sc.JGE_K):  # every jump lands inside the program
                assert i + 1 + max(jt, jf) < len(prog)
    with pytest.raises(KeyError):
        sc.build_filter("sparc64", allow_inet=True)
