#!/usr/bin/env bash
# Runs an unchanged PETSc program twice, with plain aij matrices and with
# aijrusparse (the plug-in loaded), and checks that the solver did the same:
# the same "iterations N" lines, the same residual norms (every number on
# the lines naming a residual, within 1e-6 relative), and that the
# aijrusparse run sent products through rusparse (RusparseSpGEMM count > 0
# in -log_view).
#
#   compare_solver.sh "<mpiexec and its flags>" <ranks> <program> <plug-in>
#                     <type option, e.g. -mat_type> [program options...]
set -euo pipefail
mpiexec=($1)
np=$2 program=$3 plugin=$4 type_option=$5
shift 5

run() { "${mpiexec[@]}" -n "$np" "$program" "$@"; }
aij=$(run "$@" "$type_option" aij)
rs=$(run "$@" "$type_option" aijrusparse -dll_append "$plugin" -log_view)

residuals() { grep -E "Residual norm|\|b-Ax\|" | sed 's/^ *//' || true; }
iterations() { grep -E "iterations [0-9]+" || true; }

fail=0
if [ -z "$(iterations <<<"$aij")" ]; then
    echo "no 'iterations N' line in the aij run (give -ksp_converged_reason)"; fail=1
elif [ "$(iterations <<<"$aij")" != "$(iterations <<<"$rs")" ]; then
    echo "iterations differ:"; diff <(iterations <<<"$aij") <(iterations <<<"$rs") || true; fail=1
fi
if ! paste -d '\n' <(residuals <<<"$aij") <(residuals <<<"$rs") | awk '
    NR % 2 == 1 { a = $0; next }
    {
        n = split(a, x, /[ =,|\/]+/); m = split($0, y, /[ =,|\/]+/)
        if (n != m) { print "residual lines differ: [" a "] [" $0 "]"; bad = 1; next }
        for (k = 1; k <= n; k++) {
            if (x[k] == y[k]) continue
            if (x[k] !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ || y[k] !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) { print "residual lines differ: [" a "] [" $0 "]"; bad = 1; break }
            d = x[k] - y[k]; if (d < 0) d = -d; s = x[k] < 0 ? -x[k] : x[k]
            if (d > 1e-6 * s) { print "residuals differ: [" a "] [" $0 "]"; bad = 1; break }
        }
    }
    END { exit bad }'; then
    fail=1
fi
if [ "$(residuals <<<"$aij" | wc -l)" -ne "$(residuals <<<"$rs" | wc -l)" ] || [ -z "$(residuals <<<"$aij")" ]; then
    echo "the runs print different numbers of residual lines (or none)"; fail=1
fi
count=$(awk '$1 == "RusparseSpGEMM" { n += $2 } END { print n + 0 }' <<<"$rs")
if [ "$count" -le 0 ]; then
    echo "no RusparseSpGEMM event in the aijrusparse run's -log_view"; fail=1
fi
printf '%s\n' "$(iterations <<<"$rs")" "$(residuals <<<"$rs" | tail -n 2)"
echo "RusparseSpGEMM products (rank 0, all stages): $count"
if [ "$fail" -ne 0 ]; then
    echo "--- aij run"; echo "$aij"; echo "--- aijrusparse run"; echo "$rs" | head -n 80
    exit 1
fi
echo "OK: same iterations and residuals with aij and aijrusparse"
