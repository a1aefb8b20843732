"""Helpers shared by the unit and the integration tests: bounded polling, bounded zmq
contexts, and the source tree's import graph the house rules read."""
