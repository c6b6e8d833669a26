"""The upstream's deadline for one request (proxy/deadline.py), as the sweep judges it."""

from __future__ import annotations

from tokenrelay.proxy.deadline import AWAITING_HEAD, Deadline


def test_the_head_is_due_within_the_timeout_of_the_request_sent_whatever_the_sweeps_see() -> None:
    """While the answer's head is due the clock runs from the request's sending, not from a sweep."""
    deadline = Deadline()
    deadline.start(100.0)
    assert not deadline.overdue(AWAITING_HEAD, 159.0, 60.0)
    assert deadline.overdue(AWAITING_HEAD, 160.5, 60.0)


def test_mid_answer_every_bit_of_progress_gives_the_upstream_a_new_timeout() -> None:
    """Once the answer flows, the upstream is overdue only after a whole timeout without progress."""
    deadline = Deadline()
    deadline.start(0.0)
    assert not deadline.overdue(1, 50.0, 60.0)  # the head came: the clock restarts at this look
    assert not deadline.overdue(1, 109.0, 60.0)
    assert not deadline.overdue(2, 109.5, 60.0)  # a read: a new timeout from here
    assert not deadline.overdue(2, 169.0, 60.0)
    assert deadline.overdue(2, 170.0, 60.0)


def test_a_new_connection_counts_its_progress_afresh() -> None:
    """After a resend on a new connection, its first count is progress even if it equals the old one's."""
    deadline = Deadline()
    deadline.start(0.0)
    assert not deadline.overdue(0, 1.0, 60.0)
    deadline.recount()
    assert not deadline.overdue(0, 100.0, 60.0)  # overdue by the old connection's count; new count
    assert deadline.overdue(0, 161.0, 60.0)
