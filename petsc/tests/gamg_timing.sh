#!/usr/bin/env bash
# The GAMG setup time (PCSetUp in -log_view, slowest rank) of PETSc's own
# tutorials ex45 (3-D Laplacian on a DMDA) and ex56 (3-D elasticity), with
# plain aij and with aijrusparse (one rusparse thread per rank), on 1, 2 and 4
# ranks (ex56: 1, 2 and 8, as it splits its cube among a cube number of
# ranks, or 2): the median of `repeat` runs of each, printed as a markdown
# table.
# The two types run alternately, which goes first alternating too, so drift
# on the machine hits both alike.
#
#   gamg_timing.sh <build dir with petsc/tests/petsc_ex45 and _ex56> [repeat]
#
#   e.g.     cmake -S . -B target/cmake-build -DCMAKE_BUILD_TYPE=Release -DRUSPARSE_PETSC=ON
#            cmake --build target/cmake-build -j2
#            petsc/tests/gamg_timing.sh target/cmake-build 3
set -euo pipefail
build=$1
repeat=${2:-3}
plugin="$build/petsc/librusparse_petsc.so"
mpiexec=(mpiexec --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpiexec+=(--allow-run-as-root)

# ex45: 65^3 grid points; ex56: 3 x 40^3 unknowns (-ne 39), the options of
# its GAMG test without the second solve.
ex45=(-da_grid_x 65 -da_grid_y 65 -da_grid_z 65 -pc_type gamg -ksp_rtol 1e-8)
ex56=(-ne 39 -alpha 1.e-3 -ksp_type cg -pc_type gamg -pc_gamg_type agg -pc_gamg_agg_nsmooths 1
      -pc_gamg_coarse_eq_limit 1000 -mg_levels_ksp_type chebyshev -mg_levels_pc_type sor
      -use_mat_nearnullspace -pc_gamg_use_sa_esteig 0 -mg_levels_esteig_ksp_max_it 10)

# PCSetUp's time (the slowest rank's) from -log_view.
setup_time() { awk '$1 == "PCSetUp" && !done { print $4; done = 1 }'; }

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "| tutorial | ranks | aij PCSetUp (s) | aijrusparse PCSetUp (s) | aij / aijrusparse |"
echo "|---|---:|---:|---:|---:|"
for ex in ex45 ex56; do
    program="$build/petsc/tests/petsc_$ex"
    if [ "$ex" = ex45 ]; then args=("${ex45[@]}"); type_option=-dm_mat_type; else args=("${ex56[@]}"); type_option=-mat_type; fi
    ranks=(1 2 4); [ "$ex" = ex56 ] && ranks=(1 2 8)
    for np in "${ranks[@]}"; do
        plain=() rs=()
        for ((r = 0; r < repeat; r++)); do
            for turn in 0 1; do
                if [ $(((r + turn) % 2)) -eq 0 ]; then
                    plain+=("$("${mpiexec[@]}" -n "$np" "$program" "${args[@]}" "$type_option" aij -log_view | setup_time)")
                else
                    rs+=("$("${mpiexec[@]}" -n "$np" "$program" "${args[@]}" "$type_option" aijrusparse \
                            -dll_append "$plugin" -mat_rusparse_threads 1 -log_view | setup_time)")
                fi
            done
        done
        a=$(printf '%s\n' "${plain[@]}" | median)
        b=$(printf '%s\n' "${rs[@]}" | median)
        printf '| %s | %d | %.3f | %.3f | %.2f |\n' "$ex" "$np" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
    done
done
