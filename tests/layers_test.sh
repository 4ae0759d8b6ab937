#!/usr/bin/env bash
# The tree's layers (doc/design.md, Folders): a folder includes only itself and the folders
# before it, base < batching < dataplane < drivers < engine < results < tools. Prints each
# include that points up, each file in tools/ that is not a command's, each print in engine/, and
# in product code each function over 120 lines and each file over 800 (issue 47: split by job),
# and fails if there is one.
#   tests/layers_test.sh [SOURCE_ROOT [FLOOR_PROGRAM...]]
# FLOOR_PROGRAMs (meson passes tests/link's): each floor's library linked whole with only the
# floors below it — that they were built is the link-order check; each is run once here.
set -euo pipefail
root=${1:-$(dirname "$0")/..}
shift || true
floor_programs=()
for program in "$@"; do floor_programs+=("$(realpath "$program")"); done  # meson's: build-relative
cd "$root"
layers=(base batching dataplane drivers engine results tools)
bad=0
for ((i = 0; i < ${#layers[@]}; ++i)); do
  above=$(IFS='|'; echo "${layers[*]:i+1}")
  [[ -n $above ]] || continue
  while IFS= read -r hit; do
    echo "layers: $hit points up (${layers[i]}/ may include ${layers[*]:0:i+1})" >&2
    bad=1
  done < <(grep -rnE "^#include \"($above)/" "${layers[i]}" --include='*.h' --include='*.cc' || true)
done
# tools/ holds the commands (C++ sources, txbatch-plot, completion, meson.build); experiment
# scripts live in scripts/experiments/.
while IFS= read -r f; do
  echo "layers: tools/$f is not a command's (experiment scripts go in scripts/experiments/)" >&2
  bad=1
done < <(git ls-files tools 2>/dev/null | sed 's#^tools/##' \
  | grep -vE '\.(cc|h)$|^(txbatch-plot|txbatch\.bash-completion|meson\.build)$' || true)
# engine/ runs cells and hands results back: what is printed, and the exit status, are the
# commands' (tools/session.cc), so engine/ neither prints nor parses a command line.
while IFS= read -r hit; do
  echo "layers: $hit prints (engine/ returns results and errors; tools/ prints)" >&2
  bad=1
done < <(grep -rnE '\b(std::|fmt::)?(v?f?printf|dprintf|puts|fputs|putchar|perror|fwrite|print|println)\(|std::(cout|cerr|clog)|\bwrite\((1|2|STD(OUT|ERR)_FILENO)\b|RTE_LOG\(|rte_log\(|#include [<"]CLI/' \
  engine --include='*.h' --include='*.cc' | grep -vE '^[^:]*:[0-9]+:\s*//' || true)
# Product code's functions and files stay readable: a function over 120 lines, a file over 800
# (scripts/function_lengths.py reads past comments and strings; lambdas count as their
# function's lines).
product=()
while IFS= read -r f; do product+=("$f"); done < <(find "${layers[@]}" -name '*.cc' -o -name '*.h' \
  | sort)
if (( ${#product[@]} == 0 )); then
  echo "layers: no C++ file found under ${layers[*]} in $PWD" >&2
  bad=1
fi
long=$(python3 scripts/function_lengths.py 120 "${product[@]}") && lengths=0 || lengths=$?
(( lengths <= 1 )) || { echo "layers: scripts/function_lengths.py failed ($lengths)" >&2; bad=1; }
while read -r n at signature; do
  [[ -n $n ]] || continue
  echo "layers: $at ($signature) is $n lines, over 120 (split it by the steps it takes)" >&2
  bad=1
done <<<"$long"
while read -r n f; do
  [[ $f == total ]] && continue
  (( n > 800 )) || continue
  echo "layers: $f has $n lines, over 800 (split it by job)" >&2
  bad=1
done < <(wc -l "${product[@]}")
# Clang's thread-safety analysis is live (base/thread_annotations.h): a guarded member read under
# its lock compiles, the same read without it does not. Where clang is absent (the gcc build's
# machine may lack it) it is said, not passed silently.
safety="the lock annotations are checked (clang's -Wthread-safety refuses a breach of a guard or of the order)"
if command -v clang++ >/dev/null; then
  probe=(clang++ -std=c++20 -I. -fsyntax-only -Wthread-safety -Wthread-safety-beta
    -Werror=thread-safety tests/link/thread_safety_probe.cc)
  if ! out=$("${probe[@]}" 2>&1); then
    echo "layers: tests/link/thread_safety_probe.cc does not compile as it stands: $out" >&2
    bad=1
  fi
  if out=$("${probe[@]}" -DBREACH 2>&1) || [[ $out != *"requires holding mutex 'mu'"* ]]; then
    echo "layers: clang let a guarded member be read without its lock (-DBREACH): $out" >&2
    bad=1
  fi
  if out=$("${probe[@]}" -DBREACH_ORDER 2>&1) || [[ $out != *"must be acquired before"* ]]; then
    echo "layers: clang let two locks be taken out of their order (-DBREACH_ORDER): $out" >&2
    bad=1
  fi
else
  safety="clang++ is not installed here: the lock annotations were not checked"
fi
for program in "${floor_programs[@]}"; do
  if ! "$program"; then
    echo "layers: $program (a floor linked with only the floors below it) did not run" >&2
    bad=1
  fi
done
linked="${#floor_programs[@]} floors link without those above them"
(( ${#floor_programs[@]} > 0 )) || linked="the floors' link programs are meson's (tests/link): not run here"
(( bad == 0 )) &&
  echo "layers: $linked;" \
    "every include points down or sideways; tools/ holds commands only; engine/ prints nothing; no product function over 120 lines or file over 800; $safety"
exit "$bad"
