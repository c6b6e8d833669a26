"""session.Session judged against h2's H2Connection: the same frames, from a client, to both in the
server role after a proper preface and SETTINGS exchange; each frame's verdict (read, stream reset
with a code, connection error with a code) must agree, but for the differences listed in
``INTENDED`` (where RFC 9113 lets either be right, or where h2 falls short of it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.exceptions import ProtocolError
from h2.utilities import HeaderValidationFlags
from hpack.hpack import Encoder
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from tokenrelay.proxy.http2 import frames as f
from tokenrelay.proxy.http2.headercoding import REQUEST_FLAGS, TRAILER_FLAGS, BlockMemo, ValidationMemo
from tokenrelay.proxy.http2.session import Session, SessionError
from tokenrelay.proxy.http2.states import STATE_NAMES

Headers = list[tuple[bytes, bytes]]
Verdict = tuple[str, int]  # ("read", 0), ("reset", code), ("connection", code)

READ: Verdict = ("read", 0)
SIDS = st.sampled_from([1, 1, 3, 3, 5, 2, 2**31 - 1])
REQUEST = [(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"a"), (b":path", b"/")]
TRAILERS = [(b"grpc-status", b"0")]


class Quiet:
    """A Peer that checks headers as the front end does (downstream.H2Client, by h2's rules) and
    does nothing else the relay would (no reset, no answer)."""

    def __init__(self) -> None:
        self.valid = ValidationMemo()

    def on_head(self, sid: int, headers: Headers, end: bool) -> None:
        self.check(headers, REQUEST_FLAGS)

    def on_trailers(self, sid: int, headers: Headers) -> None:
        self.check(headers, TRAILER_FLAGS)

    def check(self, headers: Headers, flags: HeaderValidationFlags) -> None:
        try:
            self.valid.check(headers, flags)
        except ProtocolError:
            raise SessionError(f.PROTOCOL_ERROR, "malformed headers") from None

    def on_data(self, sid: int, data: bytes, flow: int, end: bool) -> None: ...

    def on_reset(self, sid: int, code: int) -> None: ...

    def on_malformed(self, sid: int, why: str) -> None:
        raise SessionError(f.PROTOCOL_ERROR, why)  # as the front end: a client's is the connection's

    def on_window(self, sid: int) -> None: ...

    def on_goaway(self, last_sid: int, code: int) -> None: ...


def resets(out: bytes) -> list[tuple[int, int]]:
    """The RST_STREAMs in ``out`` (whole frames), as (stream, code)."""
    found = []
    while len(out) >= 9:
        word, _flags, sid = f.HEADER.unpack_from(out)
        length, kind = word >> 8, word & 0xFF
        if kind == f.RST_STREAM:
            found.append((sid, f.u32(out, 9)))
        out = out[9 + length :]
    return found


STREAM_CLOSED, PROTOCOL_ERROR = ("reset", f.STREAM_CLOSED), ("reset", f.PROTOCOL_ERROR)
CLOSED_CONNECTION, PROTOCOL_CONNECTION = ("connection", f.STREAM_CLOSED), ("connection", f.PROTOCOL_ERROR)

# (the frame, the stream's state as the session has it, states.py) -> (our verdict, h2's): where
# they differ on purpose
INTENDED: dict[tuple[str, str], tuple[Verdict, Verdict]] = {
    # §5.1: frames the peer sent before it learnt of our RST_STREAM MUST be ignored; h2 resets again
    ("DATA", "reset"): (READ, STREAM_CLOSED),
    ("HEADERS", "reset"): (READ, STREAM_CLOSED),
    ("trailers", "reset"): (READ, STREAM_CLOSED),
    # §5.1: after END_STREAM both ways, a connection error is allowed (the session keeps no closed
    # stream to reset); h2 resets the stream
    ("DATA", "closed"): (CLOSED_CONNECTION, STREAM_CLOSED),
    # both end the connection: h2 names a lower id never used PROTOCOL_ERROR (§5.1.1), the session
    # keeps no record of which lower ids a client skipped, and says STREAM_CLOSED
    ("HEADERS", "closed"): (CLOSED_CONNECTION, PROTOCOL_CONNECTION),
    ("trailers", "closed"): (CLOSED_CONNECTION, PROTOCOL_CONNECTION),
    # §6.4: RST_STREAM on an idle stream MUST be a connection error; h2 reads it
    ("RST_STREAM", "idle"): (PROTOCOL_CONNECTION, READ),
    ("RST_STREAM", "unopened"): (PROTOCOL_CONNECTION, READ),
    # §6.9: a WINDOW_UPDATE of 0 on a stream is a stream error; h2 ends the connection
    ("WINDOW_UPDATE of 0", "open"): (PROTOCOL_ERROR, PROTOCOL_CONNECTION),
    ("WINDOW_UPDATE of 0", "ended"): (PROTOCOL_ERROR, PROTOCOL_CONNECTION),
    # §5.1, §6.9: a WINDOW_UPDATE on a closed stream is ignored, whatever its increment; h2 refuses 0
    ("WINDOW_UPDATE of 0", "reset"): (READ, PROTOCOL_CONNECTION),
    ("WINDOW_UPDATE of 0", "cancelled"): (READ, PROTOCOL_CONNECTION),
    ("WINDOW_UPDATE of 0", "closed"): (READ, PROTOCOL_CONNECTION),
}


class Differential(RuleBasedStateMachine):
    """A client's frames to both servers, one at a time, and each one's verdict compared."""

    def __init__(self) -> None:
        super().__init__()
        self.session = Session(
            Quiet(),
            client=False,
            settings={f.MAX_CONCURRENT_STREAMS: 100, f.MAX_HEADER_LIST_SIZE: 65536},
            decoder=BlockMemo(),
            max_block=65536,
        )
        self.h2 = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.encoder = Encoder()
        self.over = False
        self.last: tuple[str, str, Verdict] = ("", "", READ)
        self.log: list[str] = []

    @initialize()
    def start(self) -> None:
        self.h2.initiate_connection()
        self.h2.data_to_send()
        self.session.take()
        self.send("preface", 0, f.PREFACE + f.settings({}) + f.frame(f.SETTINGS, f.ACK, 0))

    def send(self, what: str, sid: int, data: bytes) -> None:
        """``data`` to both, and their verdicts compared; ``what``: the frame, as INTENDED names it."""
        if self.over:  # the connection ended (at either): nothing more to compare
            return
        state = STATE_NAMES[self.session._state(sid)] if sid else "connection"
        ours = self.verdict_of(lambda: self.session.feed(data), self.session.take)
        theirs = self.verdict_of(lambda: self.h2.receive_data(data), self.h2.data_to_send)
        self.log.append(f"{what} on {sid} ({state}): ours {ours}, h2's {theirs}")
        self.last = (what, state, ours)
        if ours != theirs:
            assert INTENDED.get((what, state)) == (ours, theirs), "\n".join(self.log)
        if ours[0] == "connection" or theirs[0] == "connection":
            self.over = True

    @staticmethod
    def verdict_of(read: Callable[[], object], take: Callable[[], bytes]) -> Verdict:
        try:
            read()
        except SessionError as exc:
            return ("connection", exc.code)
        except ProtocolError as exc:
            return ("connection", int(getattr(exc, "error_code", ErrorCodes.PROTOCOL_ERROR)))
        reset = resets(take())
        if reset:
            return ("reset", reset[0][1])
        return READ

    def block(self, headers: Headers) -> bytes:
        return bytes(self.encoder.encode(headers))

    # -- the client's frames -------------------------------------------------------------------------

    @rule(sid=SIDS, end=st.booleans(), split=st.booleans())
    def headers(self, sid: int, end: bool, split: bool) -> None:
        block = self.block(REQUEST)
        flags = f.END_STREAM if end else 0
        if split:
            data = f.frame(f.HEADERS, flags, sid, block[:3]) + f.frame(
                f.CONTINUATION, f.END_HEADERS, sid, block[3:]
            )
        else:
            data = f.frame(f.HEADERS, flags | f.END_HEADERS, sid, block)
        self.send("HEADERS", sid, data)

    @rule(sid=SIDS, end=st.booleans())
    def trailers(self, sid: int, end: bool) -> None:
        flags = f.END_HEADERS | (f.END_STREAM if end else 0)
        self.send("trailers", sid, f.frame(f.HEADERS, flags, sid, self.block(TRAILERS)))

    @rule(sid=SIDS, size=st.sampled_from([0, 1, 16384]), end=st.booleans())
    def data(self, sid: int, size: int, end: bool) -> None:
        self.send("DATA", sid, f.frame(f.DATA, f.END_STREAM if end else 0, sid, bytes(size)))

    @rule(sid=SIDS, code=st.sampled_from([f.NO_ERROR, f.CANCEL]))
    def rst_stream(self, sid: int, code: int) -> None:
        self.send("RST_STREAM", sid, f.rst_stream(sid, code))

    @rule(sid=st.one_of(st.just(0), SIDS), increment=st.sampled_from([0, 1, 2**31 - 1]))
    def window_update(self, sid: int, increment: int) -> None:
        self.send(
            "WINDOW_UPDATE of 0" if not increment else "WINDOW_UPDATE", sid, f.window_update(sid, increment)
        )

    @rule(sid=SIDS, on=st.sampled_from([0, 1, 3]))
    def priority(self, sid: int, on: int) -> None:
        self.send(f"PRIORITY on {on}", sid, f.frame(f.PRIORITY, 0, sid, on.to_bytes(4, "big") + b"\x10"))

    @rule()
    def ping(self) -> None:
        self.send("PING", 0, f.frame(f.PING, 0, 0, bytes(8)))

    # -- the server's own moves, made on both ----------------------------------------------------------

    @rule(sid=SIDS)
    def answer(self, sid: int) -> None:
        """Both end their side of ``sid`` with an answer, if it is open for them to send on."""
        if self.over or sid not in self.session.streams or self.session.streams[sid].local_closed:
            return
        self.session.send_headers(sid, [(b":status", b"200")], True)
        self.h2.send_headers(sid, [(b":status", b"200")], end_stream=True)
        self.session.take()
        self.h2.data_to_send()
        self.log.append(f"answered {sid}")

    @rule(sid=SIDS)
    def reset(self, sid: int) -> None:
        """Both reset ``sid``, if it is open."""
        if self.over or sid not in self.session.streams:
            return
        self.session.reset(sid, f.CANCEL)
        self.h2.reset_stream(sid, f.CANCEL)
        self.session.take()
        self.h2.data_to_send()
        self.log.append(f"reset {sid}")


Differential.TestCase.settings = settings(max_examples=400, stateful_step_count=30, deadline=None)
test_session_and_h2_agree_on_every_frame = Differential.TestCase


STATES: dict[str, Callable[[Differential], object]] = {
    "idle": lambda m: None,
    "open": lambda m: m.headers(1, end=False, split=False),
    "ended": lambda m: m.headers(1, end=True, split=False),
    "reset": lambda m: (m.headers(1, end=False, split=False), m.reset(1)),
    "cancelled": lambda m: (m.headers(1, end=False, split=False), m.rst_stream(1, f.CANCEL)),
    "closed": lambda m: (m.headers(1, end=True, split=True), m.answer(1)),
    "skipped": lambda m: m.headers(3, end=False, split=False),  # 1 closed by the use of 3 (§5.1.1)
}
FRAMES: dict[str, Callable[[Differential, int], None]] = {
    "HEADERS": lambda m, sid: m.headers(sid, end=False, split=False),
    "trailers": lambda m, sid: m.trailers(sid, end=True),
    "trailers without END_STREAM": lambda m, sid: m.trailers(sid, end=False),
    "empty DATA": lambda m, sid: m.data(sid, 0, end=False),
    "DATA ending the stream": lambda m, sid: m.data(sid, 1, end=True),
    "RST_STREAM": lambda m, sid: m.rst_stream(sid, f.CANCEL),
    "WINDOW_UPDATE of 0": lambda m, sid: m.window_update(sid, 0),
    "WINDOW_UPDATE": lambda m, sid: m.window_update(sid, 1),
    "PRIORITY": lambda m, sid: m.priority(sid, 0),
}


@pytest.mark.parametrize("frame", FRAMES)
@pytest.mark.parametrize("state", [*STATES, "unopened"])
def test_session_and_h2_agree_on_each_frame_in_each_state(state: str, frame: str) -> None:
    """Every frame a client may send on a stream, in every state the stream may be in: the session's
    verdict is h2's, but for the differences INTENDED lists, where it is the one listed."""
    machine = Differential()
    machine.start()
    sid = 2 if state == "unopened" else 1
    STATES.get(state, STATES["idle"])(machine)
    FRAMES[frame](machine, sid)
    what, session_state, ours = machine.last
    if (what, session_state) in INTENDED:
        assert ours == INTENDED[what, session_state][0], "\n".join(machine.log)
