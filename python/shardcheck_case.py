"""Write and read shardcheck case directories (docs/case-format.md) with NumPy only.

A case is what `shardcheck compare` judges: a directory holding case.json (the op, its config
exactly as `shardcheck list --json` writes it, the sizes, the mesh, the element type) and one .npy
file per tensor: the inputs as global tensors, the outputs and gradients either global or one
piece per rank. Any framework can produce one; from PyTorch, hand over `t.detach().cpu().numpy()`
(a bfloat16 tensor: `t.view(torch.int16).numpy().view(numpy.uint16)`, its raw bits).

    import numpy as np
    import shardcheck_case as sc

    case = sc.Case("column_parallel_linear", dtype="float32",
                   sizes={"tokens": 7, "in": 4, "out": 5}, mesh={"tp": 3},
                   config={"out_split": {"kind": "chunk"}, "gather_output": True},
                   implementation="numpy " + np.__version__)
    case.input("x", x); case.input("w", w); case.input("b", b); case.input("dy", dy)
    case.output("y", y)                                  # the global tensor
    case.output_ranks("dw", [dw0, dw1, dw2], "S(0)")     # or each rank's piece
    case.write("cases/linear_ok")
    # then: shardcheck compare cases/linear_ok

Floating arrays must have the case's element type exactly (float64, float32, float16): the
reference is computed from the values the implementation saw, so nothing is converted silently.
For "bfloat16" give uint16 arrays of raw bits, or float32/float64 arrays whose every value is a
bfloat16 (converted without rounding; any other value is an error). Integer arrays (token ids,
targets) and bool arrays (masks) are written as they are.
"""

import json
import os
import tempfile

import numpy as np

FORMAT_VERSION = 1
RUN_FORMAT_VERSION = 1
FLOAT_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16}


def bfloat16_bits(values):
    """The bfloat16 bits (uint16) of float values that are all exactly bfloat16 numbers.

    Raises ValueError naming the first value that is not (round it first, for example with
    torch's .to(torch.bfloat16), if rounding is what you mean)."""
    f32 = np.asarray(values, dtype=np.float64).astype(np.float32)
    if not np.array_equal(f32.astype(np.float64), np.asarray(values, dtype=np.float64),
                          equal_nan=True):
        raise ValueError("bfloat16_bits: a value is not a float32, so not a bfloat16")
    u32 = f32.view(np.uint32)
    low = u32 & np.uint32(0xFFFF)
    bad = (low != 0) & ~np.isnan(f32)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise ValueError("bfloat16_bits: element %d (%r) is not a bfloat16 number"
                         % (i, float(f32.ravel()[i])))
    return (u32 >> np.uint32(16)).astype(np.uint16)


def round_to_bfloat16_bits(values):
    """The bfloat16 bits (uint16) of float values rounded to the nearest bfloat16, ties to even
    (what torch's .to(torch.bfloat16) does): for an implementation that computes in float32 and
    rounds its results once. NaN stays NaN."""
    f32 = np.asarray(values, dtype=np.float32)
    u = f32.view(np.uint32).astype(np.uint64)
    rounded = ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16))
    bits = rounded.astype(np.uint16)
    return np.where(np.isnan(f32), np.uint16(0x7FC0), bits).astype(np.uint16)


def from_bfloat16_bits(bits):
    """float32 values of bfloat16 bits (uint16)."""
    u = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return u.view(np.float32)


def _as_stored(name, array, dtype, elem="T"):
    """The array as the case stores it. elem "T": the case's dtype; "acc": the op's accumulator
    type (float64 for a float64 case, float32 otherwise), for tensors an op's spec gives as
    acc_t<T>, such as attention's lse."""
    a = np.asarray(array)
    if a.dtype.kind in "iub":
        if dtype == "bfloat16" and a.dtype == np.uint16:
            return a  # raw bfloat16 bits
        return a
    if a.dtype.kind != "f":
        raise TypeError("%s: arrays of dtype %s are not case tensors; give float, int or bool"
                        % (name, a.dtype))
    if elem not in ("T", "acc"):
        raise ValueError("%s: elem is %r; give \"T\" or \"acc\"" % (name, elem))
    if elem == "acc":
        dtype = "float64" if dtype == "float64" else "float32"
    if dtype == "bfloat16":
        return bfloat16_bits(a)
    want = np.dtype(FLOAT_DTYPES[dtype])
    if a.dtype != want:
        raise TypeError("%s: is %s but the case's dtype is %s; give the values the "
                        "implementation computed with, in that type" % (name, a.dtype, dtype))
    return a


class Case:
    """One case: the op, its config, sizes, mesh and element type, and its tensors."""

    def __init__(self, op, dtype, sizes, mesh=None, config=None, implementation="",
                 accumulate=None, baseline_implementation="", contract=None):
        if dtype not in ("float64", "float32", "bfloat16", "float16"):
            raise ValueError("dtype must be float64, float32, bfloat16 or float16, not %r"
                             % (dtype,))
        self.op = op
        self.dtype = dtype
        self.sizes = dict(sizes)
        self.mesh = dict(mesh or {})
        self.config = dict(config or {})
        self.implementation = implementation
        self.accumulate = accumulate
        # the evaluation order the op's kernel follows (docs/compare.md): its name, or a dict of
        # its name and parameters ({"name": "exp2", "key_block": 128})
        self.contract = contract
        self.inputs = {}   # name -> array
        self.outputs = {}  # name -> array, or (list of arrays, placement or None)
        self.baseline = {}  # name -> array: a trusted implementation's outputs, same dtype
        self.baseline_implementation = baseline_implementation

    def world(self):
        w = 1
        for n in self.mesh.values():
            w *= int(n)
        return w

    def input(self, name, array):
        """A global input tensor."""
        self.inputs[name] = _as_stored(name, array, self.dtype)

    def output(self, name, array, elem="T"):
        """A global output or gradient; elem="acc" for a tensor the op's spec gives in its
        accumulator type (acc_t<T>: attention's lse)."""
        self.outputs[name] = _as_stored(name, array, self.dtype, elem)

    def output_ranks(self, name, pieces, placement=None, elem="T"):
        """An output as each rank holds it (rank order), optionally with its placement as the
        op's spec prints it ("S(0)", "R", "S(1)[explicit[2,0,3]]") or per dimension, as a
        trainer's dump annotates it ("b s(cp,zigzag) h", "o i(tp)"; docs/case-format.md)."""
        pieces = [_as_stored("%s[rank %d]" % (name, r), p, self.dtype, elem)
                  for r, p in enumerate(pieces)]
        if len(pieces) != self.world():
            raise ValueError("%s: %d pieces but the mesh has %d ranks"
                             % (name, len(pieces), self.world()))
        self.outputs[name] = (pieces, placement)

    def baseline_output(self, name, array):
        """A trusted implementation's global `name` in the same dtype (say, PyTorch eager for a
        fused kernel): the verdict then also gives the implementation's error over its error."""
        self.baseline[name] = _as_stored(name + " (baseline)", array, self.dtype)

    def manifest(self):
        m = {"shardcheck_case": FORMAT_VERSION, "op": self.op, "config": self.config,
             "sizes": self.sizes, "mesh": self.mesh, "dtype": self.dtype,
             "inputs": {n: n + ".npy" for n in self.inputs}, "outputs": {}}
        if self.accumulate:
            m["accumulate"] = self.accumulate
        if self.contract:
            m["contract"] = self.contract
        if self.implementation:
            m["implementation"] = self.implementation
        if self.baseline:
            m["baseline"] = {n: n + ".baseline.npy" for n in self.baseline}
            if self.baseline_implementation:
                m["baseline_implementation"] = self.baseline_implementation
        for n, v in self.outputs.items():
            if isinstance(v, tuple):
                entry = {"ranks": ["%s.rank%d.npy" % (n, r) for r in range(len(v[0]))]}
                if v[1]:
                    entry["placement"] = v[1]
                m["outputs"][n] = entry
            else:
                m["outputs"][n] = n + ".npy"
        return m

    def write(self, directory):
        """Writes the case to `directory` (created): every .npy, then case.json last, each
        through a temporary file and a rename, so a reader never sees half a case."""
        os.makedirs(directory, exist_ok=True)
        for n, a in self.inputs.items():
            _save(os.path.join(directory, n + ".npy"), a)
        for n, v in self.outputs.items():
            if isinstance(v, tuple):
                for r, p in enumerate(v[0]):
                    _save(os.path.join(directory, "%s.rank%d.npy" % (n, r)), p)
            else:
                _save(os.path.join(directory, n + ".npy"), v)
        for n, a in self.baseline.items():
            _save(os.path.join(directory, n + ".baseline.npy"), a)
        _atomic_write(os.path.join(directory, "case.json"),
                      json.dumps(self.manifest(), indent=2).encode() + b"\n")
        return directory


class Run:
    """A whole-run dump: cases recorded in dataflow order (a layer's forward and backward, or a
    whole training step), each holding its op's inputs as the implementation saw them, so
    `shardcheck compare RUN_DIR` judges each op on its own inputs and names the first step that
    fails (docs/case-format.md, "A whole run").

        run = sc.Run("block 0, step 3")
        run.step(norm_case, "00_norm")
        run.step(attn_case, "01_attention", name="layer 0 attention")
        run.link("00_norm", "y", "01_attention", "x")   # attention's x is norm's y, bit for bit
        run.write("dumps/step3")        # dumps/step3/run.json and a folder per step
    """

    def __init__(self, name=""):
        self.name = name
        self.steps = []  # (case, folder, name or None)
        self.links = []  # {"from", "output", "to", "input"}

    def step(self, case, folder, name=None):
        """Appends `case` as the next step, written to RUN_DIR/folder."""
        if any(f == folder for _, f, _ in self.steps):
            raise ValueError("%s: already a step of this run" % folder)
        self.steps.append((case, folder, name))

    def link(self, from_folder, output, to_folder, input_name):
        """Declares that step to_folder's input `input_name` is step from_folder's output
        `output` as the implementation handed it on: compare checks it bit for bit (docs/
        case-format.md, "Dataflow links")."""
        folders = [f for _, f, _ in self.steps]
        for f in (from_folder, to_folder):
            if f not in folders:
                raise ValueError("%s: not a step of this run (add it with step() first)" % f)
        if folders.index(to_folder) <= folders.index(from_folder):
            raise ValueError("a link runs along the dataflow: %s is not after %s"
                             % (to_folder, from_folder))
        self.links.append({"from": from_folder, "output": output, "to": to_folder,
                           "input": input_name})

    def write(self, directory):
        """Writes every step's case, then run.json last (atomically)."""
        if not self.steps:
            raise ValueError("a run needs at least one step")
        os.makedirs(directory, exist_ok=True)
        steps = []
        for case, folder, name in self.steps:
            case.write(os.path.join(directory, folder))
            steps.append({"case": folder, "name": name} if name else folder)
        m = {"shardcheck_run": RUN_FORMAT_VERSION, "steps": steps}
        if self.name:
            m["name"] = self.name
        if self.links:
            m["links"] = self.links
        _atomic_write(os.path.join(directory, "run.json"),
                      json.dumps(m, indent=2).encode() + b"\n")
        return directory


def _save(path, array):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".npy.tmp")
    with os.fdopen(fd, "wb") as f:
        np.save(f, array, allow_pickle=False)
    os.replace(tmp, path)


def _atomic_write(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read(directory):
    """The case in `directory`, with its arrays loaded (bfloat16 ones as their uint16 bits)."""
    with open(os.path.join(directory, "case.json")) as f:
        m = json.load(f)
    if m.get("shardcheck_case") != FORMAT_VERSION:
        raise ValueError("%s: shardcheck_case is %r; this module reads version %d"
                         % (directory, m.get("shardcheck_case"), FORMAT_VERSION))
    c = Case(m["op"], m["dtype"], m["sizes"], m.get("mesh"), m.get("config"),
             m.get("implementation", ""), m.get("accumulate"),
             m.get("baseline_implementation", ""), m.get("contract"))
    for n, fn in m.get("baseline", {}).items():
        c.baseline[n] = np.load(os.path.join(directory, fn), allow_pickle=False)
    for n, fn in m["inputs"].items():
        c.inputs[n] = np.load(os.path.join(directory, fn), allow_pickle=False)
    for n, v in m["outputs"].items():
        if isinstance(v, str):
            c.outputs[n] = np.load(os.path.join(directory, v), allow_pickle=False)
        else:
            c.outputs[n] = ([np.load(os.path.join(directory, p), allow_pickle=False)
                             for p in v["ranks"]], v.get("placement"))
    return c
