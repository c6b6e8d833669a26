"""h2's connection state machine without a cost a relay pays on every frame it receives.

h2 4.x formats every received frame with ``repr()`` for a trace log line, even when nothing logs
(its DummyLogger drops the line afterwards): a few percent of the proxy's CPU per gRPC call.
``_receive_frame`` below is h2's own (4.1 to 4.4), minus that line; the rest of h2 is untouched.
"""

from __future__ import annotations

from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import Event
from h2.exceptions import StreamClosedError, StreamIDTooLowError
from hyperframe.frame import Frame, RstStreamFrame


class RelayConnection(H2Connection):
    """An H2Connection that does not format the frames it receives."""

    def _receive_frame(self, frame: Frame) -> list[Event]:
        events: list[Event]
        try:
            frames, events = self._frame_dispatch_table[frame.__class__](frame)
        except StreamClosedError as e:
            # closed by RST_STREAM: a stream error, answered with RST_STREAM; else a connection error
            if self._stream_is_closed_by_reset(e.stream_id):
                f = RstStreamFrame(e.stream_id)
                f.error_code = e.error_code
                self._prepare_for_sending([f])
                events = e._events
            else:
                raise
        except StreamIDTooLowError as e:
            if self._stream_is_closed_by_reset(e.stream_id):
                f = RstStreamFrame(e.stream_id)
                f.error_code = ErrorCodes.STREAM_CLOSED
                self._prepare_for_sending([f])
                events = []
            elif self._stream_is_closed_by_end(e.stream_id):
                raise StreamClosedError(e.stream_id) from e
            else:
                raise
        else:
            self._prepare_for_sending(frames)
        return events
