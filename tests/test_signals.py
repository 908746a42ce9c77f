"""SIGTERM and SIGINT stop a gateway or a cell whenever they arrive (``stop_on_signals``, which
both use): also two at once, as Ctrl-C on ``make run`` delivers them (the terminal's and make's)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.gateway_helpers import ROOT

# The signals arrive while the main thread holds the stop event's lock, as it does inside
# ``Event.wait`` and ``Event.set``: a handler that set the event there would wait for that lock
# forever, and the process would never stop.
WHILE_HOLDING_THE_EVENTS_LOCK = textwrap.dedent("""
    import os, signal, sys, threading
    from matching.config import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    with stop._cond:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # bytecodes: Python runs the handlers here, on this thread
            pass
    sys.exit(0 if stop.wait(10) else 3)
""")


def test_two_signals_while_the_main_thread_holds_the_stop_events_lock_still_stop_the_process() -> None:
    try:
        done = subprocess.run([sys.executable, "-c", WHILE_HOLDING_THE_EVENTS_LOCK], cwd=ROOT, timeout=30,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        raise AssertionError("the process hung: a signal's handler waited for the stop event's lock") from None
    assert done.returncode == 0, done.stderr


def test_a_signal_sets_the_stop_event_and_other_signals_do_not() -> None:
    code = textwrap.dedent("""
        import os, signal, sys, threading
        from matching.config import stop_on_signals

        stop = threading.Event()
        stop_on_signals(stop)
        signal.signal(signal.SIGUSR1, lambda *_: None)  # another caught signal: its number reaches the pipe too
        os.kill(os.getpid(), signal.SIGUSR1)
        if stop.wait(1):
            sys.exit(4)
        threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGTERM)).start()
        sys.exit(0 if stop.wait(10) else 3)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=30, capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr)
