# Collect the sanitizer logs of the failed runs (re-run if the machine is fresh)
source .device-lua/env.sh
L=$OUT/log.txt
if [ ! -d build/sanitize ]; then
  make -j16 spec-needs examples build/examples/frameloop > $OUT/build.log 2>&1
  timeout 300 make sanitize-gpu SPEC_JOBS=15 > $OUT/sanitize.log 2>&1
fi
for n in 04-ownership_spec 14-dlpack_spec 31-graph_spec 36-trace_kernels_spec 43-frame_spec 65-every_call_spec 75-programmatic_spec frameloop particles; do
  for f in build/sanitize/$n.log build/sanitize/$n.again; do
    [ -f $f ] && { echo "=================== $f"; grep -v "^ok " $f | head -150; }
  done
done > $OUT/fails1.txt 2>&1
for f in build/sanitize/35-graphed_spec.log; do echo "=================== $f"; grep -v "^ok " $f | head -400; done > $OUT/fails2.txt
for f in build/sanitize/children/*; do echo "=================== $f"; head -80 $f; done > $OUT/children.txt 2>&1
ls -la build/sanitize build/sanitize/children > $L
# the threads spec failure, three times alone
for i in 1 2 3; do make test-gpu SPEC_FILES=spec/42-threads_spec.lua 2>&1 | tail -8; done > $OUT/threads.txt 2>&1
