# tokenrelay: the sidecar image. A builder stage makes a virtualenv; the runtime copies only that.
#   docker build -t tokenrelay .
#   docker run --rm --read-only --tmpfs /var/run/tokenrelay:uid=65532,gid=65532 tokenrelay --help
# With extras (the aws and spiffe OIDC sources need theirs): --build-arg EXTRAS=aws,spiffe
# Offline (no package index reachable from the build): put every wheel in ./wheelhouse first,
#   pip wheel --wheel-dir wheelhouse . 'setuptools>=77,<85'
#   docker build --network none --build-arg PIP_NO_INDEX=1 -t tokenrelay .
# The runtime writes nothing outside mounted volumes (socket dir, --token-file dirs), so it runs with a
# read-only root filesystem. No HEALTHCHECK: Kubernetes probes /healthz and /readyz on --metrics-listen.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm
# The builder: the same Python as PYTHON_IMAGE, with binutils to strip the extension modules' debug
# symbols (about 25 MB of uvloop, cryptography, aiohttp and PyYAML): the full image of the slim one's
# Python. Change both together; a builder without `strip` leaves the symbols in, and says so.
ARG BUILDER_IMAGE=python:3.12-bookworm

FROM ${BUILDER_IMAGE} AS builder
# PIP_NO_INDEX=1 builds from ./wheelhouse alone; pip takes wheels from it in any case.
ARG PIP_NO_INDEX=0
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_FIND_LINKS=/src/wheelhouse \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The build context is what .dockerignore lets through: pyproject.toml, README.md, src/, scripts/ and
# a ./wheelhouse when there is one.
COPY . ./
RUN python -m venv /opt/tokenrelay && /opt/tokenrelay/bin/pip install --no-cache-dir .
# The extras to install as well, comma-separated: aws (--id-token-source aws: botocore), spiffe
# (--id-token-source spiffe: grpcio), keyring. The image has no pip to add one later: a source that
# needs one says to build again with it. Declared here, after the base install, so that images with
# other extras share that layer.
ARG EXTRAS=""
# The image runs the sidecar, the agent and the webhook, never the emulator: its gRPC stack (grpcio and
# the protobuf packages, about 23 MB) is uninstalled again but for what EXTRAS needs (spiffe keeps
# grpcio and protobuf), and so are pip and setuptools (another 20 MB), which nothing runs at runtime.
# They stay ordinary dependencies so that `pip install .` alone gives a working `tokenrelay dev`; in
# this image `tokenrelay dev` says what is missing. `tokenrelay.imagebuild` checks EXTRAS (a misspelt
# extra is a build error naming it), records it, and lists them.
# The bytecode is compiled here, once: the runtime's root filesystem is read-only.
RUN if [ -n "$EXTRAS" ]; then /opt/tokenrelay/bin/pip install --no-cache-dir ".[$EXTRAS]"; fi \
    && /opt/tokenrelay/bin/python -m tokenrelay.imagebuild "$EXTRAS" >/tmp/left-out.txt \
    && /opt/tokenrelay/bin/pip uninstall --yes --quiet --requirement /tmp/left-out.txt \
    && if command -v strip >/dev/null; then \
        find /opt/tokenrelay \( -name '*.so' -o -name '*.so.*' \) -type f -exec strip --strip-unneeded {} +; \
    else \
        echo "note: BUILDER_IMAGE has no strip (binutils): the image keeps about 25 MB of debug symbols" >&2; \
    fi \
    && python -m compileall -q /opt/tokenrelay/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="tokenrelay" \
      org.opencontainers.image.description="Workload-identity token relay sidecar" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/tokenrelay/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/tokenrelay /opt/tokenrelay
# The virtualenv runs on this stage's Python: one of another version than the builder's is a build
# error here, not a container that cannot start.
RUN tokenrelay --version >/dev/null || { echo "error: BUILDER_IMAGE and PYTHON_IMAGE must carry the same \
Python (the builder's virtualenv does not run here): pass --build-arg BUILDER_IMAGE with the full image of \
PYTHON_IMAGE's Python" >&2; exit 1; }
# The extras' packages import here too (grpcio needs libstdc++, which a minimal base may lack).
RUN python -m tokenrelay.imagebuild --imports
# 65532 is the conventional "nonroot" id (distroless); numeric so that runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["tokenrelay", "run"]
