# Switchboard: `make run` starts the stack, `make test` runs everything CI runs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := router_core httpkit app switchboard tests examples dashboards

#: Debian packages the tests drive for real (installed when running as root); each
#: package's name is also the command that shows it is installed.
SYSTEM_PACKAGES := chromium prometheus podman mmdebstrap catatonit
#: Debian packages whose command is named otherwise or that install none, each as
#: package=file-that-shows-it (the C engine example's libzmq headers; ip(8), for the
#: multi-host test's network namespaces; what podman needs to run containers here:
#: docs/deploy.md).
SYSTEM_FILES := libzmq3-dev=/usr/include/zmq.h iproute2=/usr/sbin/ip runc=/usr/sbin/runc \
	iptables=/usr/sbin/iptables netavark=/usr/lib/podman/netavark \
	aardvark-dns=/usr/lib/podman/aardvark-dns
#: The dashboards' offline type check (typescript + @grafana/schema, pinned by the lock).
NODE_MODULES := dashboards/typecheck/node_modules/.package-lock.json

#: The llama.cpp engine's binding (the `llama` extra). PyPI has only its source
#: distribution, which takes 3.5-5 minutes to build on 2 cores: the sdist and the wheel
#: built from it are kept in a cache outside the checkout (the machine keeps it), so only
#: the first `make test` on a machine builds it. The tests read the llama.cpp vocabulary
#: files and tokenizer test vectors out of the same sdist.
LLAMA_CPP_VERSION := 0.3.36
SWITCHBOARD_CACHE ?= $(HOME)/.cache/switchboard
LLAMA_SDIST := $(SWITCHBOARD_CACHE)/sdist/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz
LLAMA_WHEELS := $(SWITCHBOARD_CACHE)/wheels
LLAMA_STAMP := $(VENV)/.llama-installed

.PHONY: venv llama system-deps node-deps lint typecheck test soak run bench image clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The `llama` extra, installed from the cached wheel (built once from the cached sdist).
llama: $(LLAMA_STAMP)

$(LLAMA_SDIST):
	mkdir -p $(dir $@)
	$(PYTHON) -m pip download --quiet --no-deps --no-binary :all: \
		--dest $(dir $@) llama-cpp-python==$(LLAMA_CPP_VERSION)

$(LLAMA_STAMP): $(STAMP) $(LLAMA_SDIST)
	@mkdir -p $(LLAMA_WHEELS)
	@if ! ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_CPP_VERSION) once (3-5 minutes; cached in $(LLAMA_WHEELS))"; \
		CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip wheel --quiet --no-deps \
			--wheel-dir $(LLAMA_WHEELS) $(LLAMA_SDIST) || exit 1; \
	fi
	$(BIN)/python -m pip install --quiet --find-links $(LLAMA_WHEELS) -e '.[test,llama]'
	touch $@

# As root (CI, a fresh container) install what is missing; otherwise say what the browser
# and C engine tests need and go on (they skip locally, and fail under CI=true).
system-deps:
	@missing=""; for pkg in $(SYSTEM_PACKAGES); do \
		command -v $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	for entry in $(SYSTEM_FILES); do \
		test -f $${entry#*=} || missing="$$missing $${entry%%=*}"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing >/dev/null; \
	else echo "not installed (needs root to apt-get):$$missing"; fi

# npm is part of the machine image; without it the type-check test fails under CI=true.
node-deps: $(NODE_MODULES)

$(NODE_MODULES): dashboards/typecheck/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix dashboards/typecheck --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the dashboard type check cannot run"; fi

lint: venv
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: venv llama
	$(BIN)/mypy router_core httpkit app switchboard examples dashboards

# The 30 slowest tests are listed at the end: the suite must stay within ~25 minutes.
test: system-deps node-deps llama lint typecheck
	LLAMA_CPP_SDIST=$(LLAMA_SDIST) $(BIN)/python -m pytest --durations=30 $(PYTEST_ARGS)

# The fault suite's long variants (docs/reliability.md): a 30-minute soak at half the
# measured peak, and more requests, frames and operations in every other fault test.
soak: venv llama
	LLAMA_CPP_SDIST=$(LLAMA_SDIST) SWITCHBOARD_SOAK=1 $(BIN)/python -m pytest tests/fault -m fault $(PYTEST_ARGS)

run: venv
	$(BIN)/switchboard up $(RUN_ARGS)

bench: venv
	$(BIN)/switchboard bench router $(BENCH_ARGS)

# The container image, localhost/switchboard:latest (podman; docs/deploy.md section 2).
image: venv
	PYTHON=$(BIN)/python deploy/container/build-image.sh $(IMAGE)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis dashboards/typecheck/node_modules
