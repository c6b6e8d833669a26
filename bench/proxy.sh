#!/bin/sh
# wrk against nginx's page directly, nginx as a reverse proxy, and tokenrelay's proxy; see proxy_bench.py.
# Usage: bench/proxy.sh [--runs 3] [--duration 5] [--variants default,asyncio,no-token-cache,no-pool,aiohttp] [--tls]
here=$(dirname "$0")
python=${PYTHON:-python3}
[ -x "$here/../.venv/bin/python" ] && [ -z "$PYTHON" ] && python="$here/../.venv/bin/python"
exec "$python" "$here/proxy_bench.py" "$@"
