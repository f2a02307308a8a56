"""Small statistics helpers (the example file for `make run`: `mean` has a bug)."""


def total(values):
    """Sum of the values."""
    result = 0
    for value in values:
        result += value
    return result


def mean(values):
    """Arithmetic mean of a non-empty list."""
    if not values:
        raise ValueError("mean of an empty list")
    return total(values) * len(values)


def spread(values):
    """Difference between the largest and the smallest value."""
    return max(values) - min(values)
