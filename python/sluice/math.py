"""Element-wise math on DataNodes, as `nvidia.dali.math`. Every function joins the
expression it is part of (one fused arithmetic operator per expression)."""

from .pipeline import _arith


def _unary(name, doc):
    def f(input):
        return _arith(name, input)

    f.__name__ = name
    f.__doc__ = doc
    return f


abs = _unary("abs", "Absolute value; keeps the input type.")
fabs = _unary("fabs", "Absolute value as a floating-point number.")
sqrt = _unary("sqrt", "Square root (FLOAT for integer inputs).")
rsqrt = _unary("rsqrt", "Reciprocal square root.")
cbrt = _unary("cbrt", "Cube root.")
exp = _unary("exp", "Exponential.")
log = _unary("log", "Natural logarithm.")
log2 = _unary("log2", "Base-2 logarithm.")
log10 = _unary("log10", "Base-10 logarithm.")
floor = _unary("floor", "Floor.")
ceil = _unary("ceil", "Ceiling.")
sin = _unary("sin", "Sine.")
cos = _unary("cos", "Cosine.")
tan = _unary("tan", "Tangent.")
asin = _unary("asin", "Arc sine.")
acos = _unary("acos", "Arc cosine.")
atan = _unary("atan", "Arc tangent.")
sinh = _unary("sinh", "Hyperbolic sine.")
cosh = _unary("cosh", "Hyperbolic cosine.")
tanh = _unary("tanh", "Hyperbolic tangent.")
asinh = _unary("asinh", "Inverse hyperbolic sine.")
acosh = _unary("acosh", "Inverse hyperbolic cosine.")
atanh = _unary("atanh", "Inverse hyperbolic tangent.")


def min(left, right):
    """Element-wise minimum, in the promoted type."""
    return _arith("min", left, right)


def max(left, right):
    """Element-wise maximum, in the promoted type."""
    return _arith("max", left, right)


def pow(base, exponent):
    """`base ** exponent` (integer power for integers)."""
    return _arith("pow", base, exponent)


def fpow(base, exponent):
    """Power computed in floating point."""
    return _arith("fpow", base, exponent)


def atan2(x, y):
    """Arc tangent of x / y, quadrant-aware."""
    return _arith("atan2", x, y)


def clamp(value, lo, hi):
    """`value` limited to [lo, hi], in the type promoted over all three."""
    return _arith("clamp", value, lo, hi)
