"""Standard library only, cheap to import: what the credential helpers load.

The rule: a module here imports only the standard library, ``tokenrelay.errors`` and its siblings,
never ``typing`` (``TYPE_CHECKING = False`` instead of ``typing.TYPE_CHECKING``), ``dataclasses``,
``asyncio``, aiohttp or any third-party package; the modules on a helper's ``get`` path avoid
``json``, ``re``, ``enum``, ``socket`` and ``urllib`` too, since every docker pull and git fetch
pays for each import in start-up time. ``tests/core/test_import_budget.py`` holds the package to it
by running ``python -S -X importtime -c "import tokenrelay.lite.<module>"`` for every module. This
package imports none of its modules itself.
"""
