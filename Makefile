# hfp4 - FP4-weight GEMMs for NVIDIA Hopper (SM90).
#
#   make             libhfp4.so, libhfp4.a and the hfp4 command in build/
#   make test        every CPU test: the Python tests (skipped without numpy and pytest), then the C
#                    tests, whose closing line is "N passed, N failed, N skipped"
#   make pytest      the Python tests only (CPU)
#   make gpu-test    every GPU test, each in its own process (skipped with a message without nvcc
#                    or a Hopper GPU; GPU_TEST_ARGS="--filter NAME" picks tests)
#   make demo        the main job: DeepSeek-V4-shaped FP4 expert GEMMs, checked (and timed on a GPU)
#   make bench       hfp4 bench $(BENCH_ARGS) (needs a Hopper GPU)
#   make clean       removes build/
#
# Variables: BUILD=dir (default build), NVCC=path (nvcc is looked for on the PATH; without it the
# build is CPU-only), DIAG=1 (kernels that record a launch timeline; needs BUILD=build-diag or such).
# Sources are found by wildcard: a new src/<part>/<file>.c or .cu, tests/test_<name>.c or
# tests/gpu/test_<name>.cu is built without editing this file.

CC      ?= gcc
NVCC    ?= nvcc
BUILD   ?= build
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))

# Hopper only: wgmma and setmaxnreg need the arch-specific sm_90a target, and plain -arch=sm_90a
# also runs a compute_90 pass that rejects wgmma, hence the explicit -gencode form.
GENCODE ?= -gencode arch=compute_90a,code=sm_90a

# (-ffp-contract=off: a multiply and an add stay two roundings, whatever -std; src/moe/swiglu_math.h's
# CPU form must round where its kernel does)
CFLAGS_COMMON = -O2 -g -fPIC -fvisibility=hidden -ffp-contract=off -Iinclude -Isrc/core -Isrc/formats -Isrc/plan
CFLAGS  ?= -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter $(CFLAGS_COMMON)
# (a spill is an error, except in DIAG builds: their stamps cost registers, and the two-CTA K-split
# kernel, off by default, spills 4 bytes with them)
NV_WERROR = $(if $(filter 1,$(DIAG)),,--Werror all-warnings)
NVFLAGS ?= -std=c++17 -O3 -lineinfo $(GENCODE) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Werror \
           $(NV_WERROR) -Xptxas --warn-on-spills -Iinclude -Isrc/core -Isrc/formats -Isrc/plan -Isrc/kernels
# make DIAG=1 BUILD=build-diag: kernels that record a launch timeline (src/kernels/sm90/diag_timeline.cuh),
# printed by `HFP4_DIAG_TIMELINE=1 hfp4 bench ...`; for measuring only
NVFLAGS += $(if $(filter 1,$(DIAG)),-DHFP4_DIAG_TIMELINE,)
ifeq ($(DIAG),1)
ifeq ($(BUILD),build)
$(error make DIAG=1 needs a build folder of its own (its objects must never reach build/): add BUILD=build-diag)
endif
endif

LIB_C_SRC  := $(sort $(wildcard src/*/*.c))
HAVE_NVCC  := $(if $(shell command -v $(NVCC) 2>/dev/null),1,)
ifeq ($(HAVE_NVCC),1)
LIB_CU_SRC := $(sort $(wildcard src/*/*.cu src/kernels/*/*.cu))
LIB_C_SRC  := $(filter-out src/runtime/no_cuda.c,$(LIB_C_SRC))
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib -lcudart_static -lstdc++ -ldl -lrt
else
LIB_CU_SRC :=
CUDA_LIBS  :=
endif
LIB_OBJ := $(LIB_C_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
LIBS    := $(CUDA_LIBS) -lpthread -lm

TEST_SRC    := $(sort $(wildcard tests/test_*.c))
TEST_OBJ    := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/harness.o
GPUTEST_SRC := $(sort $(wildcard tests/gpu/test_*.cu))
TOOL_SRC    := $(filter-out $(if $(HAVE_NVCC),tools/no_cuda_tools.c,),$(sort $(wildcard tools/*.c)))
TOOL_CU_SRC := $(if $(HAVE_NVCC),$(sort $(wildcard tools/*.cu)),)

SONAME := libhfp4.so.0

.PHONY: all test gpu-test demo bench clean help
all: $(BUILD)/libhfp4.a $(BUILD)/libhfp4.so $(BUILD)/hfp4

help:
	@sed -n '/^#/!q;p' Makefile

# (src/*/*/*.h: the kernels' parameter block, src/kernels/sm90/fp8_fp4_gemm_params.h, is shared with
# the C planner: without it an edit there left the planner's object stale)
$(BUILD)/obj/%.o: %.c $(wildcard include/*.h src/*/*.h src/*/*/*.h tests/*.h tools/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -c $< -o $@

# (src/kernels/*/*.h too: the kernels' parameter block and the launchers' headers, e.g.
# fp8_fp4_gemm_params.h, are .h files; without them an edit there left the kernels' objects stale)
$(BUILD)/obj/%.cu.o: %.cu $(wildcard include/*.h src/*/*.h src/kernels/*/*.h src/kernels/*/*.cuh tests/*.h tests/gpu/*.h tools/*.h tools/*.cuh)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) $(NVFLAGS_EXTRA) -Itests -c $< -o $@

$(BUILD)/libhfp4.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libhfp4.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LIBS)

TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o) $(TOOL_CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
$(BUILD)/hfp4: $(TOOL_OBJ) $(BUILD)/libhfp4.a
	$(CC) -o $@ $(TOOL_OBJ) $(BUILD)/libhfp4.a $(LIBS)

$(BUILD)/hfp4_tests: $(TEST_OBJ) $(BUILD)/libhfp4.a
	$(CC) -o $@ $(TEST_OBJ) $(BUILD)/libhfp4.a $(LIBS)

# Python tests (python/tests, CPU only) run first, so the C runner's summary stays the closing line.
PYTEST = PYTHONPATH=python HFP4_LIBRARY=$(abspath $(BUILD))/libhfp4.so python3 -m pytest -q python/tests -m "not gpu"

test: $(BUILD)/hfp4_tests $(BUILD)/libhfp4.so $(BUILD)/hfp4
	@if python3 -c "import numpy, pytest" >/dev/null 2>&1; then \
		echo '$(PYTEST)' && $(PYTEST); \
	else echo "python tests skipped: numpy/pytest not installed"; fi
	$(BUILD)/hfp4_tests

.PHONY: pytest
pytest: $(BUILD)/libhfp4.so
	$(PYTEST)

GPUTEST_OBJ := $(GPUTEST_SRC:%.cu=$(BUILD)/obj/%.cu.o) $(BUILD)/obj/tests/harness.o
$(BUILD)/hfp4_gpu_tests: $(GPUTEST_OBJ) $(BUILD)/libhfp4.a
	$(CC) -o $@ $(GPUTEST_OBJ) $(BUILD)/libhfp4.a $(LIBS)

gpu-test: $(if $(HAVE_NVCC),$(BUILD)/hfp4_gpu_tests,)
	@if [ -z "$(HAVE_NVCC)" ]; then echo "gpu-test: skipped (no nvcc: the GPU tests need the CUDA toolkit)"; \
	else $(BUILD)/hfp4_gpu_tests --fork $(GPU_TEST_ARGS); fi

demo: $(BUILD)/hfp4
	$(BUILD)/hfp4 demo

# microbenchmarks of the kernels' building blocks (GPU-only diagnostics, not part of the library)
$(BUILD)/wgmma_ceiling: bench/micro/wgmma_ceiling.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/consumer_structures: bench/micro/consumer_structures.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/ss_swap: bench/micro/ss_swap.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/conv_ss192: bench/micro/conv_ss192.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/fp8_ss_gemm: bench/micro/fp8_ss_gemm.cu bench/micro/micro_timing.cuh bench/micro/micro_tensor_map.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/fp4_fewrow: bench/micro/fp4_fewrow.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/bf16_ceiling: bench/micro/bf16_ceiling.cu bench/micro/micro_timing.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/first_copy_latency: bench/micro/first_copy_latency.cu bench/micro/micro_tensor_map.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

$(BUILD)/stream_floor_alone: bench/micro/stream_floor_alone.cu tools/stream_floor_kernel.cuh $(wildcard src/kernels/sm90/*.cuh)
	@mkdir -p $(BUILD)
	$(NVCC) -std=c++17 -O3 $(GENCODE) -Isrc/kernels -Xptxas --warn-on-spills --Werror all-warnings $< -o $@

bench: $(BUILD)/hfp4
	$(BUILD)/hfp4 bench $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
