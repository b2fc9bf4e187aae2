#!/usr/bin/env bash
# Mutation testing of one module with mutmut (developer command, not CI: minutes per module on 2 cores).
#
#   bash scripts/mutation.sh MODULE                 # a preset below: ops, fusion, decompose, cache, profiles, precision
#   bash scripts/mutation.sh 'torchtrt_ext/x.py' tests/test_x.py ...   # any source glob and the tests that cover it
#
# mutmut copies the package into build/mutation/<name>/mutants/, runs the selected tests once to learn which test
# reaches which function, then runs each mutant in a forked process (torch is imported once) with only those tests.
# Prints killed/total (all mutants, and the logic ones without message wording and logging: see
# scripts/mutation_report.py) and every mutant not killed with its diff, also kept in build/mutation/<name>/report.txt.
# Run it after changing a listed module; every listed module should stay at >= 90% of its logic mutants killed.
# Why mutmut (3.8): each mutant runs in a process forked after torch is imported once, with only the tests that reach
# the mutated function; cosmic-ray starts a fresh test process per mutant (seconds of torch import each), and
# pytest-gremlins is younger and less used. Presets select fast tests (the exporter-driven fusion tests take minutes).
# Environment: VENV (default .venv), JOBS (parallel mutants, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(cd "${VENV:-.venv}" && pwd)
JOBS=${JOBS:-2}

preset() {  # name -> "source glob|test paths"
    case "$1" in
        ops)       # the L2Norm definition: eager numerics, attribute/input checks, and the decomposition on onnxruntime
                   # (hand-built nodes in test_decompose.py; the exporter tests of test_l2norm.py take minutes a run)
                   t=tests/ops/test_l2norm.py
                   echo "torchtrt_ext/ops/l2norm.py|$t::test_eager_matches_normalize $t::test_zero_vector_gives_zeros $t::test_the_defaults_are_dim_1_and_eps_1e_6 $t::test_float16_accumulates_in_float32 $t::test_bfloat16_results_are_rounded_once $t::test_every_dim_of_the_allowed_range_works $t::test_shape_inference_passes_the_input_shape_and_type_through $t::test_gradient_matches_normalize $t::test_bad_attributes $t::test_unknown_attribute $t::test_module_checks_attributes_at_construction $t::test_bad_inputs $t::test_a_non_default_eps_clamps_small_norms tests/passes/test_decompose.py" ;;
        spec)      echo "torchtrt_ext/ops/_spec.py|tests/ops" ;;
        deform)    echo "torchtrt_ext/ops/deform_conv2d.py|tests/ops/test_deform_conv2d.py" ;;
        fusion)    echo "torchtrt_ext/passes/fuse_l2norm.py|tests/passes/test_fuse_l2norm_graphs.py" ;;
        decompose) echo "torchtrt_ext/passes/decompose.py|tests/passes/test_decompose.py" ;;
        cache)     echo "torchtrt_ext/cache.py|tests/backend/test_cache.py tests/backend/test_host_code.py" ;;
        profiles)  echo "torchtrt_ext/backend/profiles.py|tests/backend/test_profiles.py" ;;
        precision) echo "torchtrt_ext/passes/precision.py|tests/passes/test_precision_graphs.py tests/passes/test_precision_guards.py::test_tiny_constants_stay_nonzero_in_fp16" ;;  # hand-built graphs: no exporter
        *) return 1 ;;
    esac
}

if [ $# -eq 0 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
if [ $# -eq 1 ]; then
    spec=$(preset "$1") || { echo "mutation.sh: no preset '$1'. Remedy: one of ops spec deform fusion decompose cache profiles precision, or give GLOB TESTS..." >&2; exit 2; }
    name=$1 glob=${spec%%|*} tests=${spec#*|}
else
    glob=$1; shift
    tests="$*"
    name=$(basename "${glob%.py}" | tr -c 'A-Za-z0-9_\n' '_')
fi
"$VENV/bin/python" -c "import mutmut" 2>/dev/null || "$VENV/bin/python" -m pip install -q "mutmut==3.8.1"
ls $glob >/dev/null 2>&1 || { echo "mutation.sh: no file matches $glob. Remedy: check where the module lives now" >&2; exit 2; }

work=build/mutation/$name
rm -rf "$work"
mkdir -p "$work"
# a private copy: mutmut reads its configuration from the working folder and writes mutants/ there
tar --exclude __pycache__ -cf - torchtrt_ext tests pyproject.toml setup.py | tar -xf - -C "$work"
{
    echo "[mutmut]"
    echo "source_paths = torchtrt_ext"
    echo "only_mutate = $glob"
    echo "also_copy ="
    echo "    setup.py"  # the trt_headers marker asks setup.py where the TensorRT headers are
    echo "pytest_add_cli_args_test_selection ="
    for t in $tests; do echo "    $t"; done
    echo "pytest_add_cli_args ="
    echo "    -q"
    echo "    -p no:cacheprovider"
} > "$work/setup.cfg"

cd "$work"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # forked children share the 2 cores; no thread pools per child
started=$(date +%s)
"$VENV/bin/mutmut" run --max-children "$JOBS" > run.log 2>&1 || { tail -40 run.log; exit 1; }
echo "module $glob, tests: $tests ($(( $(date +%s) - started )) s)"
"$VENV/bin/python" ../../../scripts/mutation_report.py | tee report.txt
