"""How long ``docker-credential-tokenrelay get``, ``git-credential-tokenrelay get`` and
``tokenrelay go-auth`` (go's GOAUTH command, run through pip's ``tokenrelay`` console script) take
against a running sidecar.

Compared, in the same run and interleaved (so machine load hits all alike), with ``python -c pass``
on the interpreter the helpers run on: the ratio is what a helper adds over bare Python start-up.
Target: ratio <= 1.1 for each.

    .venv/bin/python bench/helper_start.py [--runs 60] [--rounds 3] [--helper PATH]

By default the helper timed is a user's: this checkout installed with ``pip install`` (not editable,
with its dependencies) into a fresh plain venv, so no ``--system-site-packages`` start-up and no
editable-install finder weigh on either side; that takes some seconds, and needs the package index.
``--helper PATH`` times an installed docker helper instead (e.g. ``.venv/bin/docker-credential-tokenrelay``);
the git helper beside it is timed too.

The sidecar is a real ``tokenrelay run`` (from this interpreter's environment) whose token service
is tokenrelay.testing.FakeTokenService on loopback. docker's helper gets the host on stdin exactly as
``echo`` would (with a newline), git's the ``protocol``/``host`` lines git writes; no shell in between.
Bytecode caching stays on, as for a user: ``PYTHONDONTWRITEBYTECODE`` is removed from the
children's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokenrelay.lite.socketclient import LocalApiError, fetch_token
from tokenrelay.testing import FakeTokenService, ThreadedServer, make_jwt

HOST = "registry.bench.example"


def install_plain_venv(workdir: str) -> str:
    """This checkout pip-installed (not editable) into a venv without system site-packages; its helper."""
    venv = Path(workdir) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    checkout = Path(__file__).resolve().parents[1]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(checkout)], env=env, check=True)
    return str(venv / "bin" / "docker-credential-tokenrelay")


def script_interpreter(script: str) -> str:
    """The interpreter the helper runs on: the baseline must use the same one. The helpers start
    through /bin/sh and run the interpreter named on the ``#!`` line of ``tokenrelay`` beside them."""
    with Path(script).with_name("tokenrelay").open() as f:
        first = f.readline()
    return first[2:].strip().split()[0] if first.startswith("#!/") else sys.executable


def start_sidecar(workdir: str, auth_url: str) -> tuple[subprocess.Popen[bytes], str]:
    socket = f"{workdir}/s.sock"
    env = {**os.environ, "BENCH_OIDC": make_jwt({"sub": "bench", "exp": int(time.time()) + 86400})}
    tokenrelay = Path(sys.executable).parent / "tokenrelay"
    sidecar = subprocess.Popen(
        [
            str(tokenrelay) if tokenrelay.exists() else "tokenrelay",
            "run",
            f"--auth-url={auth_url}",
            "--api-url=https://api.bench.example",
            "--identity=bench",
            f"--audience={HOST}",
            "--id-token-env=BENCH_OIDC",
            f"--socket={socket}",
            "--log-level=warning",
        ],
        env=env,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            fetch_token(socket, HOST, timeout=1.0)
            return sidecar, socket
        except LocalApiError:
            if sidecar.poll() is not None or time.monotonic() > deadline:
                sidecar.kill()
                raise SystemExit("the sidecar did not come up") from None
            time.sleep(0.05)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run."""
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=60, help="runs of each command per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each reported on its own")
    parser.add_argument(
        "--helper",
        metavar="PATH",
        help="the docker-credential-tokenrelay to time (default: this checkout, installed into a new venv)",
    )
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="trbench-", dir="/tmp")
    rounds: list[tuple[dict[str, list[tuple[float, float]]], float]] = []
    try:
        helper = args.helper or install_plain_venv(workdir)
        python = script_interpreter(helper)
        port = ThreadedServer(FakeTokenService().app()).start().port
        sidecar, socket = start_sidecar(workdir, f"http://127.0.0.1:{port}")
        try:
            env = {**os.environ, "TOKENRELAY_SOCKET": socket, "TOKENRELAY_HOSTS": HOST}
            # Measure the steady state a user sees: bytecode cached after the first run, not recompiled.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            git = str(Path(helper).with_name("git-credential-tokenrelay"))
            commands = {
                "docker": ([helper, "get"], f"{HOST}\n".encode()),
                "git": ([git, "get"], f"protocol=https\nhost={HOST}\n\n".encode()),
                "go-auth": ([str(Path(helper).with_name("tokenrelay")), "go-auth"], b""),
                "python": ([python, "-c", "pass"], b""),
            }
            check = subprocess.run(
                commands["docker"][0], input=commands["docker"][1], env=env, capture_output=True, check=False
            )
            if check.returncode != 0 or json.loads(check.stdout)["Username"] != "_token":
                raise SystemExit(f"the helper failed: {check.stdout.decode().strip()}")
            check = subprocess.run(
                commands["git"][0], input=commands["git"][1], env=env, capture_output=True, check=False
            )
            if check.returncode != 0 or b"username=_token" not in check.stdout:
                raise SystemExit(f"the git helper failed: {check.stderr.decode().strip()}")
            check = subprocess.run(
                commands["go-auth"][0], input=b"", env=env, capture_output=True, check=False
            )
            if check.returncode != 0 or b"Authorization: Basic " not in check.stdout:
                raise SystemExit(f"go-auth failed: {check.stderr.decode().strip()}")
            for _ in range(3):  # warm the page cache for all
                for argv, stdin in commands.values():
                    timed(argv, stdin, env)
            for _ in range(args.rounds):
                times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
                for _ in range(args.runs):
                    for name, (argv, stdin) in commands.items():
                        times[name].append(timed(argv, stdin, env))
                rounds.append((times, os.getloadavg()[0]))
        finally:
            sidecar.terminate()
            sidecar.wait(10)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"helper: {helper}{'' if args.helper else '  (a plain venv: pip install of this checkout)'}")
    print(f"interpreter: {python}")
    print(f"{args.rounds} rounds of {args.runs} runs of each command, interleaved; medians per round")
    ratios: dict[str, list[float]] = {"docker": [], "git": [], "go-auth": []}
    header = ["round", "load avg", "python wall"]
    for name in ratios:
        header += [f"{name} wall", "ratio", "ratio cpu"]
    print(f"{header[0]:<7}" + "".join(f"{name:>14}" for name in header[1:]))
    for number, (times, load) in enumerate(rounds, start=1):
        python_ms = statistics.median(t[0] for t in times["python"]) * 1000
        python_cpu = statistics.median(t[1] for t in times["python"])
        row = f"{number:<7}{load:>14.2f}{python_ms:>12.1f}ms"
        for name in ratios:
            helper_ms = statistics.median(t[0] for t in times[name]) * 1000
            cpu_ratio = statistics.median(t[1] for t in times[name]) / python_cpu
            ratios[name].append(helper_ms / python_ms)
            row += f"{helper_ms:>12.1f}ms{helper_ms / python_ms:>14.2f}{cpu_ratio:>14.2f}"
        print(row)
    for name, values in ratios.items():
        print(
            f"{name}: ratio (wall), median of the rounds: {statistics.median(values):.2f}   (target <= 1.1)"
        )


if __name__ == "__main__":
    main()
