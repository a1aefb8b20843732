"""The supervisor: ``switchboard up`` starts, watches and stops every process of a stack.

One concept per module: ``settings`` (flags, ``SWITCHBOARD_*`` variables, a TOML file),
``preflight`` (checks before anything starts), ``layout`` (which children, with which
arguments), ``children`` (one child process), ``backoff`` (restart delays),
``readiness`` (probes and waiting), ``shutdown`` (drain and ordered stop), ``rundir``
(the socket directory), ``supervise`` (the loop tying them together) and ``cli``.
"""
