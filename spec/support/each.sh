#!/bin/sh
# each.sh JOBS FILES -- COMMAND...: runs COMMAND FILE for each spec file in
# FILES (one word, space-separated), JOBS at once. Each file's output is
# kept and printed whole once it is done, so outputs do not interleave;
# the end is a line with the files that failed, then the sum of all their
# busted summaries. Exits 1 if any failed.
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
# the sum of busted's summary lines (its terminal outputs print one a file)
cat "$out"/*.log 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | awk '
  /^[0-9]+ success(es)? \/ [0-9]+ failures? \/ [0-9]+ errors? \/ [0-9]+ pending/ {
    s += $1; f += $4; e += $7; p += $10; k++ }
  END { if (k) printf "each.sh: %d successes / %d failures / %d errors / %d pending, summed over %d files\n", s, f, e, p, k }'
[ -z "$bad" ] && [ "$n" -eq "$(printf '%s\n' $files | wc -l)" ]
