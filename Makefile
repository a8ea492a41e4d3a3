# The two entry points (see README): `make demo` runs the main job, `make test` runs every test.
# Both set up a fresh Debian machine first (apt-get, a project venv, the C build).
VENV   := .venv
PY     := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest

.PHONY: setup build demo test bench fuzz deb clean

setup:
	bash scripts/setup.sh

build: setup

demo: setup
	$(VENV)/bin/iez demo

test: setup
	$(PYTEST) -q -p no:cacheprovider tests

bench: setup
	$(PY) -m bench

# The fuzz targets of every parser that reads untrusted bytes, 100x longer than in `make test`.
fuzz: setup
	IEZ_FUZZ_SCALE=$${IEZ_FUZZ_SCALE:-100} $(PYTEST) -q -p no:cacheprovider -m fuzz tests

# The Debian package of the C half (libiez, iez-sim, iez-bench, deploy/ files) into build/deb/: docs/install.md.
deb: setup
	cpack -G DEB --config build/CPackConfig.cmake -B build/deb

clean:
	rm -rf build $(VENV) demo-out
