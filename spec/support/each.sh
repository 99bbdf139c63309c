#!/bin/sh
# each.sh JOBS FILES -- COMMAND...: runs COMMAND FILE for each spec file in
# FILES (one word, space-separated), JOBS at once. Each file's output is
# kept and printed whole once it is done, so outputs do not interleave;
# the end is a line with the files that failed, then the sum of all their
# summaries: "N passed, N pending, N failed (...)". Exits 1 if any failed.
# The files numbered in EACH_ALONE (space-separated, "34 40") run after
# the others, one at a time, with nothing else on the machine.
jobs=${1:?usage: each.sh JOBS FILES -- COMMAND...}
files=$2
shift 2
[ "$1" = "--" ] && shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export EACH_OUT="$out"
together= alone=
for f in $files; do
  n=$(basename "$f"); n=${n%%-*}
  case " $EACH_ALONE " in *" $n "*) alone="$alone $f" ;; *) together="$together $f" ;; esac
done
run() {
  j=$1; shift
  xargs -P "$j" -I{} sh -c '
    f=$1; shift
    log="$EACH_OUT/$(basename "$f").log"
    if "$@" "$f" > "$log" 2>&1; then echo "ok $f" >> "$log.done"
    else echo "FAILED $f" >> "$log.done"; fi
    cat "$log"' each {} "$@"
}
[ -n "$together" ] && printf '%s\n' $together | run "$jobs" "$@"
[ -n "$alone" ] && printf '%s\n' $alone | run 1 "$@"
n=$(ls "$out"/*.done 2>/dev/null | wc -l)
bad=$(cat "$out"/*.done 2>/dev/null | sed -n 's/^FAILED //p' | tr '\n' ' ')
echo "each.sh: $n spec files in $jobs jobs${alone:+ (alone after them:$alone)}, failed: ${bad:-none}"
# the sum of the files' summary lines (spec/support/summary.lua's "N
# passed, N pending (...), N failed", or busted's own terminal outputs'
# "N successes / N failures / N errors / N pending"); a file that failed
# with no failure in its summary (it died, or printed none) counts as one
for f in "$out"/*.log; do
  [ -f "$f" ] || continue
  sed 's/\x1b\[[0-9;]*m//g' "$f" | awk -v bad="$(grep -c '^FAILED' "$f.done" 2>/dev/null)" '
    /^[0-9]+ passed, [0-9]+ pending.*, [0-9]+ failed$/ { s = $1; p = $3; f = $(NF - 1) }
    /^[0-9]+ success(es)? \/ [0-9]+ failures? \/ [0-9]+ errors? \/ [0-9]+ pending/ {
      s = $1; f = $4 + $7; p = $10 }
    END { if (bad > 0 && f == 0) f = 1; print s + 0, p + 0, f + 0 }'
done | awk '{ s += $1; p += $2; f += $3 }
  END { printf "%d passed, %d pending, %d failed (summed over %d spec files)\n", s, p, f, NR }'
[ -z "$bad" ] && [ "$n" -eq "$(printf '%s\n' $files | wc -l)" ]
