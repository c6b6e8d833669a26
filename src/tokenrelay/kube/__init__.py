"""Kubernetes injection: the pod mutation (``mutation``), its offline front end ``tokenrelay inject``
(``inject``) and the admission webhook ``tokenrelay webhook`` (``webhook``, with ``certs`` for its
serving certificate). The mutation works on plain dicts and needs only the standard library; the
webhook's Kubernetes client and ``inject``'s YAML parser are imported only by the commands that use them.
"""
