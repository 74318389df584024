"""Figures in the lessons' sentences, worded from the numbers themselves."""
from dezero_mini.validation import expect, number


def span(low, high, spec):
    """The range from ``low`` to ``high`` formatted with ``spec``: one figure
    when both ends print the same ("23%"), else "22% to 24%".

    >>> span(0.231, 0.234, ".0%")
    '23%'
    >>> span(2.94, 3.06, ".1f")
    '2.9 to 3.1'
    """
    number(low, "span", "low")
    number(high, "span", "high")
    expect(spec, str, "span", "spec", "a format such as '.0%'")
    try:
        low_text, high_text = format(low, spec), format(high, spec)
    except ValueError:
        raise ValueError(f"span: spec must be a format of numbers such as '.0%' or '.1f', "
                         f"got {spec!r}") from None
    return low_text if low_text == high_text else f"{low_text} to {high_text}"
