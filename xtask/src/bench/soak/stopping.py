"""The soak's loads end on SIGTERM or SIGINT (the soak's stop, or a Ctrl-C): each polls
`stop.is_set()` between its steps, and writes its figures after."""
import signal
import threading

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())
