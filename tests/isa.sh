# tests/isa.sh: the kernel, executor and trainer suites again on one forced ISA path of the
# cpu backend (sourced by tests/isa-*.test with ISA set). `make check` runs them once as
# they are (the best path this CPU has) and once per lower path here, so every path the
# machine can execute is tested. Each path caps oneDNN too: the backend does that for a
# forced ISA (plugins/backends/cpu/cpu_isa.c), and DNNL_MAX_CPU_ISA says the same here.
. "${TB_SRCDIR:-.}/tests/lib.sh"
: "${ISA:?}"
case $ISA in
avx2) flags="avx2 fma" dnnl=AVX2 ;;
scalar) flags="" dnnl=SSE41 ;;
*) fail "unknown ISA $ISA" ;;
esac
for f in $flags; do
    grep -qw "$f" /proc/cpuinfo 2>/dev/null || { echo "this CPU has no $f: the $ISA path cannot run here"; exit 77; }
done
passed=0
for suite in check_backend check_ops check_conv check_exec check_trainer; do
    log="$tmp/$suite.log"
    TRAINBIG_CPU_ISA=$ISA DNNL_MAX_CPU_ISA=$dnnl "$TB_BUILDDIR/tests/$suite" >"$log" 2>&1 || {
        cat "$log" >&2
        fail "$suite on the $ISA path"
    }
    grep -q "Failures: [1-9]\|Errors: [1-9]" "$log" && fail "$suite on the $ISA path reported failures"
    tail -n 1 "$log"
    passed=$((passed + 1))
done
echo "$passed passed, 0 failed"
