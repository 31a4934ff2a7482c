#!/usr/bin/env bash
# The GPU check in one command (issue 31): build the pinned llama.cpp for CUDA (compute capability
# 9.0 only: an H100 or H200) with llama-server from the same source, install cllm and the carried
# wheels, write the random-weight bench model, bench cllm against llama-server -np 32 and -np 1
# (Ollama's default) at 1, 8, 32 and 64 concurrent requests, then a partly offloaded load.
#
# Prepared here by `python bench/gpu_prepare.py` (.gpu-carry/: the trimmed source and the wheels),
# which prints the device call:  run(command="bash bench/gpu_check.sh", carry=[".gpu-carry"], timeout_s=600)
# Rehearsed on a CPU:  GPU_CHECK_BACKEND=cpu bench/gpu_check.sh  (see GPU_CHECK_* below).
# If the build runs out of its time box, call again at once: a machine still warm keeps
# /tmp/gpu-check, the re-unpacked source keeps its timestamps, and ninja goes on where it stopped.
#
# Every phase is time-boxed inside GPU_CHECK_BUDGET_S (default 560 s, under the call's 600) and
# writes to $OUT as it goes: check.log (all of it), env.txt, build.log, bench.md (the table),
# results.tgz (JSON, server logs, ninja's steps, batched-bench, seq_gaps.txt, save_stall.txt),
# offload.json. At most 8 files come back. Phases after the offload step (llama-batched-bench, the
# cost of gaps between decode sequences, state save and restore from device memory) run only
# while time is left.
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BACKEND=${GPU_CHECK_BACKEND:-cuda}
BUDGET=${GPU_CHECK_BUDGET_S:-560}
WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
CARRY=${GPU_CHECK_CARRY:-$REPO/.gpu-carry}
WHEELS=${GPU_CHECK_WHEELS:-$CARRY/wheels}
PY=${GPU_CHECK_PYTHON:-python3}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
NICE=${GPU_CHECK_NICE:-0}
SHAPE=${GPU_CHECK_SHAPE:-qwen3-0.6b}
LEVELS=${GPU_CHECK_LEVELS:-1,8,32,64}
SLOTS=${GPU_CHECK_SLOTS:-32}
MAX_TOKENS=${GPU_CHECK_MAX_TOKENS:-128}
REQUESTS=${GPU_CHECK_REQUESTS:-}
THREADS=${GPU_CHECK_THREADS:-8}
OUT=${OUT:-$REPO/.gpu-out}
START=$(date +%s)
# What each step before the bench leaves to the ones after it: the full check's bench needs minutes;
# the diagnosis alone (GPU_CHECK_DIAG=1) a minute, so that a short budget still reaches it.
if [ "${GPU_CHECK_DIAG:-0}" = 1 ]; then AFTER=(40 ${GPU_CHECK_AFTER_BUILD_S:-45} 35); else AFTER=(200 ${GPU_CHECK_AFTER_BUILD_S:-170} 100); fi
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd) WORK=$(cd "$WORK" && pwd)
exec > >(tee -a "$OUT/check.log") 2>&1

left() { echo $((BUDGET - $(date +%s) + START)); }
say() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*"; }
die() { say "FAILED: $*"; pack; exit 1; }
pack() {  # results so far, in one file (the 8-file limit)
    mkdir -p "$WORK/results"
    cp -f "$WORK/build/.ninja_log" "$WORK/results/ninja_log.txt" 2>/dev/null
    tar -czf "$OUT/results.tgz" -C "$WORK" results cache/logs 2>/dev/null
}
# run_boxed SECONDS_CAP RESERVE CMD...: at most the cap, and never into the last RESERVE seconds.
run_boxed() {
    local cap=$1 reserve=$2; shift 2
    local t=$(( $(left) - reserve )); (( t > cap )) && t=$cap
    (( t < 10 )) && { say "no time left for: $*"; return 124; }
    timeout -s INT -k 20 "$t" nice -n "$NICE" "$@"
}

say "cllm GPU check: backend $BACKEND, budget ${BUDGET}s, $JOBS jobs, repo $REPO"
# nvcc where CUDA installs it; cmake and ninja may be the Python packages beside python3.
export PATH=$PATH:/usr/local/cuda/bin:$(dirname "$(command -v "$PY")")
# --- 0. what the machine has; fail fast on what is missing --------------------------------------
{
    date -u; uname -a; nproc; free -g | head -2; df -h /tmp | tail -1
    grep -m1 "model name" /proc/cpuinfo; echo "CPU flags: $(grep -m1 -o 'amx[a-z0-9_]*\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    command -v nvidia-smi >/dev/null && nvidia-smi
    command -v nvcc >/dev/null && nvcc --version | tail -2
    cmake --version | head -1; ninja --version; "$PY" --version; "$PY" -m pip --version
    git -C "$REPO" log --oneline -1 2>/dev/null
} >"$OUT/env.txt" 2>&1
if [ "$BACKEND" = cuda ]; then
    command -v nvcc >/dev/null || die "no nvcc (looked on PATH and /usr/local/cuda/bin)"
    nvidia-smi -L || die "nvidia-smi sees no GPU"
    CC_FOUND=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
    say "GPU compute capability $CC_FOUND (building for ${GPU_CHECK_ARCH:-90})"
fi
command -v cmake >/dev/null && command -v ninja >/dev/null || die "cmake and ninja are needed"
SRC_TGZ=$(ls "$CARRY"/llama.cpp-*.tar.gz 2>/dev/null | head -1)
[ -n "$SRC_TGZ" ] || die "no $CARRY/llama.cpp-*.tar.gz: run python bench/gpu_prepare.py here and carry .gpu-carry"
ls "$WHEELS"/*.whl >/dev/null 2>&1 || die "no wheels in $WHEELS"

# --- 1. cllm and the wheels the machine lacks, into one folder on PYTHONPATH --------------------
SITE=$WORK/site  # the carried wheels
CLLM_SITE=$WORK/cllm  # cllm itself, apart: pip --target will not add to a bin/ that exists
rm -rf "$SITE" "$CLLM_SITE"
say "installing the carried wheels and cllm into $SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl \
    || die "pip could not install the carried wheels"
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH PYTHONUNBUFFERED=1  # the carried setuptools builds cllm
"$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$CLLM_SITE" "$REPO" \
    || die "pip could not build and install cllm"
export PYTHONPATH=$SITE:$CLLM_SITE PATH=$CLLM_SITE/bin:$PATH
command -v cllm >/dev/null || die "no cllm command in $CLLM_SITE/bin"
cd "$WORK"  # not the repo: its cllm_ollama/ (no cli/ inside) would shadow the installed package for `python -m`
# Python's faulthandler off (set and empty: bench/targets.py gives the servers it otherwise): on the
# H200 every load that ran with it died by SIGSEGV inside llama.cpp's load and every one without it
# passed. segv_trace.so (below) prints a native stack instead; the diagnosis turns it on where asked.
export PYTHONFAULTHANDLER=
"$PY" -c "import cllm_ollama.api, starlette, uvicorn, gguf, msgspec, orjson, jinja2, httpx, numpy" \
    || die "an import cllm needs failed (see above)"

# --- 2. llama.cpp from the trimmed source: the libraries cllm loads, llama-server, batched-bench -
SRC=$WORK/src
BUILD=$WORK/build
rm -rf "$SRC" && mkdir -p "$SRC" && tar -xzf "$SRC_TGZ" -C "$SRC" || die "could not unpack $SRC_TGZ"
# The model's F16 weights are written meanwhile (Python, one core); quantized after the build.
mkdir -p "$WORK/cache/logs" "$WORK/results"
nice -n 5 "$PY" "$REPO/bench/gpu_bench.py" f16 --cache "$WORK/cache" --out "$WORK/results" --shape "$SHAPE" \
    --vocab "$SRC/llama.cpp/models/ggml-vocab-qwen2.gguf" >"$WORK/cache/logs/model.log" 2>&1 &
F16_PID=$!
FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF
       -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
       # No AMX kernels (H100/H200 hosts are mostly AMX Xeons): GCC's native build of this
       # llama.cpp's dies with SIGILL at their first tile instruction (README); cllm's binding
       # leaves them out at run time too, llama-server and batched-bench could not.
       -DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__)
[ "$BACKEND" = cuda ] && FLAGS+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${GPU_CHECK_ARCH:-90}"
                                 "-DCMAKE_CUDA_COMPILER=$(command -v nvcc)")
say "configuring: cmake ${FLAGS[*]}"
run_boxed 120 "${AFTER[0]}" cmake -S "$SRC/llama.cpp" -B "$BUILD" "${FLAGS[@]}" >"$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log"; die "cmake configure failed (build.log)"; }
TARGETS=${GPU_CHECK_TARGETS:-llama-server llama-batched-bench}
say "building $TARGETS (-j$JOBS)"
# The build may take all but what the model, a bench and the offload step need (~3 minutes).
run_boxed 3600 "${AFTER[1]}" cmake --build "$BUILD" -j "$JOBS" \
    --target $TARGETS >>"$OUT/build.log" 2>&1
RC=$?
# ninja's log: the slowest steps, so that a next run knows what to cut.
awk -F'\t' 'NR>1 {printf "%7.1f s  %s\n", ($2-$1)/1000, $4}' "$BUILD/.ninja_log" 2>/dev/null | sort -rn | head -12
(( RC == 0 )) || { tail -30 "$OUT/build.log"; die "build failed or ran out of time (rc $RC; build.log)"; }
say "built: $(ls "$BUILD/bin" | tr '\n' ' ')"
# llama-cpp-python's Python part loads libllama and libggml from llama_cpp/lib: the build's.
ln -sfn "$BUILD/bin" "$SITE/llama_cpp/lib"
export LLAMA_CPP_LIB_PATH=$BUILD/bin MTMD_CPP_LIB=$BUILD/bin
[ -x "$BUILD/bin/llama-server" ] && "$BUILD/bin/llama-server" --version 2>&1 | tail -2
"$PY" -c "import sys; from cllm_ollama.engine.binding import gpu_devices; d = gpu_devices(); \
print('llama.cpp devices:', d); sys.exit(0 if d or '$BACKEND' == 'cpu' else 3)" | tee "$WORK/results/devices.txt" \
    || die "the binding could not load the build, or llama.cpp found no GPU"

# --- 3. the bench model ---------------------------------------------------------------------------
say "waiting for the F16 model, then quantizing to Q4_K_M"
wait "$F16_PID" || { cat "$WORK/cache/logs/model.log"; die "writing the F16 model failed"; }
run_boxed 120 "${AFTER[2]}" "$PY" "$REPO/bench/gpu_bench.py" model --cache "$WORK/cache" --out "$WORK/results" \
    --shape "$SHAPE" --threads "$(nproc)" || die "quantizing the model failed"
pack
MODEL=$WORK/cache/models/$SHAPE-random-qwen-vocab-q4_k_m.gguf
PROBE=("$PY" -m cllm_ollama.engine.probe "$MODEL" 999 0 "")  # the probe's child, as engine/probe.py runs it

# A native stack where a process dies by a signal, without a debugger (bench/segv_trace.c,
# LD_PRELOADed): the staged load, the bench's servers and the diagnosis's probe print it, and
# native_names names its frames' functions.
SEGV_TRACE=$WORK/segv_trace.so
cc -shared -fPIC -O1 -o "$SEGV_TRACE" "$REPO/bench/segv_trace.c" -ldl >"$WORK/results/segv_trace.cc.txt" 2>&1 \
    || { say "segv_trace.c did not build: $(tail -2 "$WORK/results/segv_trace.cc.txt")"; SEGV_TRACE=; }
native_names() {  # segv_trace's frames, each with its function's name from the library's symbols
    local line lib off name
    while IFS= read -r line; do
        if [[ $line =~ ^segv_trace:\ \#([0-9]+)\ (.+)\+(0x[0-9a-f]+)\ \((.*)\)$ ]]; then
            lib=${BASH_REMATCH[2]} off=${BASH_REMATCH[3]}
            name=$(addr2line -f -C -e "$lib" "$off" 2>/dev/null | head -1)
            [ "$name" = "??" ] && name=
            echo "  #${BASH_REMATCH[1]} ${lib##*/}+$off ${name:-${BASH_REMATCH[4]}}"
        else
            echo "$line"
        fi
    done
}
probe_steps() {  # probe_steps RESERVE SETTING...: gpu_probe_steps.py under each (its VAR=value words go to env)
    local reserve=$1 s w; shift
    for s in "$@"; do
        say "diag: gpu_probe_steps.py $s"
        local envs=() args=()
        for w in $s; do
            if [[ $w == *=* ]]; then envs+=("$w"); else args+=("$w"); fi
        done
        run_boxed 30 "$reserve" env "${envs[@]}" "$PY" "$REPO/bench/gpu_probe_steps.py" "$MODEL" "${args[@]}" 2>&1 \
            | grep -v "^load\|^llama_\|^print_info\|^load_tensors\|^create_tensor\|^\.*$" | tail -10
        say "  rc ${PIPESTATUS[0]} (124: out of time; 139: SIGSEGV)"
    done
}
# --- 3a. where a load dies (the probe's child, SIGSEGV on the H200 2026-12-04): the probe's child
# with faulthandler, with segv_trace's native stack, under strace, without faulthandler; the load's own settings
# one by one (bench/gpu_probe_steps.py); cuda-gdb's stack; then the context's settings. Run when
# the staged load dies below; GPU_CHECK_DIAG=1 runs only this.
diag() {  # diag RESERVE: the seconds of the budget it leaves to what follows
    local reserve=$1
    say "diag: the probe's child with faulthandler (as cllm ran it on a GPU before 2026-12-04's change), its whole stderr"
    run_boxed 40 "$reserve" env PYTHONFAULTHANDLER=1 "${PROBE[@]}" 2>&1 \
        | grep -v "^probe: progress" | tail -45
    say "  rc ${PIPESTATUS[0]} (124: out of time; 139: SIGSEGV)"
    if [ -n "$SEGV_TRACE" ]; then
        say "diag: the probe's child with the native stack printed where it dies (bench/segv_trace.c)"
        run_boxed 40 "$reserve" env PYTHONFAULTHANDLER=1 LD_PRELOAD="$SEGV_TRACE" "${PROBE[@]}" 2>&1 \
            | grep -v "^probe: progress" | native_names | tee "$WORK/results/segv_trace.txt" | tail -50
        say "  rc ${PIPESTATUS[0]}"
    fi
    if command -v strace >/dev/null; then
        # Whether a signal came before the fatal one, and who installed handlers for which: a
        # library that handles its own faults would meet faulthandler's handler there.
        say "diag: the probe's child under strace (signals delivered, handlers set; strace.txt)"
        run_boxed 40 "$reserve" env PYTHONFAULTHANDLER=1 strace -f -qq -e trace=rt_sigaction,sigaltstack \
            -e signal=all -o "$WORK/results/strace.txt" "${PROBE[@]}" >/dev/null 2>&1
        say "  rc $?"
        grep -v "SIGCHLD\|, NULL, {" "$WORK/results/strace.txt" | grep "SIG\|sigaltstack" | cut -c1-220 | tail -40
    fi
    say "diag: the probe's child without faulthandler (as cllm runs it on a GPU now)"
    run_boxed 40 "$reserve" "${PROBE[@]}" 2>&1 | grep -v "^probe: progress" | tail -5
    say "  rc ${PIPESTATUS[0]}"
    # The load's own settings first (the H200 died inside llama_model_load_from_file, 2026-12-04):
    # llama_cpp alone, then cllm's binding without each of its additions, then the native stack.
    local loads=("--raw" "--raw --no-faulthandler" "--raw --no-log-callback" "--raw --no-mmap"
                 "--raw --gpu-layers 0" "" "--no-faulthandler" "--no-log-callback"
                 "--no-faulthandler --no-log-callback" "--no-devices" "--no-mmap"
                 "--no-extra-bufts" "--imports" "--gpu-layers 0" "--progress" GGML_CUDA_NO_PINNED=1)
    probe_steps "$reserve" "${loads[@]}"
    if command -v cuda-gdb >/dev/null; then
        say "diag: the probe's child under cuda-gdb (the native stack)"
        run_boxed "${GPU_CHECK_GDB_S:-60}" "$reserve" cuda-gdb -q -batch -ex "set pagination off" -ex run -ex "bt 40" \
            --args "${PROBE[@]}" >"$WORK/results/gdb.txt" 2>&1
        grep -v "^\[New Thread\|^\[Thread .* exited" "$WORK/results/gdb.txt" | grep -A45 "SIGSEGV\|SIGABRT" | head -60
    fi
    # Then the context's settings, which matter once a load passes. --gpu-layers 29: every layer
    # and the output, as the server's fit names them (999 elsewhere).
    local steps=("--ctx 256" "--batch 512" "--threads 8" "--flash off" "--flash on"
                 "--seqs 4 --ctx 2304 --batch 512 --threads 8" "--seqs 32 --ctx 512 --batch 512 --threads 8"
                 "--seqs 32 --ctx 320 --batch 512 --threads 8 --tokens 64 --no-output --every-seq"
                 "--gpu-layers 29" "--tokens 16" GGML_CUDA_DISABLE_GRAPHS=1)
    probe_steps "$reserve" "${steps[@]}"
    pack
}
if [ "${GPU_CHECK_DIAG:-0}" = 1 ]; then
    diag 3
    say "diag done; $(left)s of the budget left"
    exit 0
fi

# --- 3b. the serve path's load outside the server, stage by stage (cllm died loading on the H200) --
say "cllm's load, stage by stage (bench/gpu_load_steps.py)"
run_boxed 90 200 env LD_PRELOAD="$SEGV_TRACE" CLLM_NUM_THREAD="$THREADS" "$PY" \
    "$REPO/bench/gpu_load_steps.py" "$MODEL" --slots "$SLOTS" --ctx 512 \
    >"$WORK/results/load_steps.txt" 2>&1
LOAD_RC=$?
say "load steps: rc $LOAD_RC (the last stage printed is where it stopped)"
grep -v "^20..-..-.. " "$WORK/results/load_steps.txt" | native_names | tail -50
if (( LOAD_RC == 0 )); then  # the cause, confirmed in one load: the probe's child with faulthandler on
    say "the probe's child with PYTHONFAULTHANDLER=1 (every such load died on the H200, 2026-12-04)"
    run_boxed 40 200 env PYTHONFAULTHANDLER=1 LD_PRELOAD="$SEGV_TRACE" "${PROBE[@]}" 2>&1 \
        | grep -v "^probe: progress" | native_names | tail -30
    say "  rc ${PIPESTATUS[0]} (139: SIGSEGV, faulthandler's doing)"
fi
# A load that died: the settings that differ from the CPU path, turned back one at a time, so that
# the same call both says which one kills it and still measures cllm (the bench runs with the first
# that loads; bench.md says which).
if (( LOAD_RC != 0 )); then
    for VARIANT in ${GPU_CHECK_VARIANTS:-CLLM_GAP_FILL=0 OLLAMA_FLASH_ATTENTION=0 CLLM_NUM_PARALLEL=8}; do
        VSLOTS=$SLOTS; [[ $VARIANT == CLLM_NUM_PARALLEL=* ]] && VSLOTS=${VARIANT#*=}
        say "load steps again with $VARIANT"
        run_boxed 60 280 env LD_PRELOAD="$SEGV_TRACE" CLLM_NUM_THREAD="$THREADS" "$VARIANT" "$PY" \
            "$REPO/bench/gpu_load_steps.py" "$MODEL" \
            --slots "$VSLOTS" --ctx 512 >"$WORK/results/load_steps.$VARIANT.txt" 2>&1
        RC=$?
        grep -v "^20..-..-.. " "$WORK/results/load_steps.$VARIANT.txt" | tail -6
        if (( RC == 0 )); then
            say "loads with $VARIANT: the bench runs cllm so"
            export "${VARIANT?}"; SLOTS=$VSLOTS
            echo "$VARIANT" >"$WORK/results/cllm_variant.txt"
            break
        fi
        say "dies with $VARIANT too (rc $RC)"
    done
    [ -f "$WORK/results/cllm_variant.txt" ] || diag 200
fi

# --- 4. cllm vs llama-server -np N vs -np 1 --------------------------------------------------------
GPU_FLAG=(); [ "$BACKEND" = cuda ] && GPU_FLAG=(--gpu)
say "bench: levels $LEVELS, $SLOTS slots, $MAX_TOKENS tokens"
run_boxed 400 "${GPU_CHECK_AFTER_BENCH_S:-70}" env LD_PRELOAD="$SEGV_TRACE" "$PY" "$REPO/bench/gpu_bench.py" bench --cache "$WORK/cache" \
    --out "$WORK/results" --build "$BUILD" --shape "$SHAPE" --levels "$LEVELS" --slots "$SLOTS" \
    --max-tokens "$MAX_TOKENS" --threads "$THREADS" ${REQUESTS:+--requests "$REQUESTS"} "${GPU_FLAG[@]}" \
    || say "bench stopped early (rc $?): what finished is in bench.md"
cp -f "$WORK/results/bench.md" "$OUT/bench.md" 2>/dev/null
[ -f "$WORK/results/cllm_variant.txt" ] && echo "cllm ran with $(cat "$WORK/results/cllm_variant.txt") (its default load died)" >>"$OUT/bench.md"
# cllm's own log when it did not finish (on the H200, 2026-11-28, it died silently while loading).
if grep -q 'failed: cllm' "$WORK/results/bench.md" 2>/dev/null; then
    tail -60 "$WORK/cache/logs/cllm.log" | native_names
    # A process killed by the kernel (out of memory) leaves no trace of its own.
    { dmesg 2>/dev/null | tail -20; free -m; } | tee "$WORK/results/after_cllm_failed.txt"
fi
pack

# --- 5. a partly offloaded load ------------------------------------------------------------------
say "offload: OLLAMA_GPU_OVERHEAD set so that about half the layers fit"
run_boxed 150 5 "$PY" "$REPO/bench/gpu_bench.py" offload --cache "$WORK/cache" --out "$WORK/results" \
    --shape "$SHAPE" --threads "$THREADS" || say "offload step stopped (rc $?)"
cp -f "$WORK/results/offload.json" "$OUT/offload.json" 2>/dev/null
pack

# --- 6. what a gap between decode sequences costs on the device, filled and not (GPU_GAP_FILL) ----
if (( $(left) > 60 )); then
    say "gaps in a decode step's sequences (bench/seq_gaps.py --seqs 32)"
    for DEPTH in 64 2048; do
        run_boxed 30 5 env LD_PRELOAD="$SEGV_TRACE" "$PY" "$REPO/bench/seq_gaps.py" "$MODEL" \
            --seqs 32 --depth "$DEPTH" --gpu-layers 999 --threads "$THREADS" >>"$WORK/results/seq_gaps.txt" 2>&1 \
            || say "seq_gaps at depth $DEPTH stopped (rc $?)"
    done
    grep "sequences" "$WORK/results/seq_gaps.txt" | sed 's/sequences \[[^]]*\] //'
    pack
fi
# --- 6b. the ceiling (measured on the H200 once already), if time is left ------------------------
if (( $(left) > 45 )); then
    run_boxed 60 5 "$PY" "$REPO/bench/gpu_bench.py" batched --cache "$WORK/cache" --out "$WORK/results" \
        --build "$BUILD" --shape "$SHAPE" --levels "$LEVELS" --max-tokens "$MAX_TOKENS" --threads "$THREADS" \
        "${GPU_FLAG[@]}" || say "batched-bench stopped (rc $?)"
    pack
fi
# --- 7. saving and restoring prompt states from device memory, if time is left --------------------
if (( $(left) > 60 )); then
    say "state save/restore on the device path (bench/save_stall.py)"
    run_boxed 90 5 "$PY" "$REPO/bench/save_stall.py" "$MODEL" \
        --tokens "${GPU_CHECK_STATE_TOKENS:-2048,8192}" --threads "$THREADS" >"$WORK/results/save_stall.txt" 2>&1 \
        || say "save_stall stopped (rc $?)"
    tail -25 "$WORK/results/save_stall.txt"
    pack
fi
say "done; $(left)s of the budget left"
cat "$OUT/bench.md" 2>/dev/null
