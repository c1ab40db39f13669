"""The grader's eyes inside a student's kernel: what a student's cell cannot switch off.

Nothing a notebook runs can be trusted: a cell can patch ``print``, ``torch``, ``numpy``
or :mod:`attnlab.check`, and code inside a solution runs in the same process as the
check. So the verdict is never taken from the kernel. The kernel only *records* the
student's answers on the check's cases; the grader compares them in its own process
(:mod:`attnlab.grade.replay`). What the kernel must not be able to fake is the record
itself and the list of things the notebook did that a grade cannot accept (called
a function the exercise asks the student to write, called a check's reference answer,
patched the library, wrote to the installed package or to the reports, ...).

:func:`install` runs in a fresh kernel before any cell of the notebook and sets up:

* an **audit hook** (:pep:`578`, ``sys.addaudithook``): it cannot be removed, and no
  Python code can reach it (it is referenced only by the interpreter; ``gc``
  introspection, ``ctypes`` and frame access are themselves audited events that it
  reports first). It holds a key the notebook never sees, a message counter, and a
  TCP connection to the grader: every message it sends is numbered and signed
  (HMAC-SHA256), and a sent message cannot be taken back, so a cell that tampers gets
  reported before its tampering takes effect;
* a **profile function** (``sys.setprofile``), switched on by the hook while a
  published check cell runs (a student's own cells run under the hook alone). It keeps no state a cell could replace (its
  constants live in its code object: ``__code__`` is read-only to a notebook, since
  assigning it is an audited event) and forwards to the hook the calls it watches:
  the return of :func:`attnlab.check._core._call_answer` (the student's answer on one
  case, recorded as plain data: tensors, numbers, strings, tuples, lists, dicts; a
  tensor subclass or any other object is recorded as rejected), and calls to the
  functions the checks forbid (``FORBIDDEN`` of each check module) and to the checks'
  own reference functions.

Rules that do not depend on what the student's code can reach (the rules themselves,
as data, are :mod:`attnlab_grade.policy`):

* **no borrowed trust**: a forbidden function called by a trusted library of another
  package (``functools``, ``torch.utils.checkpoint`` calling attnlab's ``attend``) was
  handed to it, so the call is the student's when a student frame runs between the
  check's call and it; a C function likewise when the library does not name it; and
  the answer handed to a check must be the student's own code (a library function
  passed as the answer is flagged);
* **processes refused**: once a student's cell has run in the kernel, no process starts
  whoever asks (a callback the notebook left behind runs with no student frame), and a
  child that ran anyway (its resources, or one alive) is reported at the cell's end;
* **the channel has a budget**: a watched cell's answers stay under
  ``policy.WINDOW_BUDGET`` (beyond it, one violation and nothing more), and the grader
  reads at most a bounded line and total per kernel (:mod:`attnlab_grade.channel`);
  control nonces cover their operation, so code that sees a control cell cannot turn
  one into another;
* **names do not hide a forbidden C function**: torch's ops called through
  ``torch.ops.aten`` are matched by their dispatcher name;
* **the answer key is not readable** while a student's code runs: the checks' and the
  grader's source are refused to every reader (nothing needs them once loaded).

Known limits (documented for instructors): code a student copies from the library's
source or the website's solutions is not told apart from their own; answers computed
ahead of the check in a student's own cells (the profile watches check cells only, to
keep grading fast) are seen only through what the hook sees there (patches, writes,
``gc``, ``ctypes``, processes) and the static scan; a forbidden C function called from
C (``map``, ``functools.partial``) is seen by no profile; a thread is reported when
alive as a check starts, not followed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys

from . import policy

PROTOCOL = 1
WINDOW_BUDGET = policy.WINDOW_BUDGET


def nonce(key: bytes, n: int, op: str = "") -> str:
    """The n-th control nonce for operation ``op``: the grader and the hook both derive
    it from the key, so code that sees a control cell (an IPython input transformer
    the notebook registered) can neither replay it nor change its operation."""
    text = f"control {n} {op}".encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:24]


def sign(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def _trusted_roots() -> tuple[str, ...]:
    import sysconfig

    import attnlab

    roots = {
        os.path.dirname(os.path.abspath(attnlab.__file__)),
        os.path.dirname(os.path.abspath(__file__)),  # the grader's own package
    }
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            roots.add(os.path.realpath(path))
            roots.add(os.path.abspath(path))
    for path in sys.path:  # site-packages of this environment (venv, user site)
        if path and "-packages" in path:
            roots.add(os.path.realpath(path))
            roots.add(os.path.abspath(path))
    return tuple(sorted(r.rstrip("/") + "/" for r in roots))


def _unwrap(obj):
    seen = 0
    while hasattr(obj, "__wrapped__") and seen < 10:
        obj, seen = obj.__wrapped__, seen + 1
    return obj


def watched_codes(extra: dict[str, list[str]] | None = None):
    """(answer code, {check: {code: dotted}}, {code: dotted} of reference functions,
    set of every code object of the check modules, {C function: (check, dotted)})."""
    import importlib
    import inspect

    import attnlab.check as check_pkg
    from attnlab.check import _core

    forbidden: dict[str, dict] = {}
    c_forbidden: dict = {}
    reference: dict = {}
    all_check: set = set()
    class_codes: set = set()

    def codes_of(fn):
        fn = _unwrap(fn)
        if isinstance(fn, type):
            # Every method of the class (forward, __call__, ...), not only its
            # constructor: an object built with __new__ runs them all the same.
            out = []
            for member in vars(fn).values():
                member = getattr(member, "__func__", member)
                code = getattr(_unwrap(member), "__code__", None)
                if code is not None:
                    out.append(code)
            return out
        code = getattr(fn, "__code__", None)
        return [code] if code is not None else []

    def nested(code):
        yield code
        for c in code.co_consts:
            if hasattr(c, "co_code"):
                yield from nested(c)

    for name in check_pkg.MODULES:
        mod = importlib.import_module(f"attnlab.check.{name}")
        public = set(getattr(mod, "__all__", ()))
        for attr, obj in vars(mod).items():
            if inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                for c in nested(obj.__code__):
                    all_check.add(c)
                if attr not in public and name not in ("_core", "_diagnose"):
                    reference[obj.__code__] = f"{mod.__name__}.{attr}"
            elif inspect.isclass(obj) and obj.__module__ == mod.__name__:
                for member in vars(obj).values():
                    if inspect.isfunction(member):
                        for c in nested(member.__code__):
                            all_check.add(c)
        lists = list(getattr(mod, "FORBIDDEN", {}).items())
        if name == "_core":  # once: the lists the grader adds (--forbid)
            lists += list((extra or {}).items())
        for check, names in lists:
            table = forbidden.setdefault(check, {})
            for dotted in names:
                mod_name, _, attr = dotted.rpartition(".")
                try:
                    obj = getattr(importlib.import_module(mod_name), attr)
                except (ImportError, AttributeError):
                    continue
                codes = codes_of(obj)
                for c in codes:
                    table[c] = dotted
                if isinstance(_unwrap(obj), type):
                    class_codes.update(codes)
                if not codes and callable(obj):  # a C function (torch.softmax, ...)
                    c_forbidden.setdefault(obj, []).append((check, dotted))
    answer = _core._call_answer.__code__
    all_check.discard(answer)
    # The wrapper that checks put around the student's function to name the bug
    # (check/_diagnose.py) calls it on the student's behalf: what it calls is the
    # student's call, not a check using its own helper.
    from attnlab.check import _diagnose

    all_check.discard(_diagnose._Tracked.__call__.__code__)
    watched_codes.class_codes = class_codes  # type: ignore[attr-defined]
    return answer, forbidden, reference, all_check, c_forbidden


# The profile function. Its one constant "@K@" is replaced by a tuple of what it needs
# (see _make_profile), so it looks up no global, builtin or closure cell a notebook
# could swap. Keep it free of nested functions and comprehensions.
def _profile_template(frame, event, arg):
    K = "@K@"
    try:
        if event == "call":
            code = frame.f_code
            if code in K[0]:
                K[2]("attnlab.sentry.call", frame, code)
        elif event == "return":
            if frame.f_code is K[1]:
                K[2]("attnlab.sentry.answer", frame, arg)
        elif event == "c_call":
            for c in K[3]:  # by identity: a bound method of a list cannot be hashed
                if arg is c:
                    K[2]("attnlab.sentry.ccall", frame, arg)
    except BaseException:  # an interrupt (a time limit) must not remove the profile
        return None


def _make_profile(constants: tuple):
    import types

    code = _profile_template.__code__
    consts = tuple(constants if c == "@K@" else c for c in code.co_consts)
    return types.FunctionType(code.replace(co_consts=consts), {"__builtins__": {}})


def install(  # noqa: C901
    port: int, key_file: str, protected: list[str], forbid: dict | None = None
) -> None:
    """Install the audit hook and the profile in this kernel and connect to the grader.

    Called once, by the grader, before any cell of the notebook. ``key_file`` holds
    the signing key (the grader deletes it as soon as this returns); ``protected``
    lists folders no cell may write into (the installed package is always one);
    ``forbid`` adds forbidden names per check to the check modules' ``FORBIDDEN``.
    """
    import _thread
    import builtins
    import contextlib
    import functools
    import importlib.util
    import socket
    import types

    import numpy as np
    import torch

    import attnlab
    import attnlab.check
    from attnlab.check import _core

    with open(key_file, "rb") as f:
        key = f.read()
    roots = _trusted_roots()
    package = os.path.dirname(os.path.realpath(attnlab.__file__)) + "/"
    grader = os.path.dirname(os.path.realpath(__file__)) + "/"
    owner_of = policy.owner_rule(package, roots)
    guarded = tuple(
        sorted(
            {package, grader, *roots}
            | {os.path.abspath(p).rstrip("/") + "/" for p in protected}
            | {os.path.realpath(p).rstrip("/") + "/" for p in protected}
        )
    )
    answer_code, forbidden, reference, all_check, c_forbidden = watched_codes(forbid)
    # The files of the checks (their cases, references and hints): their source and
    # bytecode, read by nothing once loaded.
    key_files: set = set()
    for mod_name in attnlab.check.MODULES:
        mod = sys.modules.get(f"attnlab.check.{mod_name}")
        file = getattr(mod, "__file__", None)
        if file:
            real = os.path.realpath(file)
            key_files.add(real)
            with contextlib.suppress(Exception):
                key_files.add(os.path.realpath(importlib.util.cache_from_source(real)))
    key_files = frozenset(key_files)
    FunctionType, MethodType = types.FunctionType, types.MethodType
    partial_type = functools.partial
    from attnlab.check import _diagnose as diagnose_mod

    tracked_type = diagnose_mod._Tracked
    object_getattribute = object.__getattribute__
    callable_ = callable
    type_mro = type.__dict__["__mro__"].__get__
    type_dict = type.__dict__["__dict__"].__get__
    class_codes = frozenset(watched_codes.class_codes)  # type: ignore[attr-defined]
    call_machinery = ("_call_impl", "_wrapped_call_impl", "__call__")
    # A forbidden C function by any of its names: torch.ops.aten.<op> and its
    # overloads reach the same kernels as torch.nn.functional.<op> (an op whose name,
    # without the leading underscore, starts with the forbidden function's name).
    families: dict[str, list] = {}
    for fn, uses in c_forbidden.items():
        base = getattr(fn, "__name__", "") or ""
        for check, dotted in uses:
            if base:
                families.setdefault(check, []).append((base, dotted))
    op_types = tuple(
        t
        for t in (
            getattr(torch._ops, "OpOverload", None),
            getattr(torch._ops, "OpOverloadPacket", None),
        )
        if isinstance(t, type)
    )
    op_codes = frozenset(
        t.__call__.__code__ for t in op_types if hasattr(t.__call__, "__code__")
    )
    watched = frozenset(
        {
            answer_code,
            *reference,
            *op_codes,
            *(c for t in forbidden.values() for c in t),
        }
    )
    c_watched = {
        _thread.start_new_thread: [("*", "_thread.start_new_thread")],
        **c_forbidden,
    }
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    audit = sys.audit
    nonce_, sign_ = nonce, sign
    import resource

    getrusage, children_usage = resource.getrusage, resource.RUSAGE_CHILDREN
    getframe = sys._getframe
    setprofile = sys.setprofile
    get_ident = _thread.get_ident
    getpid = os.getpid
    lock = _thread.allocate_lock()
    dumps = json.dumps
    sendall = sock.sendall
    Tensor, Parameter = torch.Tensor, torch.nn.Parameter
    tensor_numpy = torch._C.TensorBase.numpy
    tensor_to = torch._C.TensorBase.to
    ndarray = np.ndarray
    np_generic = np.generic
    tobytes = np.ndarray.tobytes
    b64 = __import__("base64").b64encode
    isinstance_, type_, len_, str_, repr_ = isinstance, type, len, str, repr
    range_, tuple_, list_ = range, tuple, list
    getattr_ = getattr
    open_ = open
    file_texts: dict = {}
    fspath = os.fspath
    modes_fn = getattr(torch._C, "_len_torch_function_stack", lambda: 0)
    dispatch_fn = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
    busy: set = set()
    # tainted: a student's cell has run in this kernel (from then on no process may
    # start, whoever asks); sent: bytes sent in this window (the channel's budget)
    state = {
        "n": 0,
        "control": 0,
        "student": False,
        "check": False,
        "checks": (),
        "tainted": False,
        "sent": 0,
        "flooded": False,
        "usage": (),
    }
    listdir = os.listdir

    def usage():
        """What this process's children did: the resources of the finished ones
        (a child that ran adds page faults) and the ones alive now."""
        u = getrusage(children_usage)
        alive = []
        try:
            for tid in listdir("/proc/self/task"):
                with open_(f"/proc/self/task/{tid}/children") as f:
                    alive += f.read().split()
        except OSError:
            pass
        return (u.ru_minflt, u.ru_majflt, u.ru_utime, u.ru_stime, tuple_(alive))

    protected_modules = [builtins, torch, torch.nn.functional, np]
    protected_modules += [
        m
        for n, m in sorted(sys.modules.items())
        if m is not None and (n == "attnlab" or n.startswith("attnlab."))
    ]
    class_dicts = [("torch.Tensor", Tensor), ("numpy.ndarray", ndarray)]

    kernel_owned = policy.KERNEL_OWNED

    def snapshot():
        snap = {}
        for m in protected_modules:
            name = getattr(m, "__name__", "?")
            for attr, value in list(vars(m).items()):
                if attr.startswith("_") and m is not builtins or attr in kernel_owned:
                    continue
                snap[(name, attr)] = value
        for name, cls in class_dicts:
            for attr, value in list(vars(cls).items()):
                if not attr.startswith("_") or attr in ("__eq__", "__torch_function__"):
                    snap[(name, attr)] = value
        return snap

    snap = [snapshot()]

    def patched():
        now = snapshot()
        before = snap[0]
        changed = sorted(
            f"{m}.{a}"
            for (m, a), v in before.items()
            if (m, a) in now and now[(m, a)] is not v
        )
        changed += sorted(
            f"{m}.{a} (deleted)" for (m, a) in before if (m, a) not in now
        )
        snap[0] = now
        return changed

    def send(kind, **fields):
        with lock:
            if kind == "answer" and state["flooded"]:
                return  # over the budget: the violation is sent, nothing more
            state["n"] += 1
            body = dumps({"n": state["n"], "kind": kind, **fields}, default=str_)
            state["sent"] += len_(body)
            if kind == "answer" and state["sent"] > window_budget:
                state["flooded"] = True
                body = dumps(
                    {
                        "n": state["n"],
                        "kind": "violation",
                        "what": "tamper",
                        "name": "flooded the grader's channel (over "
                        f"{window_budget >> 20} MB of answers in one cell)",
                    }
                )
            line = body + "\t" + sign_(key, body) + "\n"
            try:
                sendall(line.encode())
            except OSError:
                pass

    def trusted_file(name) -> bool:
        return name.startswith(roots) or name.startswith("<frozen ")

    def trusted(code) -> bool:
        return trusted_file(code.co_filename)

    def student_frames(frame):
        """Non-library frames on the stack, except the outermost (the cell itself)."""
        found = []
        while frame is not None:
            if not trusted(frame.f_code):
                found.append(frame)
            frame = frame.f_back
        return found[:-1]

    def any_student_between(frame, stop) -> bool:
        while frame is not None and frame is not stop:
            if not trusted(frame.f_code):
                return True
            frame = frame.f_back
        return False

    def student_on_stack(frame) -> bool:
        while frame is not None:
            if not trusted(frame.f_code):
                return True
            frame = frame.f_back
        return False

    def answer_frame(frame):
        while frame is not None:
            if frame.f_code is answer_code:
                return frame
            frame = frame.f_back
        return None

    def encode(x, depth=0, budget=None):
        budget = budget if budget is not None else [2_000_000]
        t = type_(x)
        if depth > 20:
            return {"reject": "nested too deeply"}
        if x is None or t is bool or t is int or t is float:
            return {"v": x} if t is not float or x == x else {"float": repr_(x)}
        if t is str:
            return {"v": x[:20000]}
        if isinstance_(x, (tuple_, list_)):
            # Subclasses (a namedtuple, torch.return_types) are read as the plain
            # sequence they are, through the base type's own methods: no method
            # the notebook defined runs here.
            base = tuple_ if isinstance_(x, tuple_) else list_
            n = base.__len__(x)
            kind = "Size" if t is torch.Size else base.__name__
            if n > 10000:
                return {"reject": f"a {kind} of {n} items"}
            return {
                "seq": kind,
                "items": [
                    encode(base.__getitem__(x, i), depth + 1, budget) for i in range_(n)
                ],
            }
        if t is dict:
            if any(type_(k) is not str for k in x):
                return {"reject": "a dict with non-string keys"}
            return {"dict": {k: encode(v, depth + 1, budget) for k, v in x.items()}}
        if t is Tensor or t is Parameter:
            if modes_fn() or dispatch_fn():
                return {"reject": "a tensor made while a torch mode was active"}
            try:
                dtype = str_(x.dtype)
                y = x
                if dtype in ("torch.bfloat16",) or "float8" in dtype:
                    y = tensor_to(x, torch.float32)
                arr = tensor_numpy(y, force=True)
            except Exception as err:  # sparse, quantized, meta, nested, ...
                return {
                    "reject": f"a tensor that cannot be read ({type_(err).__name__})"
                }
            budget[0] -= arr.size
            if budget[0] < 0:
                return {"reject": "an answer too large to record"}
            return {
                "tensor": dtype,
                "np": arr.dtype.str,
                "shape": list(arr.shape),
                "data": b64(tobytes(arr)).decode(),
            }
        if t is ndarray:
            if x.dtype.hasobject:
                return {"reject": "a numpy array of objects"}
            return {
                "ndarray": x.dtype.str,
                "shape": list(x.shape),
                "data": b64(tobytes(x)).decode(),
            }
        if isinstance_(x, np_generic) and t.__module__ == "numpy":
            arr = np.asarray(x)
            if arr.dtype.hasobject:
                return {"reject": "a numpy object scalar"}
            return {"npscalar": arr.dtype.str, "data": b64(tobytes(arr)).decode()}
        return {"reject": f"a {t.__module__}.{t.__qualname__} object"}

    def on_op(frame, names) -> None:
        """A call of a torch op by its dispatcher name (torch.ops.aten.<op>)."""
        op = frame.f_locals.get("self")
        if type_(op) not in op_types:
            return
        qualified = str_(
            getattr_(op, "_name", "") or getattr_(op, "_qualified_op_name", "")
        )
        short = qualified.rpartition("::")[2].lstrip("_")
        caller = frame.f_back
        if caller is None or trusted(caller.f_code):
            return  # torch running its own ops
        for check in names:
            for base, dotted in families.get(check, ()):
                if short.startswith(base):
                    send(
                        "violation",
                        what="forbidden",
                        name=f"{dotted} (as torch.ops {qualified})",
                        check=check,
                    )
                    return

    def on_call(frame, code):
        ans = answer_frame(frame.f_back)
        cell_checks = state["checks"]
        if ans is not None:
            loc = ans.f_locals
            names = (loc.get("name"),)
        else:
            names = cell_checks
        if code in op_codes:
            on_op(frame, names)
            return
        caller = frame.f_back
        if code in class_codes:
            # A forbidden class's method reached through nn.Module.__call__: the call
            # is the frame that called the module.
            while (
                caller is not None
                and caller.f_code.co_name in call_machinery
                and trusted(caller.f_code)
            ):
                caller = caller.f_back
        own_call = caller is not None and not trusted(caller.f_code)
        if not own_call and caller is not None and ans is not None:
            # A library calls a forbidden function on its own only from its own
            # package: functools, contextlib or torch.utils.checkpoint calling
            # attnlab's attend was handed it. Then the call is the student's when a
            # student's frame runs between the check's call and this one.
            if owner_of(caller.f_code.co_filename) != owner_of(code.co_filename):
                own_call = any_student_between(caller, ans)
        for check in names:
            dotted = forbidden.get(check, {}).get(code)
            if dotted is None:
                continue
            # Counted only when a student's frame made the call: the library's own
            # internal calls (SDPA under need_weights=False, ...) never count.
            if own_call:
                send("violation", what="forbidden", name=dotted, check=check)
                return
        dotted = reference.get(code)
        if dotted is None:
            return
        caller = frame.f_back
        if caller is not None and caller.f_code in all_check and caller is not ans:
            return  # a check calling its own helper
        if ans is not None:
            args = ans.f_locals.get("args") or ()
            own = {getattr(_unwrap(a), "__code__", None) for a in args}
            if code in own:
                return  # a function the check handed to the student's function
        send("violation", what="reference", name=dotted)

    def borrowed(fn, depth=0) -> str:
        """'' when the answer handed to the check is the student's own code (a
        function; a library's decorator around one, holding it in its closure; a
        class or object whose methods they wrote), else what it is: a library's
        function passed as the answer runs with no student frame at all, so no rule
        about who calls what could see its forbidden calls."""
        if depth > 6:
            return "a chain of wrappers"
        t = type_(fn)
        if t is FunctionType:
            if not trusted(fn.__code__):
                return ""
            for cell in fn.__closure__ or ():
                try:
                    inner = cell.cell_contents
                except ValueError:
                    continue
                if type_(inner) in (FunctionType, MethodType, partial_type) and not (
                    borrowed(inner, depth + 1)
                ):
                    return ""  # torch.no_grad()(fn), functools.wraps-style wrappers
            return fn.__qualname__
        if t is MethodType:
            return borrowed(fn.__func__, depth + 1)
        if t is partial_type:
            return borrowed(fn.func, depth + 1)
        if t is tracked_type:  # the checks' own wrapper that names the bug
            return borrowed(object_getattribute(fn, "__dict__").get("fn"), depth + 1)
        cls = fn if isinstance_(fn, type) else t
        if cls is t and any(
            type_(v) is FunctionType and v.__code__ in all_check
            for v in type_dict(cls).values()
        ):
            # a wrapper the checks put around the answer (chapter 4's seeding one):
            # the student's code is what it holds
            for v in object_getattribute(fn, "__dict__").values():
                if callable_(v) and not borrowed(v, depth + 1):
                    return ""
        for c in type_mro(cls):
            for v in type_dict(c).values():
                if type_(v) in (staticmethod, classmethod):
                    v = v.__func__
                if type_(v) is FunctionType and not trusted(v.__code__):
                    return ""
        own = type_dict(cls)
        return f"{own.get('__module__', '?')}.{own.get('__qualname__', '?')}"

    def on_answer(frame, outcome):
        loc = frame.f_locals
        name, index = loc.get("name"), loc.get("index")
        whose = borrowed(loc.get("fn"))
        if whose and index == 0:
            send(
                "violation",
                what="borrowed",
                name=f"handed the check a function that is not code of yours ({whose}) "
                f"as the answer to {name}",
            )
        if type_(outcome) is not tuple or not outcome:
            send("answer", name=str_(name), index=index, outcome=["raised", "?"])
            return
        kind = outcome[0]
        if kind == "ok" and len_(outcome) == 2:
            send(
                "answer",
                name=str_(name),
                index=index,
                outcome=["ok", encode(outcome[1])],
            )
        else:
            send(
                "answer",
                name=str_(name),
                index=index,
                outcome=[str_(e) for e in outcome],
            )

    def genuine(source, filename) -> bool:
        """Is ``source`` the text of the file ``filename`` (a traceback reading it)?"""
        try:
            name = str_(filename if isinstance_(filename, str) else filename.decode())
            if name not in file_texts:
                with open_(name, "rb") as f:
                    file_texts[name] = f.read()
            text = file_texts[name]
            if isinstance_(source, str):
                source = source.encode("utf-8")
            return isinstance_(source, bytes) and source == text
        except Exception:
            return False

    guarded_path, answer_key, harmless_proc, opens_for_writing = policy.path_rules(
        guarded, key_files, grader, os.getpid()
    )
    swap_blocked = policy.code_swap_rule(package, grader, trusted_file)
    # the tables, captured: the module's globals are a cell's to change
    path_events = dict(policy.PATH_EVENTS)
    frame_attrs = policy.FRAME_ATTRS
    tamper_events, tamper_prefixes = policy.TAMPER_EVENTS, policy.TAMPER_PREFIXES
    student_tamper = dict(policy.STUDENT_TAMPER_EVENTS)
    student_tamper_prefixes = tuple(policy.STUDENT_TAMPER_PREFIXES.items())
    process_events = policy.PROCESS_EVENTS
    process_prefixes = policy.PROCESS_PREFIXES
    window_budget = policy.WINDOW_BUDGET

    def hook(event, args):
        if event == "object.__getattr__" and args[1] == "f_code":
            return  # the profile's own reads (a cell needs a frame first: audited)
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            blocked = watch(event, args)
        except Exception as err:  # the hook must never break the notebook by mistake
            blocked = None
            try:
                send("error", detail=f"{type_(err).__name__}: {err}")
            except Exception:
                pass
        finally:
            busy.discard(me)
        if blocked:
            # PEP 578: an exception from the hook stops the operation itself.
            raise PermissionError(f"the grader does not allow this ({blocked})")

    def block(what, name):
        send("violation", what=what, name=name)
        return name

    def watch(event, args):  # noqa: C901
        if True:  # (one indent level kept from when this was the hook's body)
            if event.startswith("attnlab.sentry."):
                caller = getframe(2)  # 0: watch, 1: hook, 2: who audited
                if caller.f_code is not profile_code:
                    return block("tamper", f"forged {event}")
                if event == "attnlab.sentry.answer":
                    on_answer(args[0], args[1])
                elif event == "attnlab.sentry.call":
                    if state["student"]:
                        on_call(args[0], args[1])
                elif state["student"]:
                    for check, dotted in c_watched.get(args[1], ()):
                        if check == "*":
                            send("violation", what="tamper", name="started a thread")
                        elif trusted(args[0].f_code) and (
                            getattr_(args[1], "__name__", "") in args[0].f_code.co_names
                            or answer_frame(args[0]) is None
                            or not any_student_between(args[0], answer_frame(args[0]))
                        ):
                            # the library calling its own C function by its name
                            # (not one a student's code handed to functools & co.)
                            continue
                        elif check in state["checks"] or (
                            answer_frame(args[0]) is not None
                            and answer_frame(args[0]).f_locals.get("name") == check
                        ):
                            send(
                                "violation", what="forbidden", name=dotted, check=check
                            )
                return
            if event == "attnlab.grader":
                op, given = args[0], args[1]
                state["control"] += 1
                if given != nonce_(key, state["control"], op):
                    return block("tamper", f"forged grader control {op}")
                if op == "begin":
                    state["student"], state["check"] = True, bool(args[2])
                    state["checks"] = tuple(args[3])
                    state["tainted"] = True
                    state["sent"], state["flooded"] = 0, False
                    state["usage"] = usage()
                    if state["check"] and thread_count() > state["threads"]:
                        send(
                            "violation",
                            what="tamper",
                            name="a thread the notebook started was alive when the "
                            "check began",
                        )
                    if state["check"]:  # the profile costs time: checks only
                        setprofile(profile)
                    send("ack", op=op, nonce=given)
                elif op == "end":
                    setprofile(None)
                    was = state["student"]
                    if was and usage() != state["usage"]:
                        # a process ran (or runs) that no audit event announced
                        send(
                            "violation",
                            what="tamper",
                            name="a child process ran during the cell",
                        )
                    state["student"] = state["check"] = False
                    state["checks"] = ()
                    changed = patched()
                    if changed and was:
                        send("violation", what="patch", name=", ".join(changed[:8]))
                    send("ack", op=op, nonce=given)
                else:  # sync after a chapter cell: take its changes as the new normal
                    patched()
                    state["threads"] = thread_count()
                    send("ack", op=op, nonce=given)
                return
            if event in tamper_events or event.startswith(tamper_prefixes):
                return block("tamper", event)
            elif event in ("os.kill", "os.killpg") and args[0] != getpid():
                return block("tamper", f"{event} {args[0]}")
            elif event == "object.__setattr__" and args[1] in ("__code__",):
                # who may swap a function's code: policy.code_swap_rule
                code = getattr_(args[0], "__code__", None)
                target = getattr_(code, "co_filename", None)
                if swap_blocked(getframe(2).f_code.co_filename, target):
                    return block("tamper", f"replaced a function's {args[1]}")
            elif event == "open":
                path, mode, flags = args
                if state["student"] and path is not None and answer_key(path):
                    # The checks' and the grader's own source, while a student's code
                    # runs: no import needs it (all of it is loaded before), so no
                    # reader gets it (inspect, linecache, a loader's get_source);
                    # refused without a flag (a traceback may look for it).
                    return "read the checks' source"
                if path is not None and guarded_path(path):
                    writes = opens_for_writing(mode, flags)
                    if writes or (
                        str_(fspath(path)).startswith("/proc/")
                        and not harmless_proc(path)
                    ):
                        return block("write", f"opened {path!s} ({mode})")
            elif event in path_events:
                if any(
                    guarded_path(a) for a in args[:2] if isinstance_(a, (str, bytes))
                ):
                    return block("write", f"{event} {args[0]!s}")
            elif event in process_events or event.startswith(process_prefixes):
                # Once a student's cell has run, no process starts in this kernel,
                # whoever asks: a callable the notebook left behind (an IPython event
                # callback, a finalizer) runs with no student frame on the stack.
                if state["tainted"] or student_on_stack(getframe(2)):
                    return block("tamper", f"started a process ({event})")
            elif not state["student"]:
                return
            elif (
                event == "compile"
                and len_(args) > 1
                and isinstance_(args[1], (str, bytes))
                and str_(args[1]).startswith(roots)
                and not genuine(args[0], args[1])
                and (
                    isinstance_(args[0], (str, bytes))
                    or not trusted(getframe(2).f_code)
                )
            ):
                # Code under a library file name would pass for the library's own:
                # only the file's real text may be compiled under its name (what a
                # traceback's source lookup does).
                return block("tamper", f"compiled code as {args[1]!s}")
            elif (
                event == "code.__new__"
                and str_(args[1]).startswith(roots)
                and not trusted(getframe(2).f_code)
            ):
                return block("tamper", f"built a code object as {args[1]!s}")
            elif event == "_thread.start_new_thread" and student_on_stack(getframe(2)):
                return block("tamper", "started a thread")
            elif event == "socket.connect":
                if student_on_stack(getframe(2)):
                    return block("tamper", "opened a network connection")
            elif state["check"] and (
                event == "sys._getframe"
                or (event == "object.__getattr__" and args[1] in frame_attrs)
            ):
                # Only when the code that asked is the student's: the library reads
                # frames for its own reasons (torch.manual_seed, assert_close, typing).
                asker = getframe(2)
                if not trusted(asker.f_code):
                    code = asker.f_code
                    where = f"{code.co_name} in {code.co_filename}:{asker.f_lineno}"
                    send("violation", what="frames", name=f"{event}, from {where}")
            elif trusted(getframe(2).f_code):
                return  # library code at work (an import, a traceback printed, ...)
            elif event in student_tamper:
                return block("tamper", student_tamper[event])
            elif (
                event == "compile"
                and isinstance_(args[1], str)
                and args[1].startswith(roots)
            ):
                return block("tamper", f"compiled code as {args[1]}")
            else:
                for prefix, what in student_tamper_prefixes:
                    if event.startswith(prefix):
                        return block("tamper", f"{what} ({event})")
        return None

    thread_count = _thread._count
    state["threads"] = thread_count()
    profile = _make_profile((watched, answer_code, audit, tuple(c_watched)))
    profile_code = profile.__code__
    _core._GRADING = True
    snap[0] = snapshot()
    sys.addaudithook(hook)
    send("hello", protocol=PROTOCOL, pid=os.getpid())
    del types
