"""The sandbox where the OS refuses some of its layers: it still runs, and claims only what it got.

A CI machine may lack user namespaces, mount namespaces, Landlock or seccomp. Each case here
simulates that on this machine: a fresh interpreter installs a seccomp filter refusing those
kernel features (``unshare`` with the namespace's flag, the Landlock syscalls, ``PR_SET_SECCOMP``),
then runs a program through ``run_sandboxed`` and prints the result. The filter is inherited by
the sandbox, exactly as a kernel without the feature would answer it.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from specdec.bench.sandbox import seccomp as sc
from specdec.testing.paths import REPO

ROOT = REPO
PRCTL = {"x86_64": 157, "aarch64": 167}
CLONE = {"userns": 0x10000000, "mntns": 0x00020000, "pidns": 0x20000000}
LAYERS = {
    "userns": {"userns", "fresh-uid"},
    "mntns": {"mntns", "empty-tmp", "tmpfs-disk", "ro-root", "fresh-uid", "private-proc"},
    "pidns": {"pidns", "private-proc"},
    "landlock": {"landlock-fs", "landlock-tcp", "landlock-signal"},
    "seccomp": {"seccomp"},
}
PROGRAM = (
    "open('a', 'w').write('x')\nassert open('a').read() == 'x'\n"
    "assert 'NoNewPrivs:\\t1' in open('/proc/self/status').read()  # no setuid gains\n"
    "print('ran')\n"
)

DRIVER = """
import ctypes, json, logging, os, struct, sys
from specdec.bench.sandbox import run_sandboxed
logging.basicConfig(level=logging.WARNING)  # the fallbacks' warnings, on stderr
prog = json.loads(sys.argv[1])
raw = b"".join(struct.pack("<HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(raw, len(raw))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog), ctypes.addressof(buf))
libc, ul = ctypes.CDLL(None), ctypes.c_ulong
if os.geteuid() != 0:  # root installs it without no_new_privs, which the sandbox would inherit
    assert libc.prctl(38, ul(1), ul(0), ul(0), ul(0)) == 0
assert libc.prctl(22, ul(2), ctypes.byref(fprog), ul(0), ul(0)) == 0
res = run_sandboxed(sys.argv[2], timeout_s=10)
bad = run_sandboxed("x = 1\\nassert x == 2, 'boom'\\n", timeout_s=10)
print(json.dumps({"passed": res.passed, "layers": res.layers, "output": res.output,
                  "failed": not bad.passed, "quoted": "assert x == 2" in bad.output}))
"""


def _refusing(machine: str, refuse: tuple[str, ...]) -> list[tuple[int, int, int, int]]:
    """A filter answering as a kernel without the ``refuse``d features would."""
    col = sc.AUDIT_ARCH[machine][1]
    eperm, enosys, einval = 0x50001, 0x50026, 0x50016
    prog = [(sc.LD_W_ABS, 0, 0, sc.OFF_NR)]

    def rule(nr: int, block: list[tuple[int, int, int, int]]) -> None:
        prog.extend([(sc.JEQ_K, 0, len(block), nr), *block])

    def when_arg0(value: int, test: int, ret: int) -> list[tuple[int, int, int, int]]:
        # refuse when arg0 matches, else reload the syscall number for the rules below
        return [
            (sc.LD_W_ABS, 0, 0, 16),
            (test, 0, 1, value),
            (sc.RET_K, 0, 0, ret),
            (sc.LD_W_ABS, 0, 0, sc.OFF_NR),
        ]

    for name in ("userns", "mntns", "pidns"):
        if name in refuse:
            rule(sc.NR["unshare"][col], when_arg0(CLONE[name], sc.JSET_K, eperm))
    if "landlock" in refuse:
        for nr in (444, 445, 446):
            rule(nr, [(sc.RET_K, 0, 0, enosys)])
    if "seccomp" in refuse:
        rule(PRCTL[machine], when_arg0(22, sc.JEQ_K, einval))  # PR_SET_SECCOMP
    return [*prog, (sc.RET_K, 0, 0, sc.RET_ALLOW)]


@pytest.mark.skipif(
    platform.machine() not in PRCTL or not sys.platform.startswith("linux"),
    reason="the simulation needs seccomp on x86_64 or aarch64",
)
@pytest.mark.parametrize(
    "refuse",
    [
        ("userns",),
        ("mntns",),
        ("pidns",),
        ("userns", "mntns"),
        ("landlock", "seccomp"),
        ("userns", "mntns", "landlock", "seccomp"),
    ],
)
def test_refused_layers_degrade_and_are_not_claimed(refuse):
    prog = _refusing(platform.machine(), refuse)
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(prog), PROGRAM],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.splitlines()[-1])
    assert res["passed"] and res["output"] == "ran\n", res
    assert res["failed"] and res["quoted"], res  # a traceback quotes the program's own line
    claimed = set(res["layers"])
    for name in refuse:
        assert not claimed & LAYERS[name], (name, res["layers"])
    assert "nocaps" in claimed  # giving up capabilities needs nothing the kernel can refuse
    # a missing private /proc is logged (as every expected layer: specdec.bench.sandbox.fallbacks)
    assert ("layer private-proc not obtained" in out.stderr) == ("private-proc" not in claimed)
