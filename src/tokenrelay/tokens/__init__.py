"""The core: what a token is, when it is exchanged, and how (aiohttp allowed).

``token`` (Token, TokenState, TokenSource), ``provider`` (the schedule, single flight, backoff
policy), ``backoff``, ``sts`` (the exchange on the wire), ``exchanger`` (read the OIDC token afresh,
then exchange), ``idsources`` (where the OIDC token comes from). Nothing here imports
``tokenrelay.options``, ``tokenrelay.sidecar`` or ``tokenrelay.proxy``.
"""
