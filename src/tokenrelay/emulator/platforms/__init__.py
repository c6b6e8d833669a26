"""The platforms the emulator plays, one module per token source of ``tokens/idsources/``.

``registry`` is the table of them (``PLATFORMS``) and the endpoints they answer at; each platform's
module holds its claims and its endpoints: ``github``, ``gitlab``, ``buildkite``, ``circleci``,
``bitbucket``, ``azurepipelines``, ``gcp``, ``azure``, ``aws`` (with ``sigv4``, the signature AWS
checks), ``spiffe`` (the Workload API socket) and ``local`` (a kubelet-style rotating token file).
``commands`` stands in for the platforms' own token commands (``buildkite-agent``, ``circleci``).

Nothing is imported here: ``commands`` runs once per exchange and must not pay for aiohttp.
"""
