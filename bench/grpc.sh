#!/bin/sh
# h2load gRPC unary calls: direct, through nginx's grpc_pass, through tokenrelay's proxy; see grpc_bench.py.
# Usage: bench/grpc.sh [--runs 3] [--duration 5] [--clients 1] [--streams 32] [--rate 1000] [--cpu-calls 10000]
here=$(dirname "$0")
python=${PYTHON:-python3}
[ -x "$here/../.venv/bin/python" ] && [ -z "$PYTHON" ] && python="$here/../.venv/bin/python"
exec "$python" "$here/grpc_bench.py" "$@"
