"""Command line, benchmarks and (later) the supervisor."""
