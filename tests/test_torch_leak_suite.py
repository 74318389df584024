"""``leaks`` on a suite of PyTorch scripts written from the leak patterns users report.

Each script of tests/torch_leak_suite/ is a training loop as PyTorch users
write it (issues and forum threads: ``total_loss += loss``, lists and dicts
of outputs, hooks and attention maps kept on modules, a custom batch norm's
running mean updated with its graph (PyTorch issue 20275), class attributes,
default arguments, saved tracebacks, ``retain_graph``, an EMA teacher
updated outside ``no_grad``, a hidden state never detached; and their clean
twins: ``.item()``, ``.detach()``, ``no_grad``, a sequence that grows on
purpose, the optimizer's state). The table gives each one's verdict (the
exit status: 1 leak, 0 clean; the script's own status when it fails) and
the substring of the holder the report must name. Skipped without PyTorch;
``make test-torch`` installs it.
"""
from pathlib import Path

import pytest

from dezero_mini.cli import main

SUITE = Path(__file__).resolve().parent / "torch_leak_suite"
LEAK, CLEAN = 1, 0

#: (script, exit status, the holder the first report line names, or None)
CASES = [
    ("leak_total_loss.py", LEAK, "total_loss (a global"),
    ("leak_losses_list.py", LEAK, "losses (a global"),
    ("leak_dict_key_per_step.py", LEAK, "predictions_by_step (a global"),
    ("leak_forward_hook_closure.py", LEAK, "<closure cell 'activations'>"),
    ("leak_attention_maps_deep.py", LEAK, "model.encoder.layers[0].attn.maps"),
    ("leak_custom_batchnorm_buffer.py", LEAK, "model[1].running_mean"),
    ("leak_class_attribute.py", LEAK, "Trainer.history"),
    ("leak_default_argument.py", LEAK, "remember.__defaults__"),
    ("leak_lambda_default.py", LEAK, "callbacks"),
    ("leak_exc_info_traceback.py", LEAK, "errors"),
    ("leak_retain_graph.py", LEAK, "smoothed_loss (a global"),
    ("leak_ema_teacher.py", LEAK, "teacher"),
    ("leak_rnn_hidden.py", LEAK, "hidden (a global"),
    ("leak_after_data_loading.py", LEAK, "total (a global"),
    ("leak_manual_sgd.py", LEAK, "losses (a global"),
    ("leak_torch_via_helper.py", LEAK, "history (a global"),
    ("leak_dataloader_workers.py", LEAK, "total (a global"),
    ("leak_then_crash.py", 1, "kept_losses (a global"),
    ("leak_then_sys_exit.py", 4, "seen_losses (a global"),
    ("leak_metric_object.py", LEAK, "meter.total"),
    ("leak_local_of_function.py", LEAK, "running_loss (a local of train()"),
    ("leak_adam_outputs.py", LEAK, "logits_seen (a global"),
    ("leak_eval_without_backward.py", LEAK, "scores (a global"),
    ("leak_deque_unbounded.py", LEAK, "replay (a global"),
    ("leak_momentum_history.py", LEAK, "penalty_sum (a global"),
    ("leak_weight_snapshots.py", LEAK, "snapshots (a global"),
    ("leak_partial_callbacks.py", LEAK, "pending_logs (a global"),
    # Holders the walk once misnamed or missed, each one of a family: a
    # functools cache, a suspended generator or coroutine frame, a hook dict
    # on a tensor or a module, a custom Function's ctx, a .grad kept in C++,
    # log records, recorded warnings, a threading.local, a ContextVar.
    ("leak_lru_cache_predict.py", LEAK, "the lru_cache of predict() (a global"),
    ("leak_generator_running_mean.py", LEAK,
     "total (a local of the suspended generator running_mean()"),
    ("leak_async_logger_task.py", LEAK,
     "total (a local of the suspended coroutine average_losses()"),
    ("leak_param_hook_every_step.py", LEAK, "model[0].weight._backward_hooks (a global"),
    ("leak_forward_hook_every_step.py", LEAK, "model[1]._forward_hooks (a global"),
    ("leak_autograd_function_ctx.py", LEAK, "ClampGrad.calls (a global"),
    ("leak_create_graph_grad.py", LEAK, ".grad"),  # model[i].weight or .bias
    ("leak_logging_handler.py", LEAK, "buffered.buffer (a global"),
    ("leak_threading_local.py", LEAK, "state.losses (a global"),
    ("leak_contextvar.py", LEAK, "recent_losses (the value of the ContextVar"),
    ("leak_defaultdict_per_epoch.py", LEAK, "epoch_losses (a global"),
    ("leak_tensor_dict_keys.py", LEAK, "step_of_output (a global"),
    ("leak_warnings_recorded.py", LEAK, "caught (a global"),
    ("leak_param_group_history.py", LEAK, "optimizer.param_groups[0]['loss_history'] (a global"),
    ("leak_module_partial_chain.py", LEAK, "model.on_epoch_end (a global"),
    # Kept from C++: no Python object refers to the hook dict of an autograd node.
    ("leak_node_hook_from_cpp.py", LEAK, "<a dict of "),
    ("leak_global_forward_hook.py", LEAK,
     "torch.nn.modules.module._global_forward_hooks (a global of torch.nn.modules.module;"),
    # Hooks that keep no tensor, registered at every step and never removed:
    # no graph grows, the hook dict does (HOOKS_ONLY).
    ("leak_param_hook_every_step_no_tensor.py", LEAK, "model[0].weight._backward_hooks (a global"),
    ("leak_forward_hook_every_step_no_tensor.py", LEAK, "model[2]._forward_hooks (a global"),
    # Holders that call a function later with the step's tensors as its
    # arguments: a weakref.finalize (kept in its class's registry) and an
    # atexit registration (kept in C: named from atexit's count).
    ("leak_weakref_finalize.py", LEAK, "finalize._registry (a global of weakref"),
    ("leak_atexit_register.py", LEAK, "the atexit registrations (kept from C++ by atexit"),
    ("leak_signal_handler_chain.py", LEAK, "the handler of SIGUSR1 (kept from C++"),
    # Activation checkpointing: the checkpointed function keeps its input.
    ("leak_activation_checkpointing.py", LEAK, "block_inputs (a global"),
    ("clean_total_loss_item.py", CLEAN, None),
    ("clean_detached_cache.py", CLEAN, "outputs_kept (a global"),
    ("clean_no_grad_eval.py", CLEAN, "checks (a global"),
    ("clean_growing_sequence.py", CLEAN, None),
    ("clean_adam_state.py", CLEAN, None),
    ("clean_momentum.py", CLEAN, None),
    ("clean_attribute_overwritten.py", CLEAN, None),
    ("clean_previous_loss.py", CLEAN, None),
    ("clean_bounded_deque.py", CLEAN, None),
    ("clean_tbptt_detached.py", CLEAN, None),
    ("clean_ema_teacher_no_grad.py", CLEAN, None),
    ("clean_manual_sgd.py", CLEAN, None),
    ("clean_custom_batchnorm.py", CLEAN, None),
    ("clean_gradient_accumulation.py", CLEAN, None),
    ("clean_dataloader_workers.py", CLEAN, None),
    ("clean_torch_via_helper.py", CLEAN, None),
    ("clean_then_crash.py", 1, None),
    ("clean_param_hook_removed.py", CLEAN, None),
    ("clean_lru_cache_item.py", CLEAN, None),
    ("clean_generator_running_mean.py", CLEAN, None),
    ("clean_forward_hook_once.py", CLEAN, None),
    ("clean_autograd_function.py", CLEAN, None),
    ("clean_logging_item.py", CLEAN, None),
    ("clean_weak_value_cache.py", CLEAN, None),
    ("clean_tensor_hook_on_output.py", CLEAN, None),
    ("clean_contextvar_reset.py", CLEAN, None),
    ("clean_defaultdict_items.py", CLEAN, None),
    ("clean_warnings_text.py", CLEAN, None),
    ("clean_activation_checkpointing.py", CLEAN, None),
]

#: The fix each holder kind of the families above gets (a substring of the
#: report's first "fix:" line).
FIXES = {
    "leak_lru_cache_predict.py": "`predict.cache_clear()`",
    "leak_generator_running_mean.py": "`total += loss.item()`",
    "leak_async_logger_task.py": "`total += loss.item()`",
    "leak_param_hook_every_step.py": "`handle.remove()`",
    "leak_forward_hook_every_step.py": "register the hook once, before the loop",
    "leak_autograd_function_ctx.py": "not `ctx` itself",
    "leak_create_graph_grad.py": "set_to_none=True",
    "leak_logging_handler.py": "log numbers (`loss.item()`)",
    "leak_threading_local.py": "store numbers (`.item()`)",
    "leak_contextvar.py": ".reset(token)",
    "leak_tensor_dict_keys.py": "key step_of_output by a number",
    "leak_warnings_recorded.py": "warn with text",
    "leak_global_forward_hook.py": "`handle.remove()`",
    "leak_node_hook_from_cpp.py": "a hook registered on an autograd node",
    "leak_param_hook_every_step_no_tensor.py": "`handle.remove()`",
    "leak_forward_hook_every_step_no_tensor.py": "register the hook once, before the loop",
    "leak_weakref_finalize.py": "`weakref.finalize(obj, fn, *args)` keeps `args` alive",
    "leak_atexit_register.py": "`atexit.register(fn, *args)` keeps `fn` and `args`",
    "leak_signal_handler_chain.py": "install the handler once, before the loop",
}

#: Leaks of hooks alone: the report says the hooks pile up, not that graphs are kept.
HOOKS_ONLY = {"leak_param_hook_every_step_no_tensor.py",
              "leak_forward_hook_every_step_no_tensor.py"}


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed (make test-torch)")


@pytest.fixture
def global_hooks_restored(torch):
    """The global module hooks and the handler of SIGUSR1 as they were before
    the test: a script that registers one (leak_global_forward_hook.py,
    leak_signal_handler_chain.py) must not reach the next."""
    import signal

    from torch.nn.modules import module

    hooks = {name: dict(value) for name, value in vars(module).items()
             if name.startswith("_global_") and name.endswith("hooks") and isinstance(value, dict)}
    handler = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, handler)
    for name, before in hooks.items():
        current = getattr(module, name)
        for key in [key for key in current if key not in before]:
            del current[key]


# A warning of a script (PyTorch's "Converting a tensor with requires_grad=True to a
# scalar" for float(loss)) is an error: it ends the script, and fails its row.
@pytest.mark.filterwarnings("error::UserWarning")
@pytest.mark.parametrize("script, status, holder", CASES, ids=[case[0] for case in CASES])
def test_each_script_gets_its_verdict_and_holder(torch, capsys, global_hooks_restored, script,
                                                  status, holder):
    code = main(["leaks", "--steps", "12", str(SUITE / script)])
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert code == status, out + err
    assert out.count("=== dezero_mini leaks (PyTorch)") == 1, out  # one report: no worker's
    assert "not judged" not in out, out
    hooks_only = script in HOOKS_ONLY
    leaking = script.startswith("leak_") and not hooks_only
    assert ("keeps the graphs of earlier steps" in out) == leaking, out
    assert ("but hooks pile up: +1 per step" in out) == hooks_only, out
    assert ("nothing outlives its step" in out) == (holder is None), out
    if holder is not None:  # the first line that names a holder names this one
        named = next(line for line in out.splitlines()
                     if " keeps the graphs of earlier steps: " in line or " holds them: " in line)
        assert named.startswith(holder) or holder in named.split(" (a ")[0], out
    if leaking:
        assert "growth per step: +" in out and "autograd nodes that outlive their step" in out
    if script in FIXES:
        first_fix = next(line for line in out.splitlines() if line.startswith("  fix: "))
        assert FIXES[script] in first_fix, out
    failed = status not in (LEAK, CLEAN) or script.endswith("_crash.py")
    assert ("judged above" in err) == failed, err
    if "crash" in script:  # the script's own error comes after the verdict
        assert "RuntimeError" in err and "simulated" in err


def test_the_suite_has_30_scripts_or_more_and_each_is_in_the_table():
    scripts = {path.name for path in SUITE.glob("leak_*.py")} | {
        path.name for path in SUITE.glob("clean_*.py")}
    assert scripts == {case[0] for case in CASES} and len(scripts) >= 30


def test_the_docs_give_the_suites_counts():
    """docs/framework.md states how many scripts the suite has: the figures are the table's."""
    leaking = sum(case[0].startswith("leak_") for case in CASES)
    clean = sum(case[0].startswith("clean_") for case in CASES)
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "framework.md")
                    .read_text().split())
    assert (f"holds {leaking + clean} more scripts of the patterns PyTorch users report "
            f"({leaking} that leak, {clean} clean)") in text
