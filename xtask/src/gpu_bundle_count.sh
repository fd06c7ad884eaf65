# count_results: reads the output of one test binary (libtest's, run with
# `--nocapture`) on standard input and prints `PASSED FAILED SKIPPED`.
# PASSED and FAILED add up its `test result:` lines; a test that could not
# run on this machine prints a line `SKIPPED: <test>: <why>` (through
# `sdk_tests::skip`) and returns, which libtest counts as passed: each such
# line is counted as skipped and taken off PASSED. A binary that printed no
# `test result:` line (it crashed) counts as one failure.
count_results() {
  local out p f s
  out=$(cat)
  read -r p f < <(printf '%s\n' "$out" \
    | sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' \
    | awk '{p += $1; f += $2} END {print p + 0, f + 0}')
  # With --test-threads=1 the line follows libtest's `test NAME ... `.
  s=$(printf '%s\n' "$out" | grep -cE '^(test [^ ]+ \.\.\. )?SKIPPED: [^:]+: ')
  if ! printf '%s\n' "$out" | grep -q '^test result: '; then f=$((f + 1)); fi
  if [ "$s" -gt "$p" ]; then s=$p; fi
  echo "$((p - s)) $f $s"
}
