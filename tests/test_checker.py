"""``start`` and ``check``: the checker tells a correct stage file from a subtly wrong one.

Every case is a small patch applied, at test time, to a file of ``steps/``
(so the cases follow later edits of the step files; a patch that no longer
applies fails loudly instead of testing nothing). The wrong files are the
mistakes that a learner makes; the correct ones are written differently
from ``steps/``. Each case runs the real checker (a child process per run)
with a shorter training record than the default, to keep the suite fast.
"""
import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from conftest import STEPS
from dezero_mini import cli
from dezero_mini.contracts import contracts_at, get_stage, stages
from dezero_mini.contracts.runner import OUTPUT_LIMIT, check_file
from dezero_mini.memory.stages import stage_path

BATCHES = "20"  # the default is 50 (as in test_stage_memory); 20 show every leak too


def step_text(number):
    return next(STEPS.glob(f"step{number:02d}_*.py")).read_text()


def patched(text, *edits):
    """``text`` with each ``(pattern, replacement, count)`` applied as a
    multi-line regular expression that must match exactly ``count`` times."""
    for pattern, replacement, count in edits:
        text, made = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        assert made == count, f"the patch {pattern!r} matched {made} times, not {count}"
    return text


# --- The cases ------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    stage: int   # checked against this stage
    base: int    # the step file that the patch starts from
    edits: tuple
    fails: frozenset = frozenset()  # the contracts that must fail (exactly these)


def _block(code):
    return textwrap.dedent(code).strip("\n")


DROP_BLOCK = r"^( *)if not retain_grad:\n\1    for output in f\.outputs:\n\1        output\(\)\.grad = None.*\n"
READ_GYS = r"^( *)(gys = \[output\(\)\.grad for output in f\.outputs\]\n)"

FREE_INPUTS = r"^( *)if not retain_graph:\n\1    f\.inputs = None.*\n"
FREED_CHECK = r"^( *)if f\.inputs is None:\n\1    raise RuntimeError\(\n(\1        .*\n)*\1    \)\n"

USING_CONFIG_CLASS = _block('''
    class using_config:
        """Set an attribute of Config inside a with-block; put the old value back after."""

        def __init__(self, name, value):
            self.name, self.value = name, value

        def __enter__(self):
            self.old_value = getattr(Config, self.name)
            setattr(Config, self.name, self.value)

        def __exit__(self, *exc_info):
            setattr(Config, self.name, self.old_value)
''') + "\n"

CASES = [
    # stage 01: the starting point leaks through its registry
    Case("registry_in_call_only", 1, 1, (
        (r"^ *REGISTRY\.variables\.append\(self\)\n", "", 1),
        (r"^( *)REGISTRY\.functions\.append\(self\)\n",
         r"\1REGISTRY.functions.append(self)\n\1REGISTRY.variables.extend(outputs)\n", 1))),
    Case("registry_removed", 1, 1, (
        (r"^ *REGISTRY\.(variables|functions)\.append\(self\)\n", "", 2),),
        fails=frozenset({"collector_cannot_free"})),
    # stage 02: delete the registry, keep the cycles
    Case("registry_left_empty", 2, 1, (
        (r"^ *REGISTRY\.(variables|functions)\.append\(self\)\n", "", 2),)),
    Case("registry_kept_for_functions", 2, 1, (
        (r"^ *REGISTRY\.variables\.append\(self\)\n", "", 1),),
        fails=frozenset({"collector_returns_to_floor", "collector_frees_framework_objects"})),
    # stage 03: weak references break the cycle
    Case("weakref_proxy_outputs", 3, 3, (
        (r"weakref\.ref\(output\)", "weakref.proxy(output)", 1),
        (r"output\(\)\.grad", "output.grad", 1),
        (r"self\.outputs\[0\]\(\)\.data", "self.outputs[0].data", 3))),
    Case("strong_reference_left_in_outputs", 3, 3, (
        (r"^( *)(self\.outputs = \[weakref\.ref\(output\) for output in outputs\].*\n)",
         r"\1\2\1self.output_variables = outputs  # for debugging\n", 1),),
        fails=frozenset({"live_objects_constant", "traced_bytes_flat",
                         "collector_finds_nothing"})),
    Case("weak_reference_on_the_wrong_side", 3, 2, (
        (r"^import itertools\n", "import itertools\nimport weakref\n", 1),
        (r"self\.creator = func", "self.creator = weakref.ref(func)", 1),
        (r"^( *)def push\(f\):\n", r"\1def push(f):\n\1    f = f() if f is not None else None\n", 1)),
        fails=frozenset({"leaf_gradients_are_right", "training_learns",
                         "keeps_intermediate_gradients"})),
    # stage 04: drop intermediate gradients once they are passed on
    Case("gradients_dropped_right_after_reading", 4, 4, (
        (DROP_BLOCK, "", 1),
        (READ_GYS, r"\1\2\1if not retain_grad:  # gys holds them now\n"
                   r"\1    for output in f.outputs:\n\1        output().grad = None\n", 1))),
    Case("gradients_cleared_before_passed_on", 4, 4, (
        (DROP_BLOCK, "", 1),
        (READ_GYS, r"\1if not retain_grad:\n\1    for output in f.outputs:\n"
                   r"\1        output().grad = None\n\1\2", 1)),
        # backward raises (a Function gets None for its gradient), so every
        # contract that runs backward with the default fails; retain_grad=True works
        fails=frozenset(c.name for c in contracts_at(4)) - {"retain_grad_keeps_intermediate"}),
    Case("gradients_never_dropped", 4, 4, (
        (DROP_BLOCK, "", 1),),
        fails=frozenset({"drops_intermediate_gradients", "backward_peak_below_stage03",
                         "retain_grad_true_costs_memory"})),
    Case("retain_grad_true_ignored", 4, 4, (
        (r"if not retain_grad:", "if True:", 1),),
        fails=frozenset({"retain_grad_keeps_intermediate", "retain_grad_true_costs_memory"})),
    # stage 05: no_grad builds no graph
    Case("using_config_as_a_class", 5, 5, (
        (r"^@contextlib\.contextmanager\ndef using_config\(.*\n(    .*\n|\n(?=    ))*",
         USING_CONFIG_CLASS.replace("\\", "\\\\"), 1),)),
    Case("graph_built_anyway", 5, 5, (
        (r"if Config\.enable_backprop:", 'if hasattr(Config, "enable_backprop"):', 1),),
        fails=frozenset({"no_grad_builds_no_graph", "inference_holds_few_activations"})),
    Case("config_not_restored_after_an_exception", 5, 5, (
        (r"^    try:\n        yield\n    finally:.*\n        (setattr\(Config, name, old_value\))",
         r"    yield\n    \1", 1),),
        fails=frozenset({"no_grad_restores_after_exception"})),
    # stage 06: backward frees what each Function saved, as soon as its backward has run
    Case("freed_graph_found_when_reached", 6, 6, (
        (FREED_CHECK, "", 1),
        (r"^( *)if f is not None and f not in seen:\n",
         r"\g<0>\1    if f.inputs is None:  # freed by an earlier backward\n"
         r"\1        raise RuntimeError('backward: this graph was freed by an earlier backward(); '\n"
         r"\1                           'pass retain_graph=True to the first one to keep it')\n", 1))),
    Case("inputs_never_freed", 6, 6, (
        (FREE_INPUTS, "", 1),),
        fails=frozenset({"frees_saved_inputs_during_backward",
                         "holds_less_than_stage05_after_backward", "backward_peak_below_stage05",
                         "second_backward_is_a_clear_error", "retain_graph_allows_a_second_backward",
                         "retain_graph_true_keeps_the_activations"})),
    Case("inputs_freed_before_the_functions_backward", 6, 6, (
        (FREE_INPUTS, "", 1),
        (r"^( *)(gxs = f\.backward\(\*gys\)\n)",
         r"\1if not retain_graph:\n\1    f.inputs = None\n\1\2", 1)),
        # every backward raises (a Function reads its inputs in its backward), so
        # every contract that runs backward fails: all but stage 05's
        fails=frozenset(c.name for c in contracts_at(6) if c.stage != 5)),
    Case("leaf_arrays_freed", 6, 6, (
        (r"^( *)f\.inputs = None.*\n",
         r"\1for x in f.inputs:\n\1    if x.creator is None:\n"
         r"\1        x.data = None  # a leaf: no Function reads it again\n\1f.inputs = None\n", 1),),
        # the parameters lose their arrays: every contract that trains or reads
        # them after backward fails, parameters_keep_data_and_gradients by name
        fails=frozenset({"leaf_gradients_are_right", "training_learns", "live_objects_constant",
                         "traced_bytes_flat", "collector_finds_nothing",
                         "backward_peak_below_stage03", "holds_less_than_stage05_after_backward",
                         "backward_peak_below_stage05", "retain_graph_allows_a_second_backward",
                         "parameters_keep_data_and_gradients", "gradients_bit_identical_to_stage05",
                         "retain_graph_true_keeps_the_activations"})),
    Case("second_backward_skips_freed_functions", 6, 6, (
        (FREED_CHECK, r"\1if f.inputs is None:\n\1    continue  # done already\n", 1),),
        fails=frozenset({"second_backward_is_a_clear_error",
                         "retain_graph_allows_a_second_backward"})),
    Case("retain_graph_true_ignored", 6, 6, (
        (r"if not retain_graph:", "if True:", 1),),
        fails=frozenset({"retain_graph_allows_a_second_backward",
                         "retain_graph_true_keeps_the_activations"})),
    # stage 07: detach() and item() keep a value without its graph
    Case("detach_and_item_written_otherwise", 7, 7, (
        (r"^( *)return Variable\(self\.data, name=self\.name\)\n",
         r"\1detached = Variable(self.data)\n\1detached.name = self.name\n\1return detached\n", 1),
        (r"^( *)return self\.data\.item\(\)\n", r"\1return self.data.reshape(-1)[0].item()\n", 1))),
    Case("detach_is_a_shallow_copy", 7, 7, (
        (r"^import heapq\n", "import copy\nimport heapq\n", 1),
        (r"return Variable\(self\.data, name=self\.name\)", "return copy.copy(self)", 1)),
        fails=frozenset({"detach_shares_the_array_and_has_no_graph"})),
    Case("item_returns_a_0d_array", 7, 7, (
        (r"return self\.data\.item\(\)", "return self.data.reshape(())", 1),),
        fails=frozenset({"item_gives_a_python_number"})),
    Case("item_returns_a_variable", 7, 7, (
        (r"return self\.data\.item\(\)", "return Variable(self.data.reshape(()))", 1),),
        fails=frozenset({"item_gives_a_python_number"})),
    # stage 08: a Function keeps only what its backward reads; the check mode
    Case("saved_values_written_otherwise", 8, 8, (
        (r'^    __slots__ = saves = \("x0_shape", "x1_shape"\)  # shapes, not arrays\n'
         r'(\n    def forward\(self, x0, x1\):\n)        self\.x0_shape, self\.x1_shape = .*\n',
         '    saves = ("shapes",)\n    __slots__ = saves\n\\1'
         '        self.shapes = (x0.shape, x1.shape)\n', 1),
        (r"return reduce_to_shape\(gy, self\.x0_shape\), reduce_to_shape\(gy, self\.x1_shape\)",
         "shape0, shape1 = self.shapes\n        return reduce_to_shape(gy, shape0), "
         "reduce_to_shape(gy, shape1)", 1),
        (r"^        self\.y = np\.exp\(x\)\n        return self\.y\n",
         "        y = np.exp(x)\n        self.y = y  # the output's array, read by backward\n"
         "        return y\n", 1))),
    Case("add_keeps_its_inputs", 8, 8, (
        (r'^    __slots__ = saves = \("x0_shape", "x1_shape"\)  # shapes, not arrays\n'
         r'(\n    def forward\(self, x0, x1\):\n)        self\.x0_shape, self\.x1_shape = .*\n',
         '    __slots__ = saves = ("x0", "x1")\n\\1        self.x0, self.x1 = x0, x1\n', 1),
        (r"return reduce_to_shape\(gy, self\.x0_shape\), reduce_to_shape\(gy, self\.x1_shape\)",
         "return reduce_to_shape(gy, self.x0.shape), reduce_to_shape(gy, self.x1.shape)", 1)),
        # the two matmul outputs that the biases are added to stay alive
        fails=frozenset({"keeps_shapes_not_arrays", "holds_less_than_stage07_at_backward_start"})),
    Case("exp_keeps_its_input_too", 8, 8, (
        (r'^    __slots__ = saves = \("y",\)  # the output: its derivative is itself\n'
         r'(\n    def forward\(self, x\):\n)',
         '    __slots__ = saves = ("x", "y")\n\\1        self.x = x\n', 1),),
        fails=frozenset({"exp_sigmoid_tanh_keep_their_output", "builtins_pass_the_check"})),
    Case("output_read_through_its_weak_reference", 8, 8, (
        (r'^(class Sigmoid\(Function\):\n)    __slots__ = saves = \("y",\)\n'
         r'(\n    def forward\(self, x\):\n)        self\.y = (.*)\n        return self\.y\n',
         '\\1    __slots__ = saves = ()\n\\2        return \\3\n', 1),
        (r"^(    def backward\(self, gy\):\n)        y = self\.y\n        return gy \* y \* \(1 - y\)",
         "\\1        y = self.outputs[0]().data  # as on stage 07\n        return gy * y * (1 - y)", 1)),
        # nothing holds the output Variable any more: every backward through a
        # sigmoid whose output the user dropped raises, and with it every contract
        # that trains the standard workload
        fails=frozenset({"training_learns", "live_objects_constant", "traced_bytes_flat",
                         "collector_finds_nothing", "backward_peak_below_stage03",
                         "holds_less_than_stage05_after_backward", "backward_peak_below_stage05",
                         "retain_graph_allows_a_second_backward",
                         "parameters_keep_data_and_gradients", "gradients_bit_identical_to_stage05",
                         "retain_graph_true_keeps_the_activations",
                         "exp_sigmoid_tanh_keep_their_output", "builtins_pass_the_check",
                         "holds_less_than_stage07_at_backward_start"})),
    Case("check_blind_to_dezero_style_inputs", 8, 8, (
        (r'^        return \[f"inputs\[\{i\}\]" for i in range\(len\(f\.inputs or \(\)\)\)\]\n',
         "        return []  # nothing declared, nothing to check\n", 1),),
        fails=frozenset({"check_names_what_is_never_read"})),
    Case("reads_sometimes_ignored", 8, 8, (
        (r"held = \[name for name in held_values\(f\) if name not in f\.reads_sometimes\]",
         "held = held_values(f)", 1),),
        fails=frozenset({"reads_sometimes_is_honoured"})),
    Case("no_slots_on_the_base_function", 8, 8, (
        (r'^    __slots__ = \("generation", "next_functions", "outputs", "inputs", "__weakref__"\)\n',
         "", 1),),
        fails=frozenset({"builtin_functions_have_slots"})),
    # stage 09: plan the memory of a static graph before allocating it
    Case("plan_written_otherwise", 9, 9, (
        (r"size, block = min\(big_enough\) if big_enough else max\(fits\)",
         "size, block = sorted(big_enough or fits, reverse=not big_enough)[0]", 1),
        (r"self\.arrays\[b\] = \(self\.blocks\[block\]\[:buffer\.nbytes\]\.view\(buffer\.dtype\)\n"
         r" *\.reshape\(buffer\.shape\)\)",
         "self.arrays[b] = np.ndarray(buffer.shape, buffer.dtype, self.blocks[block])", 1))),
    Case("shares_between_parallel_branches", 9, 9, (
        (r"colour = colour_paths\(graph\) if parallel else \[0\] \* len\(graph\.nodes\)",
         "colour = [0] * len(graph.nodes)  # one path: blocks go anywhere later", 1),),
        fails=frozenset({"never_shares_between_unordered_nodes"})),
    Case("in_place_over_an_input_still_read", 9, 9, (
        (r"and count\[b\] == node\.inputs\.count\(b\)", "", 1),),
        # a residual block's h, overwritten by h + b while the second add still reads it
        fails=frozenset({"planned_equals_eager", "never_shares_between_unordered_nodes",
                         "never_below_the_lower_bound"})),
    Case("freed_after_the_first_reader", 9, 9, (
        (r"count\[b\] -= node\.inputs\.count\(b\)", "count[b] = 0  # read: done with it", 1),),
        fails=frozenset({"planned_equals_eager", "never_shares_between_unordered_nodes",
                         "never_below_the_lower_bound"})),
    Case("shared_block_not_enlarged", 9, 9, (
        (r"sizes\[block\] = max\(size, out\.nbytes\)", "sizes[block] = size", 1),),
        # the Executor cannot make a view larger than its block: every run raises
        fails=frozenset({"never_below_the_lower_bound", "planned_equals_eager",
                         "executor_allocates_before_running"})),
    Case("allocates_while_running", 9, 9, (
        (r"^( *)node\.kernel\(arrays\[node\.output\], ",
         r"\1arrays[node.output] = np.empty_like(arrays[node.output])  # fresh, as eager\n"
         r"\1node.kernel(arrays[node.output], ", 1),),
        fails=frozenset({"executor_allocates_before_running"})),
    # stage 10: checkpoint, on stage 08's framework
    Case("checkpoint_written_dezero_way", 10, 10, (
        (r'^    __slots__ = \("function", "xs"\)\n    saves = \("xs",\)\n\n', "", 1),
        (r"^        self\.xs = xs\n", "", 1),
        (r"inputs = \[Variable\(x\) for x in self\.xs\]",
         "inputs = [x.detach() for x in self.inputs]  # DeZero's way: it kept them", 1))),
    Case("graph_kept_instead_of_recomputed", 10, 10, (
        (r'__slots__ = \("function", "xs"\)', '__slots__ = ("function", "xs", "y", "ys_inputs")', 1),
        (r"^        with no_grad\(\):  # .*\n            y = self\.function\(\*\[Variable\(x\) for x in xs\]\)\n",
         "        self.ys_inputs = [Variable(x) for x in xs]\n"
         "        y = self.y = self.function(*self.ys_inputs)  # its graph, for backward\n", 1),
        (r"^        inputs = \[Variable\(x\) for x in self\.xs\]\n        with using_config.*\n"
         r"            y = self\.function\(\*inputs\)\n",
         "        inputs, y = self.ys_inputs, self.y  # no need to run it again\n", 1)),
        fails=frozenset({"runs_once_without_the_graph_and_once_with",
                         "keeps_nothing_inside_the_segment", "peak_at_256_layers_a_third_of_plain"})),
    Case("recomputed_without_the_graph", 10, 10, (
        (r'with using_config\("enable_backprop", True\):', "with no_grad():", 1),),
        # the recomputed output has no creator: no gradient reaches anything inside
        fails=frozenset({"checkpointed_gradients_equal_plain",
                         "runs_once_without_the_graph_and_once_with"})),
    Case("recomputed_backward_seeded_with_ones", 10, 10, (
        (r"^        y\.grad = gy\n", "", 1),),
        fails=frozenset({"checkpointed_gradients_equal_plain"})),
    Case("parameters_of_a_frozen_copy", 10, 10, (
        (r"^import contextlib\n", "import contextlib\nimport copy\n", 1),
        (r"^        self\.function = function\n",
         "        self.function = copy.deepcopy(function)  # the weights of the forward pass\n", 1)),
        # the copies get the gradients; the parameters that training updates get none
        fails=frozenset({"checkpointed_gradients_equal_plain"})),
]


def write_case(case, folder):
    path = folder / get_stage(case.stage).file_name
    path.write_text(patched(step_text(case.base), *case.edits))
    return path


def check_json(capsys, *argv):
    code = cli.main(["check", *argv, "--json", "--batches", BATCHES])
    out, err = capsys.readouterr()
    return code, json.loads(out)


def test_every_stage_with_contracts_has_its_step_file():
    """The stage data (``dezero_mini/contracts/stageNN.py``) names the file of steps/."""
    for stage in stages():
        assert stage_path(stage.number).name == stage.file_name


def test_every_stage_has_a_wrong_and_a_correct_case():
    for stage in stages():
        mine = [case for case in CASES if case.stage == stage.number]
        assert any(case.fails for case in mine), f"stage {stage.number} has no wrong file"
        assert any(not case.fails for case in mine), f"stage {stage.number} has no correct file"


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.stage:02d}-{case.name}")
def test_checker_on_a_learner_file(case, tmp_path, capsys):
    path = write_case(case, tmp_path)
    assert path.read_text() != step_text(case.stage)  # written differently from steps/
    code, report = check_json(capsys, str(case.stage), str(path))
    failed = {c["name"] for c in report["contracts"] if not c["passed"]}
    assert failed == case.fails, report["contracts"]
    assert code == report["exit_code"] == (1 if case.fails else 0)
    assert [c["name"] for c in report["contracts"]] == [c.name for c in contracts_at(case.stage)]
    for contract in report["contracts"]:
        assert contract["expected"] and contract["measured"] and contract["hint"]


def test_steps_themselves_pass_their_stage_through_the_command(tmp_path):
    """The real ``python -m dezero_mini check``, on the course's own stage 05."""
    done = subprocess.run(
        [sys.executable, "-m", "dezero_mini", "check", "5", str(STEPS / "step05_no_grad.py"),
         "--batches", BATCHES, "--allow-reference"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("checking ") and "stage 05 (no_grad)" in lines[0]
    for contract in contracts_at(5):
        assert any(line.startswith(f"pass  {contract.name} ") for line in lines), done.stdout
    assert re.match(r"13 of 13 contracts pass", lines[-2])
    assert lines[-1].startswith("note: this file is the course's own steps/step05_no_grad.py")


def test_text_report_names_the_failed_contract_and_its_hint(tmp_path, capsys):
    case = next(c for c in CASES if c.name == "config_not_restored_after_an_exception")
    path = write_case(case, tmp_path)
    code = cli.main(["check", "5", str(path), "--batches", BATCHES])
    out, _ = capsys.readouterr()
    assert code == 1
    contract = next(c for c in contracts_at(5) if c.name == "no_grad_restores_after_exception")
    failed = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and "no_grad_restores_after_exception" in failed[0], out
    assert "expected True before, False inside, True after" in failed[0]
    assert "measured True before, False inside, False after" in failed[0]
    assert f"hint: {contract.hint}" in out
    assert "12 of 13 contracts pass" in out


# --- Files that cannot be checked, or fight back ----------------------------------------------
def test_a_file_that_raises_on_import_is_exit_2_with_the_error(tmp_path, capsys):
    path = tmp_path / "step03_weakref_outputs.py"
    path.write_text(step_text(3) + "\nraise RuntimeError('half done')\n")
    code, report = check_json(capsys, "3", str(path))
    assert code == 2 and report["status"] == "error"
    assert "RuntimeError: half done" in report["message"]
    assert f"line {len(path.read_text().splitlines())} of step03_weakref_outputs.py" in report["message"]


def test_a_syntax_error_is_exit_2(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("def broken(:\n")
    code, report = check_json(capsys, "1", str(path))
    assert code == 2 and "SyntaxError" in report["message"]


def test_a_missing_name_fails_the_contracts_that_need_it_naming_it(tmp_path, capsys):
    """Stage 04's file checked as stage 05 (what ``start 5`` writes): stage 04's
    contracts run and score; each of stage 05's fails as not run, naming what is
    missing. Exit 1: the file was checked."""
    path = tmp_path / "step05_no_grad.py"
    path.write_text(step_text(4))  # stage 04's file has no Config, using_config, no_grad
    code, report = check_json(capsys, "5", str(path))
    assert code == report["exit_code"] == 1 and report["status"] == "failed", report
    for contract in report["contracts"]:
        if contract["from_stage"] == 5:
            assert not contract["passed"] and contract["error"] == "missing", contract
            assert contract["measured"].startswith(
                "not run: step05_no_grad.py lacks Config, using_config, no_grad"), contract
        else:
            assert contract["passed"] and contract["points"] > 0, contract
    assert report["passed"] == len(contracts_at(4)) > 0


def test_a_file_lacking_the_names_of_every_contract_is_exit_2_naming_them(tmp_path, capsys):
    """Nothing can run on a file without a Variable: it cannot be checked."""
    path = tmp_path / "step05_no_grad.py"
    path.write_text(step_text(4) + "\ndel Variable\n")
    code, report = check_json(capsys, "5", str(path))
    assert code == 2 and "lacks Variable, " in report["message"], report["message"]


def test_a_missing_file_is_exit_2(tmp_path, capsys):
    code = cli.main(["check", "3", str(tmp_path / "nothing.py")])
    _, err = capsys.readouterr()
    assert code == 2 and "no such file" in err


def test_an_endless_loop_on_import_times_out_as_exit_2(tmp_path):
    path = tmp_path / "loop.py"
    path.write_text(step_text(1) + "\nwhile True:\n    pass\n")
    report = check_file(1, path, timeout=2)
    assert report.exit_code == 2
    assert "longer than 2 s" in report.message


def test_an_endless_loop_in_one_contract_fails_it_and_the_others_still_run(tmp_path):
    """``small_graph``'s sigmoid (of shape (4, 2)) never returns; the training runs'
    sigmoids (other shapes) do. The limit also bounds loading the file in each new
    worker and the honest contracts: 10 s, not 3, so that a busy machine (a worker's
    start took 3-4 s at load 13) cannot make it a timeout of its own."""
    path = tmp_path / "step03_weakref_outputs.py"
    path.write_text(patched(step_text(3), (
        r"^(class Sigmoid\(Function\):\n    def forward\(self, x\):\n)",
        r"\1        while x.shape == (4, 2):\n            pass\n", 1)))
    report = check_file(3, path, timeout=10, batches=20)
    by_name = {result.name: result for result in report.results}
    assert [r.name for r in report.results] == [c.name for c in contracts_at(3)]
    for name in ("leaf_gradients_are_right", "keeps_intermediate_gradients"):
        assert by_name[name].error == "timeout" and "timed out after 10 s" in by_name[name].measured
    assert by_name["live_objects_constant"].passed and by_name["training_learns"].passed
    assert report.exit_code == 1


def test_a_file_that_prints_without_end_is_cut_short(tmp_path):
    path = tmp_path / "step02_cycles.py"
    path.write_text(patched(step_text(2), (
        r"^(class Function:\n    def __call__\(self, \*inputs\):\n)",
        r"\1        print('op ' * 500)\n", 1)))
    report = check_file(2, path, batches=20)
    assert report.exit_code == 0, report.results
    assert report.output_truncated
    assert len(report.output) < OUTPUT_LIMIT + 100 and report.output.startswith("op op")


def test_a_file_that_exits_the_process_fails_that_contract(tmp_path):
    path = tmp_path / "step01_leaking_graph.py"
    path.write_text(patched(step_text(1), (
        r"^(import numpy as np\n)", r"import os\n\1", 1),
        (r"^( *)(def backward\(self, retain_grad=False\):\n|def backward\(self\):\n)",
         r"\1\2\1    os._exit(3)\n", 1)))
    report = check_file(1, path, batches=20)
    first = report.results[0]
    assert not first.passed and first.error == "crashed" and "exit code 3" in first.measured
    assert len(report.results) == len(contracts_at(1)) and report.exit_code == 1


# --- start ---------------------------------------------------------------------------------
@pytest.mark.parametrize("stage", [stage.number for stage in stages()])
def test_start_writes_the_previous_stage_under_a_header(stage, tmp_path, capsys):
    code = cli.main(["start", str(stage), str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    info = get_stage(stage)
    written = (tmp_path / info.file_name).read_text()
    header, _, body = written.partition("# (You may delete this header.)\n\n")
    assert body == step_text(max(info.builds_on, 1))
    assert info.label in header and f"dezero_mini check {stage} " in header
    assert " ".join(info.change.split()[:4]) in " ".join(header.replace("#", " ").split())
    for contract in contracts_at(stage):
        assert f"- {contract.name} (from stage {contract.stage:02d})" in header
    assert str(tmp_path / info.file_name) in out
    compile(written, info.file_name, "exec")  # still a Python file


def test_start_refuses_to_overwrite(tmp_path, capsys):
    target = tmp_path / get_stage(3).file_name
    target.write_text("my work")
    code = cli.main(["start", "3", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2 and "not overwriting" in err
    assert target.read_text() == "my work"


def test_start_defaults_to_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["start", "2"]) == 0
    assert (tmp_path / get_stage(2).file_name).is_file()


@pytest.mark.parametrize("argv", [["start", "0"], ["start", "x"], ["check", "42", "f.py"],
                                  ["check", "3", "f.py", "--timeout", "0"],
                                  ["check", "3", "f.py", "--timeout", "1e300"],
                                  ["check", "3", "f.py", "--total-timeout", "inf"],
                                  ["check", "3", "f.py", "--batches", "1"]])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert "error: argument" in capsys.readouterr().err
