"""The graph mode of dezero_mini across threads.

The contracts of stage 04 (``retain_grad``) and stage 05 (``no_grad``,
``using_config``) are defined in ``dezero_mini.contracts`` and run on every
stage by ``test_stage_memory.py``; this file keeps what only the finished
framework promises.
"""
import threading

from conftest import load


def test_dezero_mini_grad_mode_is_local_to_a_thread():
    module = load("dezero_mini")
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        inside.wait()
        seen["other thread"] = module.Config.enable_backprop
        release.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with module.no_grad():
        inside.set()
        assert release.wait(timeout=300)  # (the bound only ends a hang)
        seen["this thread"] = module.Config.enable_backprop
    thread.join()
    assert seen == {"other thread": True, "this thread": False}
