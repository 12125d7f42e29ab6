# chessjax: the two commands of the README contract, plus helpers.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WORK ?= runs/demo

.PHONY: venv test test-fast lint demo demo-lm reproduce-mini bench bench-device wheels clean engines browser slurm

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Python writes the bytecode of the modules it compiles (`__pycache__/`, git-ignored) during the
# tests even where PYTHONDONTWRITEBYTECODE is set, as in many containers (this project's machines
# included): otherwise each of the two hundred processes the tests start compiles the
# repository's modules from source again, and each pytest worker rewrites every test module.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

# Two pytest workers (one per core here), each test module on one worker so its module fixtures
# are built once; every test runs, slow ones included. The 15 slowest are listed at the end.
test: lint engines browser slurm
	$(PYTEST) -q -n 2 --dist loadscope --durations=15 tests

# The quick tier, to run after every edit: the tests that need no training run, no second process
# and no browser, i.e. none of the tier markers (tests/conftest.py, TIERS). The 5 slowest are listed.
test-fast: lint
	$(PYTEST) -q -n 2 --dist loadscope --durations=5 \
	  -m "not (slow or multiprocess or browser or cluster)" tests

# A real headless browser for the tracking page's test (tests/browser.py): Debian's
# chromium-headless-shell, installed with apt-get as root (about a minute); others install it once.
BROWSER := chromium-headless-shell
browser:
	@set -eu; \
	if command -v $(BROWSER) >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "browser: $(BROWSER) missing; install the Debian package $(BROWSER) (as root)" >&2; \
	  exit 1; \
	fi; \
	echo "browser: installing Debian package $(BROWSER) (apt-get)"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q $(BROWSER) >/dev/null \
	  || { apt-get update -q >/dev/null && apt-get install -y -q $(BROWSER) >/dev/null; }; \
	echo "browser: $$($(BROWSER) --version 2>/dev/null || echo $(BROWSER))"

# A single-node SLURM for the cluster tests (tests/cluster, tests/slurm/local_slurm.sh): Debian's
# slurmctld, slurmd, slurm-client and munge, installed with apt-get as root; the tests start and
# stop their own daemons. Others install them once (or the cluster tests skip, naming what lacks).
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
slurm:
	@set -eu; PATH="$$PATH:/usr/sbin:/sbin"; \
	if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
	  && command -v sbatch >/dev/null && command -v munged >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "slurm: SLURM missing; install the Debian packages $(SLURM_PACKAGES) (as root)" >&2; \
	  exit 0; \
	fi; \
	echo "slurm: installing Debian packages $(SLURM_PACKAGES) (apt-get)"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q $(SLURM_PACKAGES) >/dev/null \
	  || { apt-get update -q >/dev/null && apt-get install -y -q $(SLURM_PACKAGES) >/dev/null; }; \
	echo "slurm: $$(slurmctld -V)"

# Chess engines for the atomic evaluation track (Co & Konuganti, 2026), into the git-ignored engines/:
# engines/stockfish, a link to Debian's Stockfish (standard rules), and engines/fairy-stockfish,
# compiled from the pinned pyffish source distribution (atomic rules; GPL, never committed).
ENGINES := engines
FAIRY := $(ENGINES)/fairy-stockfish
STOCKFISH := $(ENGINES)/stockfish
PYFFISH_VERSION := 0.0.90
PYFFISH_SHA256 := 4a79601d85f392bce03705a275fb5f03dc44a554b26d32d518fb6887d772f701
PYFFISH_SDIST := $(ENGINES)/pyffish-$(PYFFISH_VERSION).tar.gz
FAIRY_CXXFLAGS := -std=c++17 -O2 -DNDEBUG -DALLVARS -DNNUE_EMBEDDING_OFF
ifeq ($(shell getconf LONG_BIT),64)
FAIRY_CXXFLAGS += -DIS_64BIT
endif
ifeq ($(shell uname -m),x86_64)
FAIRY_CXXFLAGS += -DUSE_POPCNT -msse4.1 -mpopcnt
endif

engines: $(STOCKFISH) $(FAIRY)

# A link is remade only when missing or dangling (make follows it), so reruns cost nothing.
$(STOCKFISH):
	@set -eu; mkdir -p $(ENGINES); \
	sf="$$(command -v stockfish || true)"; \
	if [ -z "$$sf" ] && [ -x /usr/games/stockfish ]; then sf=/usr/games/stockfish; fi; \
	if [ -z "$$sf" ] && [ "$$(id -u)" = 0 ]; then \
	  echo "engines: installing Debian package stockfish (apt-get)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q stockfish || { apt-get update -q && apt-get install -y -q stockfish; }; \
	  sf="$$(command -v stockfish || echo /usr/games/stockfish)"; \
	elif [ -z "$$sf" ]; then \
	  echo "engines: not root; unpacking Debian package stockfish into $(ENGINES)/"; \
	  tmp="$$(mktemp -d "$(ENGINES)/.stockfish.XXXXXX")"; \
	  trap 'rm -rf "$$tmp"' EXIT; trap 'exit 1' HUP INT TERM; \
	  (cd "$$tmp" && apt-get download stockfish); \
	  dpkg-deb -x "$$tmp"/stockfish_*.deb "$$tmp/root"; \
	  rm -rf $(ENGINES)/stockfish-deb; mv "$$tmp/root" $(ENGINES)/stockfish-deb; \
	  sf=stockfish-deb/usr/games/stockfish; \
	fi; \
	(cd $(ENGINES) && test -x "$$sf") \
	  || { echo "engines: no stockfish executable found or installed" >&2; exit 1; }; \
	ln -sfn "$$sf" $(STOCKFISH).tmp && mv -fT $(STOCKFISH).tmp $(STOCKFISH); \
	echo "engines: $(STOCKFISH) -> $$sf ($$(echo uci | $(STOCKFISH) | sed -n 's/^id name //p'))"

# Order-only on the venv: its pip (and the pip configuration's indexes) fetches the sdist.
$(PYFFISH_SDIST): | $(STAMP)
	@set -eu; mkdir -p $(ENGINES); \
	tmp="$$(mktemp -d "$(ENGINES)/.sdist.XXXXXX")"; \
	trap 'rm -rf "$$tmp"' EXIT; trap 'exit 1' HUP INT TERM; \
	echo "engines: downloading pyffish==$(PYFFISH_VERSION) source distribution"; \
	$(BIN)/python -m pip download -q --no-deps --no-binary :all: -d "$$tmp" \
	  pyffish==$(PYFFISH_VERSION); \
	echo "$(PYFFISH_SHA256)  $$tmp/pyffish-$(PYFFISH_VERSION).tar.gz" | sha256sum -c --quiet - \
	  || { echo "engines: sha256 mismatch for pyffish-$(PYFFISH_VERSION).tar.gz" >&2; exit 1; }; \
	mv -f "$$tmp/pyffish-$(PYFFISH_VERSION).tar.gz" $@

# Compiled in a temporary folder and moved into place only once it answers `uci`.
$(FAIRY): $(PYFFISH_SDIST)
	@set -eu; \
	tmp="$$(mktemp -d "$(abspath $(ENGINES))/.fairy.XXXXXX")"; \
	trap 'rm -rf "$$tmp"' EXIT; trap 'exit 1' HUP INT TERM; \
	tar -xzf $(PYFFISH_SDIST) -C "$$tmp"; \
	src="$$tmp/pyffish-$(PYFFISH_VERSION)/src"; \
	jobs="$$(nproc 2>/dev/null || echo 2)"; \
	echo "engines: compiling Fairy-Stockfish from pyffish $(PYFFISH_VERSION) ($$jobs jobs)"; \
	mkdir "$$tmp/obj"; \
	find "$$src" "$$src/syzygy" "$$src/nnue" "$$src/nnue/features" -maxdepth 1 -name '*.cpp' \
	  ! -name pyffish.cpp ! -name ffishjs.cpp -print0 \
	  | (cd "$$tmp/obj" && xargs -0 -n1 -P"$$jobs" g++ $(FAIRY_CXXFLAGS) -c); \
	g++ -O2 -pthread -o "$$tmp/fairy-stockfish" "$$tmp"/obj/*.o; \
	name="$$(echo uci | "$$tmp/fairy-stockfish" | sed -n 's/^id name //p')"; \
	case "$$name" in Fairy-Stockfish*) ;; \
	  *) echo "engines: built binary does not answer uci" >&2; exit 1;; esac; \
	mv -f "$$tmp/fairy-stockfish" $@; \
	echo "engines: $@ ($$name)"

demo: $(STAMP)
	$(BIN)/python -m launch.demo_world_model --workdir $(WORK)

demo-lm: $(STAMP)
	$(BIN)/python -m launch.demo_lm --workdir runs/demo_lm

# The paper's pipeline at toy scale (stage 1, collect, stage 2, select, evaluate, report) on a CPU.
reproduce-mini: $(STAMP)
	$(BIN)/python -m launch.reproduce_mini --workdir runs/reproduce_mini

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_data_prep

# The accelerator check (docs/performance.md): under 8 minutes by its budget; tables and JSON in OUT.
# It ends by naming the parts it did not reach: a second run takes them, into its own folder, e.g.
# `make bench-device ONLY=unreached,unroll OUT=runs/bench_device_2`.
OUT ?= runs/bench_device
ONLY ?=
bench-device: $(STAMP)
	$(BIN)/python -m benchmarks.bench_device --out $(OUT) $(if $(ONLY),--only $(ONLY))

# Every wheel an offline machine needs, chessjax's own included, for its Python and platform:
# `make wheels PYVER=3.11 PLATFORM=manylinux2014_x86_64 DIR=wheels EXTRAS=cuda12`, then there
# `launch/gpu_host.sh setup --wheels DIR`. EXTRAS=cuda12 adds jax[cuda12] (CUDA and cuDNN wheels).
# PLATFORM is a list: pip takes each tag as is (manylinux2014 = glibc 2.17 misses jaxlib's 2.27).
PYVER ?= 3.11
PLATFORM ?= manylinux2014_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64
DIR ?= wheels
EXTRAS ?=
# Dependencies published only as a source distribution, all pure Python: built into wheels here.
SDIST_ONLY := "chess>=1.11.2,<1.12"
wheels: $(STAMP)
	$(BIN)/python -m pip wheel -q --no-deps -w $(DIR) . $(SDIST_ONLY)
	$(BIN)/python -m pip download -q -d $(DIR) --find-links $(DIR) --only-binary=:all: \
	  --python-version $(PYVER) $(foreach p,$(PLATFORM),--platform $(p)) \
	  "$$(ls $(DIR)/chessjax-*.whl | sort -V | tail -n 1)" $(if $(EXTRAS),"jax[$(EXTRAS)]")

clean:
	rm -rf $(VENV) runs build *.egg-info
