"""switchboard engine-check: a conformance check of an engine against docs/protocol.md."""
