# The two entry points (see README): `make demo` runs the main job, `make test` runs every test.
# Both set up a fresh Debian machine first (apt-get, a project venv, the C build).
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest

.PHONY: setup build demo test bench clean

setup:
	bash scripts/setup.sh

build: setup

demo: setup
	$(VENV)/bin/iez demo

test: setup
	$(PYTEST) -q -p no:cacheprovider tests

bench: setup
	$(PY) -m bench

clean:
	rm -rf build $(VENV) demo-out
