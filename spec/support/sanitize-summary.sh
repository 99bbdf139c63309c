#!/bin/sh
# sanitize-summary.sh DIR: sums up make sanitize-gpu's logs (one a spec
# file or an example, each ending "exit N"): a line for each, then the
# totals; exits 1 when any spec failed, the sanitizer found an error or a
# leak, or a run did not end with status 0.
dir=${1:?usage: sanitize-summary.sh DIR}
bad=0 files=0 oks=0 fails=0 errs=0
# ok, nok, err, code: a log's passed and failed tests, the sanitizer's
# errors and the exit status it ends with
read_log() {
  ok=$(grep -c '^ok ' "$1")
  nok=$(grep -c '^not ok ' "$1")
  err=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}')
  code=$(sed -n 's/^exit \([0-9]*\)$/\1/p' "$1" | tail -n 1)
}
for log in "$dir"/*.log; do
  [ -f "$log" ] || continue
  files=$((files + 1))
  read_log "$log"
  oks=$((oks + ok)) fails=$((fails + nok)) errs=$((errs + err))
  state=ok
  plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$log" | tail -n 1)
  if [ "$nok" -gt 0 ] || [ "$err" -gt 0 ] || [ "${code:-1}" != 0 ] ||
     { [ -n "$plan" ] && [ "$plan" != "$ok" ]; }; then
    state=FAILED bad=1
  fi
  printf '%-28s %4d ok %3d not ok %3d sanitizer errors, exit %s  %s\n' \
    "$(basename "$log" .log)" "$ok" "$nok" "$err" "${code:-?}" "$state"
done
# a run that died of a signal ran once more, alone: shown, not counted
for log in "$dir"/*.again; do
  [ -f "$log" ] || continue
  read_log "$log"
  printf '%-28s %4d ok %3d not ok %3d sanitizer errors, exit %s  (run again alone)\n' \
    "$(basename "$log" .again)" "$ok" "$nok" "$err" "${code:-?}"
done
# the specs' child processes, a log each (by process id) in DIR/children
kids=0
for log in "$dir"/children/*.log; do
  [ -f "$log" ] || continue
  kids=$((kids + 1))
  read_log "$log"
  if [ "$err" -gt 0 ]; then
    errs=$((errs + err)) bad=1
    printf '%-28s %3d sanitizer errors  FAILED\n' "child $(basename "$log" .log)" "$err"
  fi
done
echo "sanitize-gpu: $files runs and $kids child processes, $oks ok, $fails not ok, $errs sanitizer errors (logs in $dir)"
exit $bad
