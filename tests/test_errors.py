"""Bad input gets an error that names the operation and what was wrong."""
import numpy as np
import pytest

from conftest import ALL_STAGES, load


@pytest.mark.parametrize("stage", ALL_STAGES)
@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, "abc"], ids=["list", "float", "str"])
def test_variable_rejects_data_that_is_not_an_array(stage, bad):
    module = load(stage)
    with pytest.raises(TypeError, match=rf"Variable: .*ndarray.* got {type(bad).__name__}"):
        module.Variable(bad)


@pytest.mark.parametrize("stage", ALL_STAGES)
@pytest.mark.parametrize(
    "op, a_shape, b_shape, name",
    [
        ("matmul", (3, 4), (5, 2), "MatMul"),
        ("add", (3, 4), (5, 2), "Add"),
        ("mul", (2, 3), (4,), "Mul"),
        ("mean_squared_error", (3, 1), (3,), "MeanSquaredError"),
    ],
)
def test_mismatched_shapes_name_the_operation_and_the_shapes(stage, op, a_shape, b_shape, name):
    module = load(stage)
    a, b = module.Variable(np.ones(a_shape)), module.Variable(np.ones(b_shape))
    with pytest.raises(ValueError) as info:
        getattr(module, op)(a, b)
    message = str(info.value)
    assert message.startswith(name + ":"), message
    assert str(a_shape) in message and str(b_shape) in message, message
    assert info.value.__cause__ is not None, "the original numpy error must not be lost"


@pytest.mark.parametrize("stage", ALL_STAGES)
def test_failed_operation_leaves_no_graph_behind(stage):
    """A forward that raises links nothing: the inputs keep no creator."""
    module = load(stage)
    a, b = module.Variable(np.ones((3, 4))), module.Variable(np.ones((5, 2)))
    with pytest.raises(ValueError):
        module.matmul(a, b)
    assert a.creator is None and b.creator is None
