"""``tokenrelay doctor``: check the set-up where the user is, and say how to fix what is wrong.

One module per group of checks, run in this order by ``cli``: ``settings`` (the same flags,
environment and --config as ``tokenrelay run``), ``oidc`` (the platform's token), ``service`` (the
token service, and one real exchange per audience), ``sidecar`` (a running sidecar's socket and
tokens), ``clients`` (``TOKENRELAY_HOSTS``; ``registries``, ``gitconfig`` and ``pipkeyring`` for how
docker, podman, git, pip and uv will really reach the helpers). ``report`` prints the findings and
documents the ``--json`` schema. Nothing here prints a token: fingerprints and claims only.
"""
