#!/usr/bin/env bash
# run-all.sh: runs every example on the GPU and checks it: the exit status
# of each, that particles.lua wrote its PNG frames and that they are PNGs,
# that graph.lua wrote a Graphviz file. Prints a summary; exits 1 on any
# failure. Examples that cannot run here are reported as SKIP with the
# reason and counted apart: vulkan where it was not built (no
# <vulkan/vulkan.h>), where no Vulkan loader opens or no Vulkan device is
# the CUDA device (it exits 77 then).
#
#   examples/run-all.sh [out_dir]     (default build/examples/out)
#
# Needs `make all examples` (done here when the programs are missing).
# CUGRAPH_LUA names another interpreter to run the scripts with. With
# CUGRAPH_LUA_LIBCUDA=build/libcuda-sim.so every example runs on the PTX
# simulator, at sizes that take seconds on a CPU; render and vulkan, which
# draw through EGL and Vulkan on the GPU, are skipped there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

b=${CUGRAPH_LUA_BUILD:-build}
out=${1:-$b/examples/out}
lua=${CUGRAPH_LUA:-$b/cugraph-lua}
engine=$b/examples/engine
if [ ! -x "$lua" ] || [ ! -x "$engine" ] || [ ! -x "$b/examples/hello" ] ||
   [ ! -x "$b/examples/dlpack" ] || [ ! -x "$b/examples/frameloop" ] ||
   [ ! -x "$b/examples/render" ] ||
   [ ! -f "$b/examples/png.so" ]; then
  make -s all examples || exit 1
fi
rm -rf "$out"
mkdir -p "$out" || exit 1

passed=0
failed=0
skipped=0
summary=()
sim=
case "${CUGRAPH_LUA_LIBCUDA:-}" in *libcuda-sim*) sim=1 ;; esac

# check NAME COMMAND...: runs it, logging to $out/NAME.log and the terminal;
# exit status 77 is a SKIP, with the reason the program printed last
# ("...: SKIP: <reason>")
check() {
  local name=$1 start ms status why
  shift
  echo "== $name: $*"
  start=$(date +%s%N)
  "$@" 2>&1 | tee "$out/$name.log"
  status=${PIPESTATUS[0]}
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$status" -eq 77 ]; then
    why=$(sed -n 's/.*: SKIP: //p' "$out/$name.log" | tail -n 1)
    skip "$name" "${why:-exit 77}"
  else
    record "$name" "$status" "$((ms / 1000)).$((ms % 1000 / 100)) s"
  fi
}

# record NAME STATUS NOTE
record() {
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    summary+=("PASS  $1 ($3)")
  else
    failed=$((failed + 1))
    summary+=("FAIL  $1 (exit $2, $3)")
  fi
}

# skip NAME REASON
skip() {
  echo "== $1: skipped ($2)"
  skipped=$((skipped + 1))
  summary+=("SKIP  $1 ($2)")
}

# is_png FILE: the 8-byte PNG signature
is_png() {
  [ -f "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

check model "$lua" examples/model.lua # 3 timed passes on the simulator
if [ -n "$sim" ]; then
  check particles "$lua" examples/particles.lua "$out/frames" 120 65536
else
  check particles "$lua" examples/particles.lua "$out/frames"
fi
bad=0
for f in 0000 0030 0060 0090; do
  png="$out/frames/frame_$f.png"
  if is_png "$png"; then
    command -v file >/dev/null && file "$png"
  else
    echo "not a PNG: $png"
    bad=1
  fi
done
record particles-frames "$bad" "frames 0, 30, 60, 90 in $out/frames"
check graph "$lua" examples/graph.lua "$out/graph.dot"
if head -c 7 "$out/graph.dot" 2>/dev/null | grep -q digraph; then
  record graph-dot 0 "$out/graph.dot"
else
  record graph-dot 1 "$out/graph.dot is not a Graphviz file"
fi
check hello "$b/examples/hello" lua
check engine "$engine"
check dlpack "$b/examples/dlpack"
# an engine's frame loop: 10000 frames of a 50-node frame graph, 0 bytes
# allocated a frame by the runtime and Lua (it exits 1 otherwise)
check frameloop "$b/examples/frameloop"
# C-owned graph, kernel reload, particles drawn by OpenGL through EGL
if [ -n "$sim" ]; then
  skip render "draws through EGL on a GPU; not on the simulator"
else
  mkdir -p "$out/render"
  check render "$b/examples/render" "$out/render"
fi
# CUDA and Vulkan sharing an image, a vertex buffer and a timeline semaphore
if [ -n "$sim" ]; then
  skip vulkan "shares memory with a Vulkan driver on a GPU; not on the simulator"
elif [ ! -x "$b/examples/vulkan" ]; then
  skip vulkan "not built: make examples found no <vulkan/vulkan.h>"
else
  mkdir -p "$out/vulkan"
  check vulkan "$b/examples/vulkan" "$out/vulkan"
  if [ -f "$out/vulkan/vulkan.png" ]; then
    if is_png "$out/vulkan/vulkan.png"; then
      record vulkan-png 0 "$out/vulkan/vulkan.png"
    else
      record vulkan-png 1 "$out/vulkan/vulkan.png is not a PNG"
    fi
  fi
fi
if [ -n "$sim" ]; then
  check solver "$lua" examples/solver.lua 64
  check solver-128 "$lua" examples/solver.lua 128 1e-8
else
  check solver "$lua" examples/solver.lua
  check solver-1024 "$lua" examples/solver.lua 1024 1e-8
fi
check substeps "$lua" examples/substeps.lua
if [ -n "$sim" ]; then
  check decode "$lua" examples/decode.lua 12 32 2
else
  check decode "$lua" examples/decode.lua
fi
if [ -n "$sim" ]; then
  check ddp-1 "$lua" examples/ddp.lua 20 32
else
  check ddp-1 "$lua" examples/ddp.lua
fi
gpus=$("$lua" -e 'print(require("cugraph").device_count())' 2>/dev/null || echo 0)
if [ "${gpus:-0}" -ge 2 ]; then
  check ddp-2 "$lua" --nproc 2 examples/ddp.lua
else
  echo "== ddp-2: skipped (fewer than 2 GPUs)"
fi

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
