"""Credential helpers for docker, skopeo, podman, git, pip and kubelet.

Each helper module is a pure ``handle(...) -> exit status`` plus a ``main()`` that wires the real
standard streams. The ``get`` paths import only the standard library: these run once per pull or
fetch, so their start-up time is the user's waiting time.
"""
