"""``tokenrelay emulate``: run the emulator; ``tokenrelay emulate mint``: get a platform token from it.

``mint`` asks a running emulator (``POST /emulator/v1/mint``, loopback only) rather than reading its
key from the state file: it then works for an in-memory emulator too, and the key never leaves the
emulator's process. With ``--write-dir`` it keeps a kubelet-style rotating token file there until
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..lite.netloc import parse_hostport
from .address import DEFAULT_LISTEN, URL_ENV

if TYPE_CHECKING:
    from .sts.oidc import TrustedIssuer

# The platforms' own commands, played against a running emulator (platforms/commands.py): put a script that
# runs `tokenrelay emulate buildkite-agent "$@"` on PATH as `buildkite-agent`.
STAND_INS = {
    "buildkite-agent": "a `buildkite-agent oidc request-token` that asks the emulator's Buildkite agent API",
    "circleci": "a `circleci run oidc get` that asks the emulator's CircleCI endpoint",
}
PLATFORM_NAMES = (
    "github-actions",
    "gitlab",
    "buildkite",
    "circleci",
    "bitbucket",
    "azure-pipelines",
    "gcp",
    "azure",
    "aws",
    "spiffe",
)


def _hostport(text: str) -> tuple[str, int]:
    try:
        return parse_hostport(text, DEFAULT_LISTEN)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _trusted_issuer(text: str) -> TrustedIssuer:
    from .sts.oidc import TrustedIssuer  # the emulator's imports, only when the flag is given

    try:
        return TrustedIssuer.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: more than 0 and at most a week")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        type=_hostport,
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address to serve on (port 0 picks a free one). Default: {DEFAULT_LISTEN}",
    )
    parser.add_argument("--state", metavar="FILE", help="keep state in this SQLite file (else in memory)")
    parser.add_argument(
        "--token-lifetime",
        type=_seconds,
        default=3600.0,
        metavar="SECONDS",
        help="lifetime of the API tokens the token service issues. Default: 3600",
    )
    parser.add_argument("--seed", action="store_true", help="load a starter organization (idempotent)")
    parser.add_argument(
        "--trust-issuer",
        action="append",
        type=_trusted_issuer,
        default=[],
        metavar="ISSUER[=JWKS]",
        help="also accept OIDC tokens from this issuer (repeatable): its keys from its discovery document "
        "over HTTP, or from JWKS, a file or a URL (a cluster: ISSUER=FILE from kubectl get --raw "
        "/openid/v1/jwks)",
    )
    parser.add_argument(
        "--spiffe-socket",
        metavar="PATH",
        help="also serve the SPIFFE Workload API on this Unix socket (needs tokenrelay[spiffe])",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    mint = actions.add_parser("mint", help="print a platform OIDC token signed by a running emulator")
    mint.add_argument(
        "--sub",
        help="the token's subject (required unless --platform; with it, default the platform's own, "
        "e.g. gitlab's project_path:acme/app:ref_type:branch:ref:main)",
    )
    mint.add_argument("--aud", help="the token's audience (default: the emulator's URL)")
    mint.add_argument("--lifetime", type=_seconds, default=3600.0, metavar="SECONDS", help="Default: 3600")
    mint.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, f"http://{DEFAULT_LISTEN}"),
        help=f"the running emulator [env {URL_ENV}, default http://{DEFAULT_LISTEN}]",
    )
    mint.add_argument(
        "--write-dir",
        metavar="DIR",
        help="instead of printing, keep DIR/token fresh (kubelet-style symlink swap) until interrupted",
    )
    mint.add_argument(
        "--platform",
        choices=PLATFORM_NAMES,
        help="mint with this platform's issuer and claims (docs/emulator.md); --sub, if given, replaces "
        "its subject",
    )
    for name, summary in STAND_INS.items():
        stand_in = actions.add_parser(name, help=summary, add_help=False)
        stand_in.add_argument("words", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace) -> int:
    if args.action == "mint":
        return _mint(args)
    if args.action in STAND_INS:
        from .platforms.commands import STAND_INS as commands

        return commands[args.action](args.words)
    from ..serving.startup import run_service

    return run_service("emulate", lambda: serve(args), log_level="info", interrupted=0)


async def serve(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    import signal

    from .app import Emulator, EmulatorServer
    from .iam.store import Store
    from .platforms import aws
    from .seed import seed

    stop = stop or asyncio.Event()
    store = Store(args.state)
    emulator = Emulator(store, token_lifetime=args.token_lifetime, trusted_issuers=args.trust_issuer)
    server = EmulatorServer(emulator, *args.listen, spiffe_socket=args.spiffe_socket)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await server.start()
        except OSError as exc:
            from ..serving.listening import bind_error

            raise bind_error(exc, "--listen", *args.listen) from None
        url = server.url
        _say(f"emulator: {url}")
        _say(f"issuer: {url}  (discovery {url}/.well-known/openid-configuration)")
        _say(f"token service: {url}/sts/exchange")
        _say(f"api: {url}/iam/v2beta1/  {url}/registry/v2beta1/  {url}/vulnerabilities/v2beta1/")
        _say(f"registry: {url.removeprefix('http://')}  (the OCI distribution API on {url}/v2/)")
        _say(
            f"aws: AWS_ENDPOINT_URL_STS={url}{aws.STS_PATH} AWS_REGION=us-east-1 "
            f"AWS_ACCESS_KEY_ID={aws.TEST_ACCESS_KEY} AWS_SECRET_ACCESS_KEY={aws.TEST_SECRET_KEY}"
        )
        if emulator.workload_api is not None:
            _say(f"spiffe: SPIFFE_ENDPOINT_SOCKET={emulator.workload_api.endpoint}")
        if args.seed:
            seeded = seed(emulator)
            _say(f"seed organization: {seeded.organization.uid}")
            for role, identity in seeded.identities.items():
                _say(f"seed {role} identity: {identity.uid} (subject {identity.subject})")
            owner = seeded.identities["owner"]
            from .commandpaths import scripts_dir, tokenrelay

            mint = f"{tokenrelay(scripts_dir())} emulate mint --url {url} --sub {owner.subject}"
            _say(
                f"try: {mint} > oidc-token && "
                f'curl -s -H "Authorization: Bearer $(cat oidc-token)" '
                f"'{url}/sts/exchange?aud={url}&identity={owner.uid}'"
            )
        await stop.wait()
    finally:
        await server.stop()
        store.close()
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _mint(args: argparse.Namespace) -> int:
    if not (args.sub or args.platform):
        raise SystemExit(
            "tokenrelay emulate mint: give --sub SUBJECT, or --platform NAME for a platform's own"
        )
    url = args.url.rstrip("/") + "/emulator/v1/mint"
    # a field left out is the emulator's default: the platform's own subject, the emulator's URL
    given = {"sub": args.sub, "aud": args.aud, "platform": args.platform}
    payload = {"lifetime": args.lifetime} | {
        name: value for name, value in given.items() if value is not None
    }

    def fetch() -> str:
        # the URL is the user's own --url, an http:// address of an emulator
        request = urllib.request.Request(  # noqa: S310
            url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                token: str = json.loads(response.read())["token"]
                return token
        except urllib.error.HTTPError as exc:
            raise SystemExit(
                f"tokenrelay emulate mint: {url} answered HTTP {exc.code}: {exc.read()[:300]!r}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise SystemExit(
                f"tokenrelay emulate mint: no emulator at {args.url} ({exc}); start one with "
                f"`tokenrelay emulate` or point --url (env {URL_ENV}) at it"
            ) from None

    if args.write_dir is None:
        sys.stdout.write(fetch() + "\n")
        return 0
    try:
        return asyncio.run(_keep_file(args.write_dir, fetch))
    except KeyboardInterrupt:
        return 0


async def _keep_file(directory: str, fetch: Callable[[], str]) -> int:
    from .platforms.local import RotatingTokenFile

    async def mint() -> str:
        return await asyncio.to_thread(fetch)

    writer = RotatingTokenFile(directory, mint)
    await writer.start()
    _say(f"token file: {writer.path}")
    try:
        await asyncio.Event().wait()
    finally:
        await writer.stop()
    return 0
