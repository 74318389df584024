"""Worked solutions of the exercises of lesson 04, "Dropping the gradients of
intermediate results".

Run one with ``python solutions/04_retain_grad.py N`` (all of them without N);
each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """The shapes predict the saving to the byte: six hidden results of 256 x 32 float64 (64 KiB each), two output results of 256 x 1 (2 KiB each) and the scalar loss (8 bytes), about 388 KiB of gradients that stage 04 drops. The measured difference of what backward leaves behind agrees within 1 %: memory can be reasoned about from the shapes before it is measured."""
    from dezero_mini.memory import load_stage, record_step_timeline

    kib = 1024
    predicted = 6 * 256 * 32 * 8 + 2 * 256 * 1 * 8 + 8
    # A first run allocates what stays for the rest of the process (caches,
    # lazily imported code): make it before the two that are compared.
    record_step_timeline(load_stage(3), count_objects=False)
    step03 = record_step_timeline(load_stage(3), count_objects=False)
    step04 = record_step_timeline(load_stage(4), count_objects=False)
    measured = step03.after_backward - step04.after_backward
    print(f"predicted {predicted / kib:.1f} KiB, measured {measured / kib:.1f} KiB "
          f"({measured / predicted - 1:+.2%})")
    assert abs(predicted / kib - 388) < 1
    assert abs(measured / predicted - 1) < 0.01


def exercise_2():
    """The saving grows with the batch in KiB, about 0.8 KiB per sample up to 512 samples: the gradients dropped are as large as the activations. In percent it is about 22 % up to 512 samples and about 29 % from 1024 on, because from 256 KiB per array numpy writes the result of an expression like `gy * y * (1 - y)` into one of its own temporaries. Stage 04's peak comes inside such an expression and loses about one array of the batch's size; stage 03's comes at the end of backward, when every gradient is held, and hardly moves (both in units of one array, `batch_size * 32 * 8` bytes)."""
    from dezero_mini.memory import load_stage, record_step_timeline

    stage03, stage04 = load_stage(3), load_stage(4)
    savings, in_arrays = {}, {}
    for batch_size in (64, 256, 512, 1024, 2048):
        peak03 = record_step_timeline(stage03, batch_size=batch_size, count_objects=False).backward_peak
        peak04 = record_step_timeline(stage04, batch_size=batch_size, count_objects=False).backward_peak
        saved = peak03 - peak04
        savings[batch_size] = (saved / 1024, saved / peak03)
        array = batch_size * 32 * 8  # one activation of the batch
        in_arrays[batch_size] = (peak03 / array, peak04 / array)
        print(f"batch {batch_size:5d}: saves {saved / 1024:7.1f} KiB "
              f"({saved / batch_size / 1024:.2f} KiB per sample), {saved / peak03:.1%} of the peak")
    kib = [savings[b][0] for b in sorted(savings)]
    assert all(a < b for a, b in zip(kib, kib[1:]))  # grows with the batch
    per_sample = (savings[512][0] - savings[64][0]) / (512 - 64)
    print(f"from 64 to 512 samples: {per_sample:.2f} KiB more per sample")
    assert 0.7 < per_sample < 0.9
    for batch_size in (64, 256, 512):
        assert 0.19 < savings[batch_size][1] < 0.25
    for batch_size in (1024, 2048):
        assert 0.26 < savings[batch_size][1] < 0.32
    (before03, before04), (after03, after04) = in_arrays[512], in_arrays[1024]
    print(f"peaks in arrays of the batch, 512 -> 1024 samples: stage 03 {before03:.2f} -> {after03:.2f}, "
          f"stage 04 {before04:.2f} -> {after04:.2f}")
    assert 0.7 < before04 - after04 < 1.3  # stage 04's peak loses about one array
    assert abs(before03 - after03) < 0.3  # stage 03's hardly moves


def exercise_3():
    """The input's gradient is made by the first layer's MatMul, the last Function that backward runs, and by then memory is at about 0.59 MiB even with those 64 KiB counted, below the peak of about 0.71 MiB that came earlier. So not computing it would not lower the peak: it would only lower what backward leaves behind, by 64 KiB. Measure before you optimize: the peak is set elsewhere."""
    from dezero_mini.memory import load_stage, record_step_timeline

    mib = 2**20
    step04 = record_step_timeline(load_stage(4), count_objects=False)
    last_matmul = [e for e in step04.events if e.phase == "backward" and e.op == "MatMul"][-1]
    input_grad = 256 * 32 * 8  # 64 KiB
    at_matmul = last_matmul.traced + input_grad
    print(f"at the last MatMul, with the input's gradient: {at_matmul / mib:.2f} MiB; "
          f"backward peak {step04.backward_peak / mib:.2f} MiB")
    assert at_matmul < step04.backward_peak
    assert abs(at_matmul / mib - 0.59) < 0.03 and abs(step04.backward_peak / mib - 0.71) < 0.03


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
