"""The emulator's API over gRPC, on the same port as its HTTP API.

The gRPC services (``iam.proto``, ``registry.proto`` beside this file) mirror the JSON API message for
message, and every call is transcoded onto that JSON API (``transcode``): the same store, the same
access rules and the same errors serve both protocols, and an operation added to the HTTP API needs
only its messages and a line in ``routes`` to be reachable over gRPC. ``listener`` tells the two
protocols apart on the emulator's one port by the HTTP/2 client preface.

grpcio is loaded only here, when an emulator starts: nothing of ``tokenrelay run`` imports it.
"""
