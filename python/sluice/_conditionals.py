"""Conditional execution: `if`, `and`, `or` and `not` on per-sample DataNode predicates
(`pipeline_def(enable_conditionals=True)`), with DALI's semantics: the pipeline behaves as
if its function ran once per sample.

Two halves, one file:

- Conversion (`convert`, `callee`). The pipeline function's source is parsed and rewritten:
  every `if` statement becomes a call of `if_stmt` with its branches as nested functions
  and the variables they assign passed in and out through `get_state`/`set_state`; every
  `and`/`or`/`not` becomes `and_`/`or_`/`not_`; every call goes through `callee`, which
  converts the user functions that converted code calls, so helpers with DataNode `if`s work
  too. With plain Python values these helpers do exactly what Python does.
- Tracing (`if_stmt`, `ConditionStack`). With a DataNode predicate both branches are traced.
  Every DataNode a branch uses that was made outside it is split by the predicate (one
  `_conditional.split` per node and `if`, whose outputs the two branches share); the
  variables the branches assign, and the code after reads, are merged back in sample order
  (`_conditional.merge`). Operators with no DataNode inputs (readers, random generators,
  external sources, constants) belong to the whole batch wherever they are written, and a
  branch reads its samples' share of them.
"""

import ast
import builtins
import contextlib
import copy
import functools
import inspect
import sys
import types
import warnings

# --------------------------------------------------------------------------- tracing


class Undefined:
    """A variable not assigned on some path (as Python would leave it unbound)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Undefined({self.name!r})"


_RETVAL = "__sluice_retval__"


def load(read, name):
    """The value of an attribute or item (`obj.a`, `d["k"]`) a branch may assign, or
    `Undefined` when it does not exist yet."""
    try:
        return read()
    except (AttributeError, KeyError, IndexError, NameError):
        return Undefined(name)


def defined(value):
    return not isinstance(value, Undefined)


def peek(frame_locals, name):
    """The variable's value before an `if`, or `Undefined` when it is unbound there."""
    return frame_locals.get(name, Undefined(name))


def ret(value):
    """What a function whose `return`s were turned into assignments returns."""
    if isinstance(value, Undefined):
        if value.name == _RETVAL:
            return None
        raise UnboundLocalError(f"'{value.name}' is used before assignment")
    return value


class _Scope:
    """One level of the condition stack: the predicate of an `if` (None: the whole batch),
    which branch is being traced, the nodes each branch made and the splits made for it."""

    def __init__(self, predicate):
        self.predicate = predicate
        self.branch = None  # True, False, or None: the merge stage (or the global scope)
        self.produced = {True: set(), False: set(), None: set()}
        self.splits = {}  # id(node) -> (true half, false half)
        self.keep = []  # the nodes whose ids the sets hold

    def visible(self):
        if self.branch is None:
            return self.produced[True] | self.produced[False] | self.produced[None]
        return self.produced[self.branch]

    def has(self, node):
        return id(node) in self.visible() or id(node) in self.splits

    def get(self, node):
        if id(node) in self.visible():
            return node
        return self.splits[id(node)][0 if self.branch is not False else 1]

    def add(self, node, branch=...):
        self.produced[self.branch if branch is ... else branch].add(id(node))
        self.keep.append(node)


class ConditionStack:
    """The scopes of the `if`s being traced; the pipeline holds one while its function is
    traced with conditionals on."""

    def __init__(self):
        self.scopes = [_Scope(None)]
        self.suspended = 0  # > 0 while this module makes its own split/merge operators

    @property
    def top(self):
        return self.scopes[-1]

    def split_to_branch(self, node):
        """`node` as the current branch sees it: itself when made there, else its share of
        the samples, split level by level from the scope that made it."""
        level = next((k for k in range(len(self.scopes) - 1, -1, -1) if self.scopes[k].has(node)), None)
        if level is None:
            raise ValueError(f"{node} was not produced within this trace.")
        if level == len(self.scopes) - 1:
            return self.top.get(node)
        current = self.scopes[level].get(node)
        for scope in self.scopes[level + 1:]:
            halves = self._split(current, scope.predicate)
            scope.splits[id(node)] = scope.splits[id(current)] = halves
            scope.keep += [node, current]
            scope.add(halves[0], True)
            scope.add(halves[1], False)
            current = halves[0] if scope.branch is not False else halves[1]
        return current

    def register(self, outputs, has_node_inputs):
        """Records an operator's outputs in the scope they belong to: the current branch, or
        for an operator without DataNode inputs the whole batch."""
        scope = self.top if has_node_inputs else self.scopes[0]
        for out in outputs:
            scope.add(out)

    def _split(self, node, predicate):
        from .ops_gen import make_node

        with self.internal():
            return tuple(make_node("_conditional__Split", [node], {"predicate": predicate, "_if_stmt": True},
                                   device=node.device))

    def merge(self, true_node, false_node, predicate):
        from .ops_gen import make_node

        with self.internal():
            if true_node.device != false_node.device:  # one branch made GPU data: merge there
                true_node, false_node = true_node.gpu(), false_node.gpu()
            return make_node("_conditional__Merge", [true_node, false_node], {"predicate": predicate},
                             device=true_node.device)

    @contextlib.contextmanager
    def internal(self):
        """While this module makes its own split/merge operators: no splitting of their inputs."""
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1


def active_stack():
    """The condition stack of the pipeline being defined, when its function is traced with
    conditionals on and not inside this module's own operators; else None."""
    from .pipeline import Pipeline, _debug

    owner = Pipeline.current() or _debug.active()  # a debug pipeline runs its function with no current Pipeline
    stack = getattr(owner, "_condition_stack", None)
    return stack if stack is not None and not stack.suspended else None


def _is_node(x):
    from .pipeline import DataNode

    return isinstance(x, DataNode)


def _check_predicate(node, what):
    if node.device != "cpu":
        raise ValueError(f'Invalid device "{node.device}" for argument \'predicate\' of operator '
                         f"'sluice.fn._conditional.split'. Named arguments must be on CPU. "
                         f"(the condition of {what} must be a CPU DataNode)")


_INCONSISTENT = ("Encountered inconsistent outputs out of the `if/else` control flow statement. Variables need to be "
                 "initialized in every code path (both `if` branches). ")


def _verify(state, names, nouts, branch):
    for name, value in zip(names[:nouts], state[:nouts]):
        if isinstance(value, Undefined):
            if name == _RETVAL:
                raise RuntimeError(_INCONSISTENT + f"The `{branch}` branch must also have a return statement.")
            raise RuntimeError(_INCONSISTENT + f"Variable '{name}' must also be initialized in the `{branch}` branch.")


def _flatten(value, leaves):
    """Leaves (DataNodes, constants) of a nested structure, appended to `leaves`; returns
    the structure with every leaf as '*' (for comparing the branches)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return (type(value).__name__, tuple(_flatten(v, leaves) for v in value))
    if isinstance(value, (tuple, list)):
        inner = [_flatten(v, leaves) for v in value]
        return tuple(inner) if isinstance(value, tuple) else inner
    if isinstance(value, dict):
        return {k: _flatten(value[k], leaves) for k in sorted(value, key=repr)}
    if value is None:
        return None
    leaves.append(value)
    return "*"


def _unflatten(value, leaves):
    """`value`'s structure with its leaves taken, in order, from the iterator `leaves`."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_unflatten(v, leaves) for v in value))
    if isinstance(value, (tuple, list)):
        inner = [_unflatten(v, leaves) for v in value]
        return tuple(inner) if isinstance(value, tuple) else inner
    if isinstance(value, dict):
        return {k: _unflatten(value[k], leaves) for k in sorted(value, key=repr)}
    if value is None:
        return None
    return next(leaves)


def _as_branch_node(stack, value):
    """A branch output leaf as a node of the branch: DataNodes split to it, Python and NumPy
    numbers made constants (int64 as int32, float64 as float32, as DALI)."""
    if _is_node(value):
        return stack.split_to_branch(value)
    import numpy as np

    if isinstance(value, (bool, int, float, np.number, np.ndarray, np.bool_)):
        from .ops_gen import _constant_node

        node = _constant_node(value, "cpu", "if", 0)
        stack.register([node], has_node_inputs=False)
        return stack.split_to_branch(node)
    raise TypeError(f"Unexpected type: {type(value)}")


def if_stmt(cond, body, orelse, get_state, set_state, names, nouts):
    """An `if` statement: Python's with a Python condition; with a DataNode condition, both
    branches traced on their samples and their outputs merged."""
    if not _is_node(cond):
        if cond:
            body()
        else:
            orelse()
        return
    stack = active_stack()
    if stack is None:
        cond.__bool__()  # raises the error that explains enable_conditionals
    _check_predicate(cond, "an `if` statement")
    initial = get_state()
    predicate = stack.split_to_branch(cond)
    scope = _Scope(predicate)
    stack.scopes.append(scope)
    try:
        outs = {}
        for branch, run, label in ((True, body, "if"), (False, orelse, "else")):
            scope.branch = branch
            run()
            state = get_state()
            _verify(state, names, nouts, label)
            leaves = []
            structure = [_flatten(v, leaves) for v in state[:nouts]]
            outs[branch] = (structure, [_as_branch_node(stack, x) for x in leaves], state[:nouts])
            scope.branch = None
            set_state(initial)
        (s_true, l_true, v_true), (s_false, l_false, _) = outs[True], outs[False]
        if s_true != s_false:
            raise ValueError(
                "Divergent data found in different branches of `if/else` control flow statement. Variables in all code "
                "paths are merged into common output batches. The values assigned to a given variable need to have the "
                "same nesting structure in every code path (both `if` branches).\nFor example, if we define a variable "
                "as a tuple in one branch, it must be defined as a tuple of the same length in the other branch - the "
                "contents of the tuples may be different. If we define a variable as a dictionary, the other branch "
                "must define it as a dictionary with the same set of keys, the values may be different.\n\n"
                f"'If' output structure: {_structure_text(s_true)}\n'Else' output structure: {_structure_text(s_false)}")
        scope.add(predicate, None)
        merged = [stack.merge(t, f, predicate) for t, f in zip(l_true, l_false)]
        leaves = iter(merged)
        values = [_unflatten(v, leaves) for v in v_true]
    finally:
        stack.scopes.pop()
    stack.register(merged, has_node_inputs=True)
    set_state(tuple(values) + tuple(initial[nouts:]))


def _structure_text(structure):
    return repr(tuple(structure))


def _validate_logical(stack, value, name, side):
    from .ops_gen import make_node

    if _is_node(value) and value.device != "cpu":
        raise RuntimeError(f"Logical expression `{name}` is restricted to scalar (0-d tensors) inputs of `bool` type, "
                           f"that are placed on CPU. Got a GPU input as the {side} argument in logical expression.")
    return make_node("_conditional__ValidateLogical", [value], {"expression_name": name, "expression_side": side})


def _lazy(name, left, rest):
    """`left and rest()` / `left or rest()` with a DataNode `left`: the right side is
    traced in a branch that only the samples needing it take."""
    stack = active_stack()
    if stack is None:
        left.__bool__()
    left = _validate_logical(stack, left, name, "left")
    predicate = stack.split_to_branch(left)
    scope = _Scope(predicate)
    stack.scopes.append(scope)
    try:
        evaluated = {}
        for branch in (True, False):
            scope.branch = branch
            if (branch is True) == (name == "and"):
                right = _validate_logical(stack, rest(), name, "right")
                evaluated[branch] = stack.split_to_branch(right)
            else:
                evaluated[branch] = stack.split_to_branch(predicate)
        scope.branch = None
        scope.add(predicate, None)
        out = stack.merge(evaluated[True], evaluated[False], predicate)
    finally:
        stack.scopes.pop()
    stack.register([out], has_node_inputs=True)
    return out


def and_(*operands):
    """`a and b and ...`, each operand a thunk; lazy per sample for DataNodes."""
    value = operands[0]()
    if _is_node(value):
        return _lazy("and", value, lambda: and_(*operands[1:])) if len(operands) > 1 else value
    if not value or len(operands) == 1:
        return value
    return and_(*operands[1:])


def or_(*operands):
    """`a or b or ...`, each operand a thunk; lazy per sample for DataNodes."""
    value = operands[0]()
    if _is_node(value):
        return _lazy("or", value, lambda: or_(*operands[1:])) if len(operands) > 1 else value
    if value or len(operands) == 1:
        return value
    return or_(*operands[1:])


def not_(value):
    """`not value`: per sample for a DataNode (a BOOL scalar per sample)."""
    if _is_node(value):
        from .ops_gen import make_node

        if value.device != "cpu":
            raise RuntimeError("Logical expression `not` is restricted to scalar (0-d tensors) inputs of `bool` type, "
                               "that are placed on CPU. Got a GPU input in logical expression.")
        return make_node("_conditional__Not_", [value], {})
    return not value


# --------------------------------------------------------------------------- conversion

_NAME = "__sluice_ag__"

# Functions of these modules run as they are: they never branch on DataNodes.
_NOT_CONVERTED = ("sluice", "numpy", "collections", "copy", "functools", "inspect", "threading", "re", "pathlib",
                  "pdb", "ipdb", "cProfile", "pstats", "linecache", "posixpath", "urllib", "unittest", "typing",
                  "PIL", "pandas", "matplotlib", "torch", "jax", "cupy", "nvidia", "builtins", "abc", "enum")
# ... but these sluice modules are user-level code that branches (DALI converts its auto_aug).
_CONVERTED = ("sluice.auto_aug",)


def do_not_convert(func=None):
    """Marks `func` to run as it is, never converted (`pipeline.do_not_convert`)."""
    if func is None:
        return do_not_convert
    if getattr(func, "_is_pipeline_def", False):
        raise ValueError("Pipeline definition cannot be marked with @do_not_convert.")
    try:
        func._sluice_do_not_convert = True
    except (AttributeError, TypeError):
        pass
    return func


def made_by_converted_code(obj):
    """True for a function (or callable object's method) defined inside converted code: it
    closes over the converted function's state, so it cannot be sent to a parallel worker."""
    func = obj if isinstance(obj, types.FunctionType) else getattr(obj, "__func__", None) or getattr(type(obj), "__call__", None)
    return isinstance(func, types.FunctionType) and "__sluice_factory__" in func.__qualname__


def _module_allowed(func):
    module = getattr(func, "__module__", None) or ""
    if any(module == m or module.startswith(m + ".") for m in _CONVERTED):
        return True
    return not any(module == m or module.startswith(m + ".") for m in _NOT_CONVERTED)


def _convertible(func):
    if not isinstance(func, types.FunctionType) or getattr(func, "_sluice_do_not_convert", False):
        return False
    code = func.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    if code.co_filename.startswith("<"):
        return False
    # A method using zero-argument super() needs the class cell its class body gave it.
    if "super" in code.co_names and "__class__" in code.co_freevars:
        return False
    return _module_allowed(func)


def callee(func):
    """What converted code calls in place of `func`: its converted twin for user functions,
    methods, partials and callable objects; `func` itself for everything else."""
    if isinstance(func, types.FunctionType):
        return convert(func) if _convertible(func) else func
    if isinstance(func, types.MethodType) and isinstance(func.__func__, types.FunctionType):
        if _convertible(func.__func__):
            return types.MethodType(convert(func.__func__), func.__self__)
        return func
    if isinstance(func, functools.partial):
        inner = callee(func.func)
        return func if inner is func.func else functools.partial(inner, *func.args, **func.keywords)
    if not isinstance(func, type) and not isinstance(func, types.BuiltinFunctionType):
        call = getattr(type(func), "__call__", None)
        if isinstance(call, types.FunctionType) and _convertible(call) and not getattr(func, "_sluice_do_not_convert", False):
            return types.MethodType(convert(call), func)
    return func


_cache = {}  # code object -> converted code object (or None: runs as it is)
_warned = set()


def convert(func):
    """`func` with its `if`s and logical expressions rewritten (see the module doc); `func`
    itself, with a warning, when its source cannot be converted."""
    code = func.__code__
    if code not in _cache:
        try:
            _cache[code] = _convert_code(func)
        except Exception as e:  # noqa: BLE001 - any failure: run it as it is, and say so
            _cache[code] = None
            if code not in _warned:
                _warned.add(code)
                warnings.warn(f"Sluice could not convert {func.__qualname__} for conditional execution and will run it "
                              f"as is ({type(e).__name__}: {e}). To silence this warning, decorate the function with "
                              "@sluice.pipeline.do_not_convert", stacklevel=3)
    new_code = _cache[code]
    if new_code is None:
        return func
    cells = dict(zip(code.co_freevars, func.__closure__ or ()))
    cells[_NAME] = types.CellType(sys.modules[__name__])
    closure = tuple(cells[n] for n in new_code.co_freevars)
    out = types.FunctionType(new_code, func.__globals__, func.__name__, func.__defaults__, closure)
    out.__kwdefaults__ = func.__kwdefaults__
    out.__dict__.update(func.__dict__)
    out.__qualname__ = func.__qualname__
    out.__module__ = func.__module__
    out.__doc__ = func.__doc__
    out._sluice_converted = True
    return out


def _convert_code(func):
    code = func.__code__
    fdef = _definition(code)
    fdef.decorator_list = []
    # Defined under another name inside the factory: under its own, a recursive function's
    # calls of itself would read the factory's local instead of the global it reads.
    fdef.name = _CONVERTED_NAME
    _Rewriter(fdef).rewrite()
    params = [ast.arg(arg=n) for n in (_NAME,) + code.co_freevars]
    factory = _function_def(
        "__sluice_factory__",
        ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        [fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, "exec")
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    converted = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fdef.name)
    return converted.replace(co_name=code.co_name)


_LAMBDA = "__sluice_lambda__"
_CONVERTED_NAME = "__sluice_converted__"


def _definition(code):
    """The definition of `code` as a FunctionDef, at its place in its file (a lambda as a
    function returning its expression)."""
    import linecache

    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise OSError("its source is not available")
    tree = ast.parse("".join(lines), code.co_filename)
    if code.co_name == "<lambda>":
        # The lambda on its first line whose columns hold its body's code.
        cols = {c for (line, _, c, _) in code.co_positions() if line == code.co_firstlineno and c is not None}
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
                 and any(n.col_offset <= c < (n.end_col_offset if n.end_lineno == n.lineno else 1 << 30) for c in cols)]
        found = [n for n in found if not any(m is not n and isinstance(m, ast.Lambda) and m in found for m in ast.walk(n))]
        if len(found) != 1:
            raise ValueError("its lambda cannot be told from others on the same line")
        node = found[0]
        fdef = _function_def(_LAMBDA, node.args, [ast.copy_location(ast.Return(value=node.body), node.body)])
        return ast.copy_location(fdef, node)
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == code.co_name
             and (n.decorator_list[0].lineno if n.decorator_list else n.lineno) == code.co_firstlineno]
    if len(found) != 1:
        raise ValueError("its definition cannot be found in its file")
    return found[0]


def _function_def(name, args, body):
    extra = {"type_params": []} if sys.version_info >= (3, 12) else {}
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None, **extra)


def _helper(name):
    return ast.Attribute(value=ast.Name(id=_NAME, ctx=ast.Load()), attr=name, ctx=ast.Load())


def _call(name, *args):
    return ast.Call(func=_helper(name), args=list(args), keywords=[])


def _thunk(expr):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=expr)


class _Bound(ast.NodeVisitor):
    """Names a block of statements binds, not counting nested functions' and classes'
    bodies and comprehensions (they have their own scopes)."""

    def __init__(self):
        self.names = []

    def add(self, name):
        if name not in self.names:
            self.names.append(name)

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.add(node.id)

    def visit_FunctionDef(self, node):
        self.add(node.name)
        for d in node.decorator_list + node.args.defaults + node.args.kw_defaults:
            if d is not None:
                self.visit(d)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.add(node.name)
        for d in node.decorator_list + node.bases:
            self.visit(d)

    def visit_Lambda(self, node):
        pass

    def visit_ListComp(self, node):
        pass

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_Import(self, node):
        for a in node.names:
            self.add((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node):
        if node.name:
            self.add(node.name)
        self.generic_visit(node)

    def visit_NamedExpr(self, node):
        self.add(node.target.id)
        self.visit(node.value)


def _bound(stmts):
    v = _Bound()
    for s in stmts:
        v.visit(s)
    return v.names


def _composites(stmts):
    """The attributes and items assigned in `stmts` whose object is a plain name
    (`obj.a`, `obj.a.b`, `d["k"]` with a constant key), as (source text, base name)."""
    out = []

    def base(node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
                return None
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    for st in stmts:
        for node in ast.walk(st):
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
                b = base(node)
                text = ast.unparse(node)
                if b is not None and (text, b) not in out:
                    out.append((text, b))
    return out


def _loaded(nodes):
    """Names read anywhere in `nodes` (nested functions included: they may run later)."""
    out = set()
    for n in nodes:
        for x in ast.walk(n):
            if isinstance(x, ast.Name) and isinstance(x.ctx, (ast.Load, ast.Del)):
                out.add(x.id)
            elif isinstance(x, ast.AugAssign) and isinstance(x.target, ast.Name):
                out.add(x.target.id)
    return out


def _stored(target):
    """The plain names an assignment target binds (`x`, `x, (y, *z)`)."""
    return {x.id for x in ast.walk(target) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}


def _flow(stmts, assigned):
    """`(exposed, assigned)`: the names `stmts` may read before they assign them, given that
    the names in `assigned` are bound on entry, and the names bound on every path through
    them. Only straight-line code, `if`s, loops and `with` are followed; anything else counts
    every read as exposed and binds nothing, which errs towards "live"."""
    exposed, assigned = set(), set(assigned)
    for s in stmts:
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            exposed |= _loaded([s]) - assigned
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                assigned |= _stored(t)
        elif isinstance(s, ast.If):
            exposed |= _loaded([s.test]) - assigned
            body_exposed, body_assigned = _flow(s.body, assigned)
            else_exposed, else_assigned = _flow(s.orelse, assigned)
            exposed |= body_exposed | else_exposed
            assigned = body_assigned & else_assigned
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            exposed |= _loaded([s.iter]) - assigned
            exposed |= _flow(s.body, assigned | _stored(s.target))[0] | _flow(s.orelse, assigned)[0]
        elif isinstance(s, ast.While):
            exposed |= (_loaded([s.test]) | _flow(s.body, assigned)[0] | _flow(s.orelse, assigned)[0]) - assigned
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            exposed |= _loaded(s.items) - assigned
            for item in s.items:
                if item.optional_vars is not None:
                    assigned |= _stored(item.optional_vars)
            body_exposed, assigned = _flow(s.body, assigned)
            exposed |= body_exposed
        else:
            exposed |= _loaded([s]) - assigned
    return exposed, assigned


def _read_again(loops):
    """The names the enclosing loops may read on their next iteration before assigning them
    (their condition, their body's exposed reads), and in their `else`: what an `if` inside
    them must hand on. A name the body always assigns before reading it (a helper variable
    of one iteration) is not among them, so a branch need not define it."""
    out = set()
    for loop in loops:
        if isinstance(loop, ast.While):
            out |= _loaded([loop.test]) | _flow(loop.body, set())[0]
        else:
            out |= _flow(loop.body, _stored(loop.target))[0]
        out |= _loaded(loop.orelse)
    return out


def _always_returns(stmts):
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _always_returns(last.body) and _always_returns(last.orelse)


def _move_tails(stmts):
    """Moves the statements after an `if` one of whose branches returns into its other
    branch (what an early return means per sample); drops statements after a return."""
    out = []
    for k, s in enumerate(stmts):
        out.append(s)
        if isinstance(s, ast.Return):
            break
        if isinstance(s, ast.If):
            s.body, s.orelse = _move_tails(s.body), _move_tails(s.orelse)
            returns_true, returns_false = _always_returns(s.body), _always_returns(s.orelse)
            rest = stmts[k + 1:]
            if rest and (returns_true or returns_false):
                if not returns_true:
                    s.body = _move_tails(s.body + rest)
                elif not returns_false:
                    s.orelse = _move_tails(s.orelse + rest)
                break
    return out


class _Escapes(ast.NodeVisitor):
    """Finds what stops an `if` from becoming functions: `break`/`continue` of a loop
    outside it, a `return` not ending a branch, `yield`, `await`, `nonlocal`."""

    def __init__(self):
        self.found = False
        self.loops = 0

    def visit_Break(self, node):
        if self.loops == 0:
            self.found = True

    visit_Continue = visit_Break

    def visit_Return(self, node):
        self.found = True  # the returns ending branches are assignments by now

    visit_Yield = visit_YieldFrom = visit_Await = visit_Nonlocal = visit_Return

    def visit_For(self, node):
        self.visit(node.iter)
        self.loops += 1
        for s in node.body + node.orelse:
            self.visit(s)
        self.loops -= 1

    visit_AsyncFor = visit_For

    def visit_While(self, node):
        self.visit(node.test)
        self.loops += 1
        for s in node.body + node.orelse:
            self.visit(s)
        self.loops -= 1

    def visit_FunctionDef(self, node):
        pass

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef


def _tail_returns_to_assignments(stmts):
    """Turns the `return`s ending the branches of an `if` (and of the `if`s ending them)
    into assignments of the return value; True when there were any."""
    found = False
    for k, s in enumerate(stmts):
        if isinstance(s, ast.Return) and k == len(stmts) - 1:
            value = s.value if s.value is not None else ast.Constant(value=None)
            stmts[k] = ast.copy_location(ast.Assign(targets=[ast.Name(id=_RETVAL, ctx=ast.Store())], value=value), s)
            found = True
        elif isinstance(s, ast.If) and k == len(stmts) - 1:
            inner_true = _tail_returns_to_assignments(s.body)
            inner_false = _tail_returns_to_assignments(s.orelse)
            found = found or inner_true or inner_false
    return found


class _Rewriter:
    """Rewrites one function definition in place."""

    def __init__(self, fdef):
        self.fdef = fdef
        self.globals = {n for x in ast.walk(fdef) if isinstance(x, ast.Global) for n in x.names}
        self.count = 0
        # Names read by nested functions may be read at any later time.
        self.closure_reads = _loaded([x for x in ast.walk(fdef) if x is not fdef and isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))])

    def rewrite(self):
        self.fdef.body = _move_tails(self.fdef.body)
        self.fdef.body = self.block(self.fdef.body, after=[], loops=[])

    # Statement blocks: `after` is what runs after the block (for liveness), `loops` the
    # bodies of the loops around it (all of which may run again).
    def block(self, stmts, after, loops):
        out = []
        for k, s in enumerate(stmts):
            rest = stmts[k + 1:] + after
            out += self.statement(s, rest, loops)
        return out

    def statement(self, s, after, loops):
        if isinstance(s, ast.If):
            return self.if_statement(s, after, loops)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            inner_loops = loops + [s]
            s.body = self.block(s.body, after, inner_loops)
            s.orelse = self.block(s.orelse, after, loops)
            self.expressions(s, skip=("body", "orelse"))
            return [s]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.body = self.block(s.body, after, loops)
            self.expressions(s, skip=("body",))
            return [s]
        if isinstance(s, ast.Try):
            s.body = self.block(s.body, after, loops)
            s.orelse = self.block(s.orelse, after, loops)
            s.finalbody = self.block(s.finalbody, after, loops)
            for h in s.handlers:
                h.body = self.block(h.body, after, loops)
            return [s]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [s]  # nested definitions are converted when (if) they are called
        self.expressions(s)
        return [s]

    def expressions(self, node, skip=()):
        for field, value in ast.iter_fields(node):
            if field in skip:
                continue
            if isinstance(value, ast.expr):
                setattr(node, field, _ExprRewriter().visit(value))
            elif isinstance(value, list):
                setattr(node, field, [_ExprRewriter().visit(v) if isinstance(v, ast.expr) else v for v in value])

    def if_statement(self, s, after, loops):
        # The returns ending the branches become assignments of the return value (on a
        # copy: an `if` that cannot be converted keeps its own).
        converted = copy.deepcopy(s)
        returns = _tail_returns_to_assignments(converted.body) | _tail_returns_to_assignments(converted.orelse)
        escapes = _Escapes()
        for x in converted.body + converted.orelse:
            escapes.visit(x)
        if escapes.found:  # stays a Python `if` (a DataNode condition raises there, clearly)
            s.test = _ExprRewriter().visit(s.test)
            s.body = self.block(s.body, after, loops)
            s.orelse = self.block(s.orelse, after, loops)
            return [s]
        s = converted
        test = _ExprRewriter().visit(s.test)
        names = [n for n in _bound(s.body + s.orelse) if n not in self.globals]
        # The return value is read after every `if` that assigns it (see `returns` below,
        # and the `if` around this one, which converted its returns too).
        live = _loaded(after) | self.closure_reads | _read_again(loops) | {_RETVAL}
        # Attributes and items of objects made before (`obj.a = ...`, `d["k"] = ...`) are
        # state too: the object outlives the branches.
        composites = [c for c in _composites(s.body + s.orelse) if c[1] not in names]
        var_out, var_rest = [n for n in names if n in live], [n for n in names if n not in live]
        comp_out = [text for text, base in composites if base in live]
        comp_rest = [text for text, base in composites if base not in live]
        # The state tuple: outputs (merged after the `if`) first, then what the code after
        # does not read (reset to its value before the `if`).
        labels, nouts = var_out + comp_out + var_rest + comp_rest, len(var_out) + len(comp_out)
        state = var_out + var_rest
        self.count += 1
        k = self.count
        body = self.block(s.body, after, loops) or [ast.Pass()]
        orelse = self.block(s.orelse, after, loops) or [ast.Pass()]
        declare = ([ast.Nonlocal(names=list(state))] if state else []) + (
            [ast.Global(names=sorted(self.globals))] if self.globals else [])
        no_args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        one_arg = ast.arguments(posonlyargs=[], args=[ast.arg(arg="values")], vararg=None, kwonlyargs=[], kw_defaults=[],
                                kwarg=None, defaults=[])

        def fdef(name, args, stmts):
            return _function_def(name, args, stmts)

        def read(label):
            if label in state:
                return ast.Name(id=label, ctx=ast.Load())
            return _call("load", _thunk(ast.parse(label, mode="eval").body), ast.Constant(value=label))

        get_state = fdef(f"__get_state_{k}", no_args,
                         [ast.Return(value=ast.Tuple(elts=[read(x) for x in labels], ctx=ast.Load()))])
        set_body = [ast.Nonlocal(names=list(state))] if state else []
        for i, label in enumerate(labels):
            if label in state:
                set_body += ast.parse(f"{label} = values[{i}]").body
            else:
                set_body += ast.parse(f"if {_NAME}.defined(values[{i}]):\n    {label} = values[{i}]").body
        set_state = fdef(f"__set_state_{k}", one_arg, set_body or [ast.Pass()])
        if_body = fdef(f"__if_body_{k}", no_args, declare + body)
        else_body = fdef(f"__else_body_{k}", no_args, declare + orelse)
        # Every state name is bound before the `if` (Undefined when Python would leave it
        # unbound), so that the branch functions can declare it nonlocal.
        inits = [ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                            value=_call("peek", ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]),
                                        ast.Constant(value=n)))
                 for n in state]
        call = ast.Expr(value=_call(
            "if_stmt", test, ast.Name(id=if_body.name, ctx=ast.Load()), ast.Name(id=else_body.name, ctx=ast.Load()),
            ast.Name(id=get_state.name, ctx=ast.Load()), ast.Name(id=set_state.name, ctx=ast.Load()),
            ast.Tuple(elts=[ast.Constant(value=n) for n in labels], ctx=ast.Load()), ast.Constant(value=nouts)))
        out = inits + [get_state, set_state, if_body, else_body, call]
        if returns:
            out.append(ast.Return(value=_call("ret", ast.Name(id=_RETVAL, ctx=ast.Load()))))
        for node in out:
            ast.copy_location(node, s)
            for x in ast.walk(node):
                if not hasattr(x, "lineno") and isinstance(x, (ast.stmt, ast.expr)):
                    ast.copy_location(x, s)
        return out


class _ExprRewriter(ast.NodeTransformer):
    """`and`/`or`/`not`, chained comparisons and calls inside one expression."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(helper, *[_thunk(v) for v in node.values]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("not_", node.operand), node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        return ast.copy_location(_call("and_", *[_thunk(p) for p in parts]), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == _NAME:
            return node
        if isinstance(f, ast.Name) and f.id in ("super", "locals", "globals", "vars", "eval", "exec") + tuple(
                n for n in dir(builtins) if not n.startswith("_")):
            return node
        node.func = ast.copy_location(_call("callee", f), f)
        return node

    def visit_Lambda(self, node):
        self.generic_visit(node)
        return node


def explain(error):
    """Prefixes the message of an error raised while tracing converted code with the user's
    frames it passed through (DALI's "in user code:"), keeping its type: the converted
    code's own frames would otherwise make the traceback hard to read."""
    import os
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not os.path.abspath(f.filename).startswith(here)]
    if not frames or getattr(error, "_sluice_explained", False):
        return
    lines = ["in user code:", ""]
    for f in frames:
        lines.append(f'    File "{f.filename}", line {f.lineno}, in {f.name}')
        if f.line:
            lines.append(f"        {f.line}")
    lines += ["", f"    {type(error).__name__}: {error}"]
    try:
        error.args = ("\n".join(lines),) + tuple(error.args[1:])
        error._sluice_explained = True
    except (AttributeError, TypeError):
        pass
