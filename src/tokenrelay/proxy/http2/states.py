"""A stream's states as the frames the peer sends find it (RFC 9113 §5.1), and the one table that
judges each: in state S, a frame of type F is read, ignored, a stream error or a connection error,
with its code (h2's ``stream.py`` ``_transitions``, reduced to what a relay receives).

The session works out a stream's state from what it keeps (session.Session._state) and asks the
table (``TRANSITIONS``) before it reads any frame bound to a stream, the hot path excepted: DATA on
a stream open for the peer to send on is read without asking (the table says so too).
"""

from __future__ import annotations

from . import frames as f

# §5.1, from the receiving side. Half-closed (local) is OPEN here: the peer may still send on it.
IDLE = 0  # not opened yet, and the peer may open it (a client's odd ids, at a server)
UNOPENED = 1  # not opened yet, and the peer may not: our own ids, or pushed ones (push is disabled)
OPEN = 2  # open, or half-closed (local)
ENDED = 3  # half-closed (remote): the peer ended its side with END_STREAM
RESET = 4  # closed lately by our RST_STREAM: the peer's frames sent before it learnt of it still come
CANCELLED = 5  # closed lately by the peer's RST_STREAM
CLOSED = 6  # closed otherwise, or reset long ago

STATE_NAMES = ("idle", "unopened", "open", "ended", "reset", "cancelled", "closed")

# verdicts
READ = 0  # the frame is read
IGNORE = 1  # dropped (counted as a control frame: a flood of them is one)
STREAM_ERROR = 2  # §5.4.2: RST_STREAM with the code, the relay told as if the peer had reset it
CONNECTION_ERROR = 3  # §5.4.1: GOAWAY with the code

Verdict = tuple[int, int]  # (verdict, error code)

_READ: Verdict = (READ, 0)
_IGNORE: Verdict = (IGNORE, 0)
_NOT_OPENED: Verdict = (CONNECTION_ERROR, f.PROTOCOL_ERROR)  # §5.1: idle allows HEADERS, PRIORITY only
# §5.1, half-closed (remote): a stream error, the others on the connection unharmed (on the upstream
# side, every client's streams share it)
_AFTER_HALF: Verdict = (STREAM_ERROR, f.STREAM_CLOSED)
# §5.1, closed: a connection error is allowed once the stream closed on END_STREAM, and the proxy keeps
# no record of a closed stream to reset (nor of which lower ids a client skipped, §5.1.1)
_AFTER_END: Verdict = (CONNECTION_ERROR, f.STREAM_CLOSED)

TRANSITIONS: dict[tuple[int, int], Verdict] = {
    (f.DATA, IDLE): _NOT_OPENED,
    (f.DATA, UNOPENED): _NOT_OPENED,
    (f.DATA, OPEN): _READ,
    (f.DATA, ENDED): _AFTER_HALF,
    (f.DATA, RESET): _IGNORE,  # §5.1: sent before the peer learnt of the reset (its window given back)
    (f.DATA, CANCELLED): _AFTER_HALF,  # §5.1: after the peer's own RST_STREAM, a stream error
    (f.DATA, CLOSED): _AFTER_END,
    (f.HEADERS, IDLE): _READ,  # opens it
    (f.HEADERS, UNOPENED): _NOT_OPENED,
    (f.HEADERS, OPEN): _READ,  # the head, or trailers
    (f.HEADERS, ENDED): _AFTER_HALF,
    (f.HEADERS, RESET): _IGNORE,
    (f.HEADERS, CANCELLED): _AFTER_HALF,
    (f.HEADERS, CLOSED): _AFTER_END,
    (f.RST_STREAM, IDLE): _NOT_OPENED,
    (f.RST_STREAM, UNOPENED): _NOT_OPENED,
    (f.RST_STREAM, OPEN): _READ,
    (f.RST_STREAM, ENDED): _READ,
    (f.RST_STREAM, RESET): _IGNORE,  # both ends reset it at once
    (f.RST_STREAM, CANCELLED): _IGNORE,  # answering a reset with a reset would loop
    (f.RST_STREAM, CLOSED): _IGNORE,  # §5.1: may arrive after the stream closed
    (f.WINDOW_UPDATE, IDLE): _NOT_OPENED,
    (f.WINDOW_UPDATE, UNOPENED): _NOT_OPENED,
    (f.WINDOW_UPDATE, OPEN): _READ,
    (f.WINDOW_UPDATE, ENDED): _READ,  # §5.1: our side may still send
    (f.WINDOW_UPDATE, RESET): _IGNORE,
    (f.WINDOW_UPDATE, CANCELLED): _IGNORE,  # §6.9: may cross the reset (h2 ignores it too)
    (f.WINDOW_UPDATE, CLOSED): _IGNORE,  # §6.9: may arrive after the stream closed
    # §5.3.2, §6.3: PRIORITY is allowed in every state; the proxy reads only its length and its
    # dependency (a stream depending on itself is an error whatever its state)
    **{(f.PRIORITY, state): _READ for state in range(len(STATE_NAMES))},
}

KIND_NAMES = {
    f.DATA: "DATA",
    f.HEADERS: "HEADERS",
    f.PRIORITY: "PRIORITY",
    f.RST_STREAM: "RST_STREAM",
    f.WINDOW_UPDATE: "WINDOW_UPDATE",
}


class StreamState:
    """What the session keeps of an open (or half-closed) stream."""

    __slots__ = (
        "bodiless",
        "expected",
        "granted",
        "head",
        "local_closed",
        "received",
        "recv_window",
        "remote_closed",
        "send_window",
        "unacked",
    )

    def __init__(self, send_window: int, recv_window: int) -> None:
        self.send_window = send_window  # what we may still send on it
        self.recv_window = recv_window  # what the peer may still send on it
        self.granted = recv_window  # all the window ever granted on it: less recv_window, what came
        self.unacked = 0  # bytes passed on, not yet given back to the peer
        self.local_closed = False
        self.remote_closed = False
        self.head = False  # the peer's first header block came (later blocks are trailers)
        self.expected: int | None = None  # the peer's content-length
        self.bodiless = False  # an answer to HEAD: its content-length is the resource's, not the body's
        self.received = 0  # DATA bytes the peer sent
