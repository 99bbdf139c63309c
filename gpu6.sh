# build, test-gpu, sanitize-gpu, then spec/35 alone under the sanitizer in detail
source .device-lua/env.sh
L=$OUT/log.txt
git log --oneline -1 > $L 2>/dev/null
( time make -j16 spec-needs build/kernels.ptx examples build/examples/frameloop ) > $OUT/build.log 2>&1
echo "build rc $?" >> $L
( time make test-gpu SPEC_JOBS=15 ) > $OUT/test-gpu.log 2>&1
echo "test-gpu rc $?" >> $L
grep -E "FAILED|summed|^real" $OUT/test-gpu.log | tail -12 >> $L
( time timeout 300 make sanitize-gpu SPEC_JOBS=15 ) > $OUT/sanitize.log 2>&1; echo "sanitize rc $?" >> $L
grep -vE " ok$|^\s*$" $OUT/sanitize.log | tail -25 >> $L
for f in build/sanitize/*.log build/sanitize/*.again; do
  grep -q "FAILED\|ERROR SUMMARY: [1-9]\|LEAK SUMMARY: [1-9]\|not ok" $f 2>/dev/null || continue
  echo "=================== $f"; grep -v "Host Frame\|^ok \|^=========\s*$" $f | head -60
done > $OUT/fails.txt 2>&1
for f in build/sanitize/children/*.log; do
  grep -q "ERROR SUMMARY: [1-9]" $f || continue
  echo "=================== $f"; grep -v "^=========\s*$" $f | head -40
done > $OUT/children.txt 2>&1
# spec/35 in detail only when its sanitized run failed
if grep -q "not ok\\|ERROR SUMMARY: [1-9]" build/sanitize/35-graphed_spec.log 2>/dev/null; then
CUDA_LAUNCH_BLOCKING=1 CUGRAPH_LUA_BUILD=$PWD/build XDG_CACHE_HOME=$PWD/build/cache timeout 100 \
  compute-sanitizer --print-limit 3 build/cugraph-lua "$(command -v busted)" --ignore-lua -o TAP spec/35-graphed_spec.lua > $OUT/s35.txt 2>&1
echo "s35 rc $?" >> $L
fi
