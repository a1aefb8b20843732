"""The fault suite's harness: a real ``switchboard up`` per test, load whose every request
is classified against the built-in engine's predictable text, faults, and figures.

* :mod:`.stack`: start, find and stop the stack (``FaultStack``, ``fault_stack``);
* :mod:`.procfs`: roles by pid, memory, open files, accepted connections;
* :mod:`.expected`: the requests and the text each must end with;
* :mod:`.classify`: ok, clear error, wrong text, hung (pure);
* :mod:`.load`: streaming clients, closed or open loop; :mod:`.attribution`: which
  worker served a request;
* :mod:`.recovery`: when a restarted role is back; :mod:`.scenario`: SIGKILL under load;
* :mod:`.detok_paths`: which workers each detokenizer serves;
* :mod:`.fuzz` (pure), :mod:`.fuzz_targets`, :mod:`.fuzz_send`, :mod:`.metrics`: garbage
  for every bound socket, sent, and counted back from ``/metrics``;
* :mod:`.schema_fuzz`: schemathesis over an app's schema, every 5xx kept;
* :mod:`.engine_probe`, :mod:`.worker_status`: each party's pause state;
* :mod:`.figures`: what a test measured, printed and gathered; :mod:`.modes`: soak sizes.
"""
