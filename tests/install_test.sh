#!/usr/bin/env bash
# `meson install` installs txbatch as a Debian tool: the binary, a man page per command that
# man(1) renders (from the command's own --help), bash completion that completes commands and
# each command's options, and the guides. Into a scratch DESTDIR: nothing on the machine is
# touched.
#   install_test.sh BUILD_DIR
set -euo pipefail
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root=$dest$prefix
bin=$root/bin/txbatch
[[ -x $bin ]] || fail "no binary at $bin"
# Each program's output is read whole before grep looks at it: `prog | grep -q` under pipefail
# fails whenever grep, having matched, closes the pipe before prog has written the rest (SIGPIPE).
version=$("$bin" --version) || fail "--version exited $?"
grep -q '^txbatch [0-9.]* (DPDK [0-9.]*)$' <<<"$version" || fail "--version: $version"
# The figures' program beside it, where sweep --out looks, and it runs (its --help).
[[ -x $root/bin/txbatch-plot ]] || fail "no txbatch-plot beside the binary"
plot_help=$("$root/bin/txbatch-plot" --help) || fail "txbatch-plot --help exited $?"
grep -q 'results.json' <<<"$plot_help" || fail "txbatch-plot --help"

man1=$(find "$root" -path '*/man1' -type d | head -1)
[[ -n $man1 ]] || fail "no man1 folder under $root"
for page in txbatch run compare sweep tune calibrate report bridge respond sink lab; do
  file=$man1/$page.1
  [[ $page == txbatch ]] || file=$man1/txbatch-$page.1
  [[ -f $file ]] || fail "no man page $file"
  text=$(MANWIDTH=100 man -l "$file" 2>&1) || fail "man -l $file failed: $text"
  for section in NAME SYNOPSIS OPTIONS "SEE ALSO"; do
    grep -q "^$section" <<<"$text" || fail "$file has no $section section"
  done
done
# A command's page holds that command's options (its own --help): run's --duration, sink's --port.
run_page=$(MANWIDTH=100 man -l "$man1/txbatch-run.1") || fail "man -l txbatch-run.1 exited $?"
sink_page=$(MANWIDTH=100 man -l "$man1/txbatch-sink.1") || fail "man -l txbatch-sink.1 exited $?"
grep -q -- '--duration' <<<"$run_page" || fail "txbatch-run(1) lacks --duration"
grep -q -- '--port' <<<"$sink_page" || fail "txbatch-sink(1) lacks --port"
grep -q 'txbatch-run - ' <<<"$run_page" || fail "txbatch-run(1)'s NAME"

completion=$root/share/bash-completion/completions/txbatch
[[ -f $completion ]] || fail "no bash completion at $completion"
# Complete as bash would: the installed binary answers --help.
complete_words() {
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
    _txbatch
    printf "%s\n" "${COMPREPLY[@]}"' _ "$completion" "$@"
}
# Whether completing the words after `offers WORD` gives WORD, read whole first (as above: CI
# saw "lacks fq_codel" with fq_codel offered, grep gone before printf wrote "none").
offers() {
  local want=$1 words
  shift
  words=$(complete_words "$@") || fail "completing '$*' exited $?"
  grep -qx -- "$want" <<<"$words"
}
offers run "$bin" ru || fail "txbatch ru<TAB> does not give run"
offers --duration "$bin" run --dur || fail "txbatch run --dur<TAB>"
offers --port "$bin" sink --po || fail "txbatch sink --po<TAB>"
offers nolock "$bin" run --sync no || fail "txbatch run --sync no<TAB>"
offers up "$bin" lab u || fail "txbatch lab u<TAB>"
# Every emulated model and driver form the help's Drivers block names, and every qdisc.
driver_words=$(complete_words "$bin" run --driver "")
for form in $("$bin" run --help | sed -n '/^Drivers:/,$p' | grep -oE '^  (emu:[a-z0-9-]+|ethdev-pair:(memif)?|ethdev:|verbs:)'); do
  grep -qx -- "${form%%DEVARGS}" <<<"$driver_words" || fail "txbatch run --driver <TAB> lacks $form"
done
for qdisc in pfifo_fast pfifo fq_codel none; do
  offers "$qdisc" "$bin" run --qdisc "" || fail "txbatch run --qdisc <TAB> lacks $qdisc"
done
# Only the options the command has, not EAL's words its help mentions.
[[ -z $(complete_words "$bin" run --log) ]] || fail "txbatch run --log<TAB> offers EAL's --log-level"
[[ -z $(complete_words "$bin" run -- --no) ]] || fail "words after -- are EAL's, not completed"

for doc in README.md usage.md output.md design.md drivers/emu.md; do
  [[ -f $root/share/doc/txbatch/$doc ]] || fail "no $doc in share/doc/txbatch"
done
echo "install_test: binary, $(ls "$man1" | wc -l) man pages, completion and guides installed"
