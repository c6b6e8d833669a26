"""How long ``tokenrelay exec`` takes to start its command, and its RSS while the command runs.

Against the emulator on loopback (its issuer mints the OIDC token, its token service exchanges it),
``tokenrelay exec ... -- sh -c 'echo started > FIFO; exec sleep 60'`` runs --runs times per round. The
start is the time from launching ``tokenrelay exec`` to the command writing to the FIFO: the
interpreter's start-up, the daemon's imports, the socket, the first exchange, and the spawn. The
RSS is the relay's (VmRSS of the ``tokenrelay exec`` process) after --settle seconds of the command
running. Both are compared with a baseline measured in the same round, interleaved so that machine
load hits both alike: ``python -c pass`` on the same interpreter for the start (the floor of any
Python command), and an idle ``python -c 'import time; time.sleep(60)'``'s RSS. Targets: start
<= 0.3 s; the RSS under the idle sidecar's 40 MiB.

    .venv/bin/python bench/exec_start.py [--runs 10] [--rounds 3] [--settle 1] [--tokenrelay PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tokenrelay.emulator import Emulator, EmulatorServer

SUBJECT = "system:serviceaccount:bench:exec"
TARGET_START = 0.3
TARGET_RSS_MIB = 40.0


class EmulatorThread:
    """The emulator on 127.0.0.1 in a thread of its own, so the bench can block on subprocesses."""

    def __init__(self) -> None:
        self.emulator = Emulator()
        self.server = EmulatorServer(self.emulator, grpc=False)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def vm_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def started_after(
    argv: list[str], fifo: Path, env: dict[str, str], settle: float
) -> tuple[float, float, float]:
    """Seconds from launching ``argv`` until its command writes to ``fifo``, and the CPU seconds the
    relay used until then; its RSS (MiB) after ``settle`` more seconds. The command is then stopped
    with SIGTERM, as a CI runner would."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env)
    with fifo.open() as reader:  # blocks until the command opens the FIFO to write
        reader.read()
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(process.pid)
    time.sleep(settle)  # the relay trims its heap after the exchange; let it settle as a CI step would
    rss = vm_rss_mib(process.pid)
    process.send_signal(signal.SIGTERM)
    if process.wait(30) != 128 + signal.SIGTERM:
        raise SystemExit(f"{argv[0]} exited with {process.returncode}, not 143")
    return elapsed, cpu, rss


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far: less at the mercy of the
    machine's load than the wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def python_pass() -> tuple[float, float]:
    """Wall and CPU time of ``python -c pass``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def idle_python_rss(settle: float) -> float:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(settle)
    rss = vm_rss_mib(process.pid)
    process.kill()
    process.wait()
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="runs of each command per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each reported on its own")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds before the RSS is read")
    parser.add_argument(
        "--tokenrelay",
        default=str(Path(sys.executable).parent / "tokenrelay"),
        help="the tokenrelay command (default: this environment's)",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="trexec-", dir="/tmp"))
    fifo = workdir / "started"
    os.mkfifo(fifo)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with EmulatorThread() as stack:
        emulator, url = stack.emulator, stack.server.url
        org = emulator.organization("bench")
        workload = emulator.workload(org.uid, SUBJECT, role="viewer", name="exec-bench")
        oidc = workdir / "oidc-token"
        oidc.write_text(emulator.mint(SUBJECT, url, 3600))
        argv = [
            args.tokenrelay,
            "exec",
            f"--auth-url={url}",
            f"--api-url={url}",
            f"--identity={workload.identity.uid}",
            f"--id-token-file={oidc}",
            "--log-level=warning",
            "--",
            "sh",
            "-c",
            'echo started > "$1"; exec sleep 60',
            "sh",
            str(fifo),
        ]
        started_after(argv, fifo, env, 0)  # warm the bytecode and page caches
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        for number in range(1, args.rounds + 1):
            starts, cpus, rsses, passes, pass_cpus = [], [], [], [], []
            for _ in range(args.runs):
                elapsed, cpu, rss = started_after(argv, fifo, env, args.settle)
                starts.append(elapsed)
                cpus.append(cpu)
                rsses.append(rss)
                wall, pass_cpu = python_pass()
                passes.append(wall)
                pass_cpus.append(pass_cpu)
            bare = [idle_python_rss(args.settle) for _ in range(3)]
            start, baseline = statistics.median(starts), statistics.median(passes)
            cpu, baseline_cpu = statistics.median(cpus), statistics.median(pass_cpus)
            rss, bare_rss = statistics.median(rsses), statistics.median(bare)
            print(
                f"round {number}: exec start {start * 1000:.0f} ms (min {min(starts) * 1000:.0f}, "
                f"max {max(starts) * 1000:.0f}; target <= {TARGET_START * 1000:.0f}), python -c pass "
                f"{baseline * 1000:.0f} ms, ratio {start / baseline:.1f}; "
                f"CPU to the start {cpu * 1000:.0f} ms, "
                f"python -c pass {baseline_cpu * 1000:.0f} ms, ratio {cpu / max(baseline_cpu, 1e-3):.1f}; "
                f"relay RSS {rss:.1f} MiB (target < {TARGET_RSS_MIB:.0f}), idle python {bare_rss:.1f} MiB, "
                f"ratio {rss / bare_rss:.1f}"
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    fifo.unlink()
    oidc.unlink()
    workdir.rmdir()


if __name__ == "__main__":
    main()
