# tests/lib.sh: helpers for the shell tests (sourced). Each test runs in its own
# temporary directory, removed on exit.
set -eu
: "${TB_BUILDDIR:?run this test through make check}"
: "${TB_TEST_PLUGINS:?run this test through make check}"
TRAINBIG="$TB_BUILDDIR/trainbig"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainbig-sh-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
checks=0
# The plugin ABI of this source tree, and the one a plugin of the next major would have.
abi_major=$(sed -n 's/^#define TB_ABI_MAJOR //p' "$TB_SRCDIR/include/trainbig/plugin.h")
abi_minor=$(sed -n 's/^#define TB_ABI_MINOR //p' "$TB_SRCDIR/include/trainbig/plugin.h")
ABI="$abi_major.$abi_minor"
NEXT_MAJOR_ABI="$((abi_major + 1)).$abi_minor"

fail() {
    echo "FAIL: $*" >&2
    if [ -f "$tmp/out" ]; then echo "--- stdout:" >&2; cat "$tmp/out" >&2; fi
    if [ -f "$tmp/err" ]; then echo "--- stderr:" >&2; cat "$tmp/err" >&2; fi
    exit 1
}

# expect_exit CODE COMMAND...: runs COMMAND, stdout to $tmp/out, stderr to $tmp/err.
expect_exit() {
    want=$1
    shift
    set +e
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    set -e
    checks=$((checks + 1))
    [ "$got" -eq "$want" ] || fail "exit status $got, expected $want: $*"
}

# expect_in FILE TEXT...: FILE contains each TEXT (fixed strings).
expect_in() {
    f=$1
    shift
    for t in "$@"; do
        grep -F -q -- "$t" "$f" || fail "'$t' not found in $(basename "$f")"
    done
}

# expect_not_in FILE TEXT: FILE does not contain TEXT.
expect_not_in() {
    ! grep -F -q -- "$2" "$1" || fail "'$2' unexpectedly found in $(basename "$1")"
}

# expect_errors FILE N: FILE has exactly N error lines ("trainbig: error: ..."); log
# lines around them do not count.
expect_errors() {
    n=$(grep -c '^trainbig: error: ' "$1" || true)
    [ "$n" -eq "$2" ] || fail "$(basename "$1") has $n error lines, expected $2"
}

# svg_texts FILE: the text of each <text> element of an SVG, one a line (PLplot's svg
# driver writes every character as a &#x..; reference). Needs perl.
svg_texts() {
    perl -CO -0777 -ne 'while (/<text\b[^>]*>(.*?)<\/text>/sg) { my $t = $1; $t =~ s/<[^>]*>//g;
        $t =~ s/&#x([0-9a-fA-F]+);/chr(hex($1))/ge; $t =~ s/&lt;/</g; $t =~ s/&gt;/>/g; $t =~ s/&amp;/&/g;
        print "$t\n" }' "$1"
}
