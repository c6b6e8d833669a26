"""The token service: the platform OIDC issuer, the verification of OIDC tokens and the exchange.

``issuer`` holds the signing keys and the issuer the emulator plays; ``oidc`` verifies a platform
token by its issuer's discovery and JWKS; ``exchange`` trades a verified token for an API token
(``/sts/exchange``). AWS's own STS, played for the aws source, is a platform: ``platforms/aws.py``.
"""
