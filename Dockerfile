# tokenrelay: the sidecar image. A builder stage makes a virtualenv; the runtime copies only that.
#   docker build -t tokenrelay .
#   docker run --rm --read-only --tmpfs /var/run/tokenrelay:uid=65532,gid=65532 tokenrelay --help
# The runtime writes nothing outside mounted volumes (socket dir, --token-file dirs), so it runs with a
# read-only root filesystem. No HEALTHCHECK: Kubernetes probes /healthz and /readyz on --metrics-listen.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/tokenrelay
COPY pyproject.toml README.md ./
COPY src ./src
COPY scripts ./scripts
# Compile the bytecode here, once: the runtime's root filesystem is read-only.
RUN /opt/tokenrelay/bin/pip install --no-cache-dir . \
    && /opt/tokenrelay/bin/python -m compileall -q /opt/tokenrelay/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="tokenrelay" \
      org.opencontainers.image.description="Workload-identity token relay sidecar" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/tokenrelay/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/tokenrelay /opt/tokenrelay
# 65532 is the conventional "nonroot" id (distroless); numeric so that runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["tokenrelay", "run"]
