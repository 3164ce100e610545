# Front door for people and CI. `make test` installs what is missing, builds
# everything (including the clang-built fuzzers) and runs every test;
# `make demo` runs the main job on the bundled models, from import to a
# generated program training on two MPI ranks.
BUILD ?= build
FUZZ_BUILD ?= build/fuzz
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60

.PHONY: all setup build fuzz-build test demo fuzz bench docs format clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt | setup
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) \
	  -DONNX2SOAP_FUZZER=$(abspath $(FUZZ_BUILD))/bin/importer_fuzz \
	  -DONNX2SOAP_FUZZ_SECONDS=$(FUZZ_SECONDS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD)

fuzz-build: setup
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DONNX2SOAP_FUZZ=ON \
	  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD)

test: fuzz-build build
	ctest --test-dir $(BUILD) --output-on-failure -j2

# A longer fuzzing session (FUZZ_SECONDS=3600 make fuzz): each fuzzer in
# turn (the importer, cluster, strategy and profile files) for FUZZ_SECONDS.
fuzz: fuzz-build
	for f in importer cluster strategy profile; do \
	  mkdir -p $(FUZZ_BUILD)/corpus-$$f && \
	  $(FUZZ_BUILD)/bin/$${f}_fuzz -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=10 -rss_limit_mb=2048 $(FUZZ_BUILD)/corpus-$$f \
	    tests/fuzz/$$f-corpus || exit 1; \
	done

demo: build
	@scripts/demo.sh $(BUILD)/bin/onnx2soap $(BUILD)

bench: build
	@bench/run.sh $(BUILD)
	@bench/train_run.sh $(BUILD)

docs: build
	$(BUILD)/bin/onnx2soap ops --markdown > docs/onnx-support.md

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
