"""The resource kinds: their records, the JSON derived from them, the store and each kind's rules.

``kinds`` declares every kind (its record and, from it, its JSON) and ``RECORDS``, the one list of
them; ``store`` keeps them; ``resources`` is what every rules module works with; ``access`` the
built-in roles and the permission check; ``patching`` the PATCH rules they share. Then one rules
module per kind, named as the kind's table: ``groups``, ``identities``, ``roles``,
``role_bindings``, ``identity_providers``, ``account_associations``, ``group_invites``, ``repos``,
``advisories`` (the last two are served under ``/registry/`` and ``/vulnerabilities/``, but live in
the same store, the same groups and the same permissions).

The records sit below the store and the rules above it, so they are one module and the rules one
module a kind: a rule reads other kinds (a group's delete guard reads every kind, a role's delete
the bindings and invites naming it), which a record in the same module as its rules would turn into
import circles through the store.
"""
