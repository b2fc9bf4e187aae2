#!/usr/bin/env bash
# Mutation testing of one module with mutmut (developer command, not CI: minutes per module on 2 cores).
#
#   bash scripts/mutation.sh MODULE                 # a preset below: ops, spec, torch_op, deform, fusion, decompose,
#                                                   # cache, engine, validate, efficient_nms, cli, profiles, precision
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
# Environment: VENV (default .venv), JOBS (parallel mutants, default 2), SURVIVORS=1 (re-run only the logic mutants the
# last run of this preset did not kill, with the current tests, keeping every other result: minutes instead of a full
# run; the module must be unchanged; log and message survivors keep their earlier status), ONLY='GLOB ...' (with
# SURVIVORS=1: only the survivors whose names match, e.g. ONLY='*_prepare* *_decompose*').
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
        spec|torch_op)  # OpSpec (ops/spec.py) / CustomOp (ops/_torch_op.py): definitions made inside tests
                   # (test_user_defined_op), every op's call path, checks,
                   # decomposition on hand-built nodes; exporters only in the user-op tests (the rest take minutes a run);
                   # no torch.compile test: dynamo cannot trace mutmut's trampolines
                   t=tests/ops
                   f=torchtrt_ext/ops/spec.py; [ "$1" = torch_op ] && f=torchtrt_ext/ops/_torch_op.py
                   echo "$f|$t/test_user_defined_op.py $t/test_tensorrt_provided_op.py $t/test_deform_conv2d_graphs.py tests/passes/test_decompose.py $t/test_l2norm.py::test_eager_matches_normalize $t/test_l2norm.py::test_bad_attributes $t/test_l2norm.py::test_unknown_attribute $t/test_l2norm.py::test_bad_inputs $t/test_l2norm.py::test_gradient_matches_normalize $t/test_l2norm.py::test_export_emits_one_plugin_node[legacy] $t/test_efficient_nms.py::test_eager_matches_reference $t/test_efficient_nms.py::test_empty_inputs_give_fixed_size_zeros $t/test_efficient_nms.py::test_asking_for_gradients_raises $t/test_efficient_nms.py::test_bad_inputs_raise_before_any_work $t/test_efficient_nms.py::test_bad_attributes_raise $t/test_efficient_nms.py::test_mixed_dtypes_raise $t/test_deform_conv2d.py::test_bad_attributes $t/test_deform_conv2d.py::test_bad_shapes $t/test_deform_conv2d.py::test_module_checks_attributes_at_construction $t/test_call_overhead.py::test_prepare_runs_once_per_signature $t/test_call_overhead.py::test_parameters_are_checked_once_too $t/test_call_overhead.py::test_new_attribute_types_are_checked_after_a_cached_call $t/test_call_overhead.py::test_l2norm_errors_unchanged_after_a_cached_call $t/test_call_overhead.py::test_a_missing_kernel_library_falls_back_to_the_math_with_one_warning $t/test_call_overhead.py::test_deform_conv2d_errors_unchanged_after_a_cached_call $t/test_call_overhead.py::test_a_dispatch_mode_records_the_op_after_a_cached_call $t/test_call_overhead.py::test_vmap_over_the_op_matches_the_batched_call $t/test_call_overhead.py::test_forward_mode_ad_is_refused_not_silently_dropped $t/test_call_overhead.py::test_the_float32_check_agrees_with_numpy" ;;
        deform)    # eager math against the loop reference, checks (also beside symbolic dims), the decomposition on
                   # hand-built nodes, the shape rule on tensorrt.plugin's shape expressions, one legacy export (the
                   # dynamo exports take minutes a run); the torchvision branch through a stand-in: PyPI's torchvision
                   # is a CUDA build that does not import with the CPU torch (one built for the venv's torch adds the
                   # real-library test)
                   t=tests/ops/test_deform_conv2d.py
                   echo "torchtrt_ext/ops/deform_conv2d.py|$t::test_eager_matches_loop_reference $t::test_torchvision_is_used_where_it_imports $t::test_the_torchvision_branch_passes_every_argument $t::test_border_rules_point_by_point $t::test_float32_math_keeps_its_accuracy_on_wide_images $t::test_decomposition_keeps_float32_accuracy_on_wide_images $t::test_low_precision $t::test_meta_tensors_get_the_eager_output_shape $t::test_a_symbolic_dim_is_traced_without_guards $t::test_bad_concrete_dims_are_refused_beside_symbolic_ones $t::test_gradient_flows_to_every_input $t::test_bad_attributes $t::test_bad_shapes $t::test_a_mask_without_bias_exports_a_zero_bias_not_a_hole $t::test_non_tensor_inputs_are_named $t::test_module_checks_attributes_at_construction $t::test_export_emits_one_node[legacy] $t::test_decomposition_with_dynamic_spatial_size[legacy] tests/ops/test_deform_conv2d_graphs.py tests/plugins/test_python_plugin_deform_conv2d.py tests/ops/test_call_overhead.py::test_deform_conv2d_errors_unchanged_after_a_cached_call" ;;
        fusion)    echo "torchtrt_ext/passes/fuse_l2norm.py|tests/passes/test_fuse_l2norm_graphs.py" ;;
        decompose) echo "torchtrt_ext/passes/decompose.py|tests/passes/test_decompose.py" ;;
        cache)     # the key of a model over protobuf's 2 GiB limit (graph and weights hashed apart) in test_external_data.py
                   echo "torchtrt_ext/cache.py|tests/test_cache.py tests/test_cache_readonly.py tests/test_runtime_host_code.py tests/test_external_data.py::test_the_cache_key_depends_on_the_external_weights" ;;
        engine)    echo "torchtrt_ext/backend/engine.py|tests/backend/test_engine.py" ;;  # the file format, stand-in plans
        validate)  # all but the two dynamo exports (12 s a mutant); the legacy export of an L2Norm model stays; the
                   # onnxruntime worker's crash, retry and refusal paths and the fp16/bf16 tolerances
                   t=tests/test_validate.py
                   echo "torchtrt_ext/validate.py|$t::test_identical_models_pass_with_zero_error $t::test_mismatch_names_the_output_and_the_min_atol $t::test_shape_is_checked_first $t::test_nan_in_candidate_fails $t::test_precision_defaults $t::test_candidate_errors_are_reported_not_raised $t::test_bad_arguments $t::test_inputs_none_without_shapes_says_what_to_pass $t::test_engine_metadata_gives_input_shapes_and_the_gpu $t::test_the_report_table_says_per_output_what_was_compared $t::test_the_report_as_json_is_strict_json $t::test_check_names_every_failed_output_or_the_error $t::test_format_table_aligns_columns $t::test_inputs_are_a_tensor_or_a_sequence_of_tensors $t::test_onnx_runtime_module_of_a_path_or_a_model $t::test_random_like_keeps_shape_dtype_and_the_examples_value_range $t::test_later_trials_draw_new_inputs_of_the_examples_kind $t::test_inputs_none_takes_shapes_and_dtypes_from_the_onnx_graph $t::test_engine_inputs_outside_the_profile_take_their_exported_dims $t::test_the_precision_comes_from_the_candidate_or_its_outputs $t::test_describe_names_what_was_compared $t::test_the_same_non_finite_values_at_the_same_places_match $t::test_non_finite_values_that_differ_fail_naming_the_first $t::test_cosine_and_relative_error_on_zero_and_small_tensors $t::test_integer_outputs_compare_exactly_whatever_the_tolerance $t::test_an_output_that_is_not_a_tensor_fails $t::test_each_model_runs_on_its_own_copy_of_the_inputs $t::test_onnx_paths_and_models_are_run_by_onnxruntime $t::test_onnx_runtime_module_checks_what_it_is_given $t::test_what_the_report_records_per_output $t::test_a_candidate_that_raises_ends_the_trials $t::test_the_default_seed_is_0 $t::test_the_seed_alone_draws_the_inputs $t::test_an_onnx_input_of_another_type_needs_inputs_given $t::test_engine_metadata_without_profiles_gives_the_exported_dims $t::test_random_like_draws_bools_from_the_generator_on_the_examples_device $t::test_random_input_draws_each_kind_in_its_range_from_the_generator $t::test_onnx_runtime_module_runs_in_a_worker_or_in_this_process $t::test_the_report_names_onnx_models_by_file_and_modules_by_class $t::test_an_output_missing_from_one_trial_is_compared_in_the_others $t::test_a_negative_rtol_is_named $t::test_as_callable_runs_onnx_files_in_a_worker_and_refuses_other_paths $t::test_without_onnxruntime_the_error_says_what_to_install tests/test_validate_shapes.py tests/test_validate_onnxruntime_crash.py tests/test_validate_tolerances.py" ;;
        efficient_nms)  # eager math against the brute-force reference, checks, the decomposition on hand-built nodes
                   # in onnxruntime and one legacy export (the dynamo exports take minutes a run)
                   t=tests/ops/test_efficient_nms.py
                   echo "torchtrt_ext/ops/efficient_nms.py|$t::test_eager_matches_reference $t::test_many_candidates_span_several_blocks_and_k_cuts_them $t::test_background_class_and_images_without_detections $t::test_boundary_cases_sit_on_their_boundary $t::test_eager_on_boundary_cases_matches_reference $t::test_decomposition_on_boundary_cases_matches_reference $t::test_decomposition_matches_reference $t::test_empty_inputs_give_fixed_size_zeros $t::test_half_inputs_give_the_reference_on_their_values $t::test_asking_for_gradients_raises $t::test_bad_inputs_raise_before_any_work $t::test_bad_attributes_raise $t::test_mixed_dtypes_raise $t::test_export_emits_one_efficientnms_trt_node[legacy] $t::test_decomposition_keeps_half_outputs_half tests/passes/test_decompose.py" ;;
        cli)       # the command in-process (main() is what the console script returns); the subprocess tests reach no
                   # mutant's trampoline in this process, so mutmut does not pick them: test_cli_in_process.py runs
                   # test_cli.py's subprocess loop in-process. Hours on 2 cores (1800 mutants, most reach main())
                   t=tests/cli
                   echo "torchtrt_ext/cli/*.py|$t/test_main.py $t/test_cli.py $t/test_cli_safety.py $t/test_bench.py $t/test_targets.py $t/test_cli_in_process.py $t/test_cli_build_flags.py $t/test_cli_integer_inputs.py" ;;
        profiles)  echo "torchtrt_ext/backend/profiles.py|tests/backend/test_profiles.py" ;;
        precision) echo "torchtrt_ext/passes/precision.py|tests/passes/test_precision_graphs.py tests/passes/test_precision_guards.py::test_tiny_constants_stay_nonzero_in_fp16" ;;  # hand-built graphs: no exporter
        *) return 1 ;;
    esac
}

if [ $# -eq 0 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
if [ $# -eq 1 ]; then
    spec=$(preset "$1") || { echo "mutation.sh: no preset '$1'. Remedy: one of ops spec torch_op deform fusion decompose cache engine validate efficient_nms cli profiles precision, or give GLOB TESTS..." >&2; exit 2; }
    name=$1 glob=${spec%%|*} tests=${spec#*|}
else
    glob=$1; shift
    tests="$*"
    name=$(basename "${glob%.py}" | tr -c 'A-Za-z0-9_\n' '_')
fi
"$VENV/bin/python" -c "import mutmut" 2>/dev/null || "$VENV/bin/python" -m pip install -q "mutmut==3.8.1"
ls $glob >/dev/null 2>&1 || { echo "mutation.sh: no file matches $glob. Remedy: check where the module lives now" >&2; exit 2; }

work=build/mutation/$name
survivors=()
if [ "${SURVIVORS:-0}" = 1 ]; then
    [ -f "$work/report.txt" ] || { echo "mutation.sh: no earlier run in $work. Remedy: run without SURVIVORS=1 first" >&2; exit 2; }
    for f in $glob; do
        cmp -s "$f" "$work/$f" || { echo "mutation.sh: $f changed since the last run (mutants are numbered per source). Remedy: run without SURVIVORS=1" >&2; exit 2; }
    done
    mapfile -t survivors < <(sed -n 's/^\[logic\] [a-z_ ]*: \([^ ]*\)$/\1/p' "$work/report.txt")
    if [ -n "${ONLY:-}" ]; then  # only the survivors whose names match one of these globs
        kept=()
        set -f  # the globs match mutant names, not files
        for m in "${survivors[@]}"; do for g in $ONLY; do [[ $m == $g ]] && { kept+=("$m"); break; }; done; done
        set +f
        survivors=("${kept[@]}")
    fi
    rm -rf "$work/tests"  # the current tests replace the earlier ones; the mutants and their results stay
    # mutmut forgets every result when the test selection changes: keep the earlier ones to restore after the run
    (cd "$work" && find mutants -name '*.meta' | tar -cf earlier_results.tar -T -)
else
    rm -rf "$work"
fi
mkdir -p "$work"
# a private copy: mutmut reads its configuration from the working folder and writes mutants/ there
tar --exclude __pycache__ -cf - torchtrt_ext tests pyproject.toml setup.py | tar -xf - -C "$work"
# the copy is not beside /work/shared: tell the trt_headers marker where setup.py finds the headers from here
TORCHTRT_EXT_TRT_INCLUDE=${TORCHTRT_EXT_TRT_INCLUDE:-$("$VENV/bin/python" -c 'import setup; print(setup.find_trt_include()[0] or "")')}
export TORCHTRT_EXT_TRT_INCLUDE
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
    # no output capture: mutmut runs pytest several times in one process, and torch's log handlers keep the stream
    # they were made with (pytest's capture file of the first run, closed after it), which the exporter's output
    # capture flushes: every export of a later run would fail with "I/O operation on closed file"
    echo "    -s"
} > "$work/setup.cfg"

cd "$work"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # forked children share the 2 cores; no thread pools per child
started=$(date +%s)
"$VENV/bin/mutmut" run --max-children "$JOBS" "${survivors[@]}" > run.log 2>&1 || { tail -40 run.log; exit 1; }
if [ ${#survivors[@]} -gt 0 ]; then  # a mutant not re-run keeps its earlier result (tests were only added since)
    mkdir -p earlier && tar -xf earlier_results.tar -C earlier
    "$VENV/bin/python" - <<'EOF'
import json
from pathlib import Path

for old in Path("earlier").rglob("*.meta"):
    new = Path(*old.parts[1:])
    earlier, now = json.loads(old.read_text()), json.loads(new.read_text())
    for key, code in now["exit_code_by_key"].items():
        if code is None:
            now["exit_code_by_key"][key] = earlier["exit_code_by_key"].get(key)
    new.write_text(json.dumps(now, indent=4))
EOF
    rm -rf earlier earlier_results.tar
fi
echo "module $glob, tests: $tests ($(( $(date +%s) - started )) s${survivors:+, re-ran the ${#survivors[@]} survivors of the last run})"
"$VENV/bin/python" ../../../scripts/mutation_report.py | tee report.txt
