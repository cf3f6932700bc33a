"""How parallel external sources send their callbacks to `spawn`ed workers (DALI's
`nvidia.dali.pickling`). Functions Python's pickle can only send by name fail there when
they have no importable name: lambdas, functions defined inside other functions (a source
made by a factory, or in a pipeline function). Those are sent by value instead: their code,
closure, defaults and the globals they read. `pickle_by_value` asks the same for a global
function (one defined in `__main__` of a notebook, say)."""

import importlib
import inspect
import io
import marshal
import pickle
import types


def pickle_by_value(fun):
    """Marks a global function to be sent to parallel workers by value, not by name."""
    if not inspect.isfunction(fun):
        raise TypeError("Only functions can be explicitely set to be pickled by value")
    fun._sluice_pickle_by_value = True
    return fun


def _by_value(fun):
    if fun.__name__ == "<lambda>" or getattr(fun, "_sluice_pickle_by_value", False) or getattr(fun, "_dali_pickle_by_value", False):
        return True
    try:
        pickle.dumps(fun)
    except (AttributeError, pickle.PicklingError):
        return True  # "Can't pickle local object" (its wording varies with the Python version)
    return False


def _global_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _global_names(c, out)
    return out


def _new_function(code, name, qualname, closure):
    fun = types.FunctionType(marshal.loads(code), {"__builtins__": __builtins__}, name, None, closure)  # nosec B302
    fun.__qualname__ = qualname
    return fun


def _set_function_state(fun, state):
    fun.__globals__.update(state["globals"])
    fun.__defaults__ = state["defaults"]
    fun.__kwdefaults__ = state["kwdefaults"]


def _new_cell():
    return types.CellType()


def _set_cell(cell, contents):
    cell.cell_contents = contents


class CallbackPickler(pickle.Pickler):
    """A pickler that sends functions without an importable name by value, and modules by
    name (a function's globals may hold them)."""

    def reducer_override(self, obj):
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.CellType):
            try:
                contents = obj.cell_contents
            except ValueError:  # an empty cell
                return _new_cell, ()
            return _new_cell, (), contents, None, None, _set_cell
        if isinstance(obj, types.FunctionType) and _by_value(obj):
            names = _global_names(obj.__code__, set())
            state = {
                "globals": {n: obj.__globals__[n] for n in names if n in obj.__globals__},
                "defaults": obj.__defaults__,
                "kwdefaults": obj.__kwdefaults__,
            }
            args = (marshal.dumps(obj.__code__), obj.__name__, obj.__qualname__, obj.__closure__)
            return _new_function, args, state, None, None, _set_function_state
        return NotImplemented


def dumps(obj):
    f = io.BytesIO()
    CallbackPickler(f).dump(obj)
    return f.getvalue()


loads = pickle.loads
