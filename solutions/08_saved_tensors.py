"""Worked solutions of the exercises of lesson 08, "Keep only what backward reads".

Run one with ``python solutions/08_saved_tensors.py N`` (all of them without
N); each function's body is what you would type into the lesson's cells.
"""


def exercise_1():
    """A Function written DeZero's way keeps its inputs and reads both arrays in backward, so the check finds nothing to report. Once backward stops reading `x0` (a wrong gradient, `gy` for the second input), the check mode reports `inputs[0]` as kept but never read. The check looks at what backward reads, not at whether the gradient is right: a gradient check is still needed for that."""
    import numpy as np

    from dezero_mini.memory import load_stage

    step = load_stage(8)

    class Mul(step.Function):
        def forward(self, x0, x1):
            return x0 * x1

        def backward(self, gy):
            x0, x1 = self.inputs
            return gy * x1.data, gy * x0.data

    class CarelessMul(Mul):
        def backward(self, gy):
            x0, x1 = self.inputs
            return gy * x1.data, gy  # never reads x0

    a, b = step.Variable(np.array([1.0, 2.0])), step.Variable(np.array([3.0, 4.0]))
    with step.using_config("check_saved", True):
        step.sum(Mul()(a, b)).backward()
        print("DeZero's Mul: no error; a.grad =", a.grad)
        try:
            step.sum(CarelessMul()(a, b)).backward()
        except RuntimeError as error:
            message = str(error)
        else:
            raise AssertionError("the check did not report the unread input")
    print("the careless Mul:", message)
    assert "inputs[0]" in message


def exercise_2():
    """Each residual block adds a fixed amount to what the graph holds when backward starts: about three activations on stage 07 (`h`, `h + b` and the tanh, each kept by a Function that holds its inputs) and about one on stage 08 (only the tanh's output, which `Tanh`'s backward reads). So the saving grows with depth, and the ratio of the two stages tends to three."""
    import numpy as np

    from dezero_mini.memory import ResidualStack, Workload, load_stage, record_step_timeline

    depths = (8, 16, 32)
    activation = Workload(load_stage(8)).activation_nbytes
    per_block = {}
    for stage in (7, 8):
        m = load_stage(stage)
        record_step_timeline(m, workload=ResidualStack(m, depth=8), count_objects=False)  # warm-up
        held = [record_step_timeline(m, workload=ResidualStack(m, depth=d),
                                     count_objects=False).at_backward_start for d in depths]
        per_block[stage] = np.polyfit(depths, held, 1)[0] / activation
        print(f"stage {stage:02d}: at the start of backward {[round(h / 2**20, 2) for h in held]} MiB "
              f"for depths {depths}: {per_block[stage]:.2f} activations per block")
    assert abs(per_block[7] - 3) < 0.3
    assert abs(per_block[8] - 1) < 0.15


def exercise_3():
    """A sigmoid that saves its input instead of its output passes the check (its backward reads what it saved), yet the graph holds two activations more when backward starts, one per sigmoid layer of the standard workload: each keeps its input, which nothing else keeps, while its output is kept all the same by the next `matmul`. The check finds values that are never read, not values that a better choice would avoid; choosing what to save is still the author's job."""
    import numpy as np

    from dezero_mini.memory import Workload, load_stage, record_step_timeline

    step = load_stage(8)
    activation = Workload(step).activation_nbytes

    class InputSigmoid(step.Function):
        saves = ("x",)

        def forward(self, x):
            self.x = x
            return 1 / (1 + np.exp(-x))

        def backward(self, gy):
            y = 1 / (1 + np.exp(-self.x))
            return gy * y * (1 - y)

    def timeline():
        record_step_timeline(step, workload=Workload(step), count_objects=False)  # warm-up
        return record_step_timeline(step, workload=Workload(step), count_objects=False)

    standard = timeline()
    original = step.sigmoid
    step.sigmoid = lambda x: InputSigmoid()(x)
    try:
        with step.using_config("check_saved", True):
            step.sum(step.sigmoid(step.Variable(np.ones(3)))).backward()  # no error
        with_input = timeline()
    finally:
        step.sigmoid = original
    more = (with_input.at_backward_start - standard.at_backward_start) / activation
    print(f"at the start of backward: {standard.at_backward_start / 1024:.0f} KiB with the "
          f"standard sigmoid, {with_input.at_backward_start / 1024:.0f} KiB with InputSigmoid: "
          f"{more:.2f} activations more")
    assert abs(more - 2) < 0.2


if __name__ == "__main__":
    import sys

    from catalog import run

    sys.exit(run(globals()))
