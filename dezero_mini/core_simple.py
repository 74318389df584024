"""DeZero's ``core_simple`` names, for the book's steps 23-32.

DeZero keeps two cores: ``core_simple`` (the first one its book builds) and
``core`` (the finished one). dezero_mini has one core with every memory fix;
this module gives it the simple core's names, so that
``from dezero.core_simple import Variable`` runs with dezero_mini.
"""
from dezero_mini.core import (  # noqa: F401  (the names of DeZero's core_simple)
    Add,
    Config,
    Div,
    Function,
    Mul,
    Neg,
    Pow,
    Sub,
    Variable,
    add,
    as_array,
    as_variable,
    div,
    mul,
    neg,
    no_grad,
    pow,
    rdiv,
    rsub,
    setup_variable,
    sub,
    using_config,
)
