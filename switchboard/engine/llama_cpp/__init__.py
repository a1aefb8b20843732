"""The llama.cpp engine backend: real models from GGUF files, batched continuously.

* :mod:`switchboard.text.llama_runtime` (shared with the GGUF tokenizer) loads
  llama-cpp-python's C API once per process and keeps llama.cpp's log out of stderr
  (its errors become the reasons of the calls that fail);
* :mod:`~.model_file` checks a model path and loads the model, failing with one line;
* :mod:`~.runtime` owns the model, its context (one KV cache shared by every sequence)
  and the decode batch;
* :mod:`~.sampling` builds each request's llama.cpp sampler chain and its logprobs;
* :mod:`~.planner` decides, without llama.cpp, what each step feeds the model;
* :mod:`~.scheduler` runs the steps: the engine loop of :mod:`switchboard.engine.engine`
  drives it exactly as it drives the simulated scheduler.

Everything here needs the ``llama`` extra (``pip install 'switchboard[llama]'``).
"""
