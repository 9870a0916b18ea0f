# Shared by the launcher tests' scripts (sourced): named checks that count failures.
failures=0
check() {  # check WHAT CONDITION...: runs CONDITION, prints ok/FAILED with WHAT
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}
count_is() { [ "$(grep -c -- "$2" "$1")" = "$3" ]; }  # count_is FILE PATTERN N
# finish NAME FILE...: with failures, prints the tail of each FILE (JSON lines left out) and exits
# 1; otherwise says NAME passed every check.
finish() {
  local name=$1 f
  shift
  if [ "$failures" -gt 0 ]; then
    for f in "$@"; do
      [ -f "$f" ] || continue
      echo "== $f"
      grep -v '^{' "$f" | tail -8
    done
    exit 1
  fi
  echo "$name: all checks passed"
}
