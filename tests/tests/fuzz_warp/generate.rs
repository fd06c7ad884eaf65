//! Random Warp 1.19 modules (Python text) for the Warp proof's differential
//! fuzzer: many kernels per module, each from one family of index patterns
//! with random parts, and what the fuzzer needs to launch them.

use std::fmt::Write as _;

use crate::engine::Rng;

/// An element type of the generated arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dt {
    F32,
    I32,
    V3,
}

impl Dt {
    pub fn size(self) -> usize {
        match self {
            Dt::F32 | Dt::I32 => 4,
            Dt::V3 => 12,
        }
    }
    fn py(self) -> &'static str {
        match self {
            Dt::F32 => "float",
            Dt::I32 => "int",
            Dt::V3 => "wp.vec3",
        }
    }
    /// A Warp expression of this type from a float expression.
    fn of_float(self, e: &str) -> String {
        match self {
            Dt::F32 => e.to_string(),
            Dt::I32 => format!("int({e})"),
            Dt::V3 => format!("wp.vec3({e})"),
        }
    }
    /// A float expression from one of this type.
    fn to_float(self, e: &str) -> String {
        match self {
            Dt::F32 => e.to_string(),
            Dt::I32 => format!("float({e})"),
            Dt::V3 => format!("{e}[0]"),
        }
    }
}

/// A parameter's kind, as the launch generator needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PKind {
    Arr {
        ndim: usize,
        dt: Dt,
    },
    Int,
    Float,
    /// A struct of the module's struct type `S`: `a`, `b` (1-D float
    /// arrays), `scale` (a float).
    Struct,
}

/// The fields of the module's struct type, with their arrays' ndim and type.
pub const STRUCT_FIELDS: &[(&str, Option<(usize, Dt)>)] = &[
    ("a", Some((1, Dt::F32))),
    ("b", Some((1, Dt::F32))),
    ("scale", None),
];

/// One generated kernel.
#[derive(Clone, Debug)]
pub struct GenKernel {
    pub name: String,
    /// Coordinates of `wp.tid()`.
    pub tid: usize,
    pub params: Vec<(String, PKind)>,
    /// The family it comes from.
    pub family: &'static str,
    /// It reaches native code or its module has a preamble: the proof must
    /// not prove it.
    pub must_be_unproven: bool,
}

/// One generated module.
pub struct GenModule {
    pub name: String,
    pub text: String,
    pub kernels: Vec<GenKernel>,
}

/// The families of kernels, in the order `--mix` names them.
pub const FAMILIES: &[&str] = &[
    "plain",
    "offset",
    "guard",
    "modulo",
    "shape",
    "dims",
    "coords",
    "coords",
    "reassign",
    "vec",
    "mat",
    "fixed",
    "func",
    "struct",
    "view",
    "loop",
    "native",
    "native-chain",
];

const HEADER: &str = "import warp as wp\n\n";

/// Module-level helpers every module has.
const HELPERS: &str = r#"
@wp.struct
class S:
    a: wp.array(dtype=float)
    b: wp.array(dtype=float)
    scale: float


@wp.func
def get(x: wp.array(dtype=float), i: int):
    return x[i]


@wp.func
def get_next(x: wp.array(dtype=float), i: int):
    return x[i + 1]


@wp.func
def put(x: wp.array(dtype=float), i: int, v: float):
    x[i] = v


@wp.func
def get2(x: wp.array2d(dtype=float), i: int, j: int):
    return x[i, j]


@wp.func
def guarded(x: wp.array(dtype=float), i: int):
    if i < x.shape[0]:
        return x[i]
    return 0.0

"#;

/// The native helpers of a native module (a module holding a
/// `wp.func_native` function is unproven as a whole).
const NATIVE: &str = r#"
@wp.func_native("""
return x[i];
""")
def native_get(x: wp.array(dtype=float), i: int) -> float: ...


@wp.func
def via_native(x: wp.array(dtype=float), i: int):
    return native_get(x, i) + 1.0

"#;

struct K<'a> {
    rng: &'a mut Rng,
    params: Vec<(String, PKind)>,
    body: Vec<String>,
    tid: usize,
}

impl K<'_> {
    fn pick<'s>(&mut self, xs: &[&'s str]) -> &'s str {
        xs[self.rng.below(xs.len())]
    }
    fn small(&mut self) -> usize {
        [0, 1, 1, 2, 3][self.rng.below(5)]
    }
    fn chance(&mut self, n: usize) -> bool {
        self.rng.below(n) == 0
    }
    fn arr(&mut self, name: &str, ndim: usize, dt: Dt) {
        self.params
            .push((name.to_string(), PKind::Arr { ndim, dt }));
    }
    fn line(&mut self, depth: usize, s: impl AsRef<str>) {
        self.body
            .push(format!("{}{}", "    ".repeat(depth + 1), s.as_ref()));
    }
    fn tid_line(&mut self) {
        let t = match self.tid {
            1 => "i = wp.tid()",
            2 => "i, j = wp.tid()",
            _ => "i, j, k = wp.tid()",
        };
        self.line(0, t);
    }
    /// `wp.tid()` unpacked in a random order (`j, i = wp.tid()`).
    fn permuted_tid_line(&mut self) {
        let mut vars: Vec<&str> = ["i", "j", "k"][..self.tid].to_vec();
        for n in (1..vars.len()).rev() {
            let m = self.rng.below(n + 1);
            vars.swap(n, m);
        }
        let t = format!("{} = wp.tid()", vars.join(", "));
        self.line(0, t);
    }
    /// An index the proof may prove (a coordinate, a constant, a modulo by
    /// an extent) with random parts: any coordinate on any axis, constants
    /// from the end, another array's or axis's extent as divisor.
    fn coord_index(&mut self, arrays: &[(&str, usize)]) -> String {
        let vars = &["i", "j", "k"][..self.tid];
        let v = vars[self.rng.below(vars.len())];
        let (x, nd) = arrays[self.rng.below(arrays.len())];
        let axis = self.rng.below(nd);
        let cast = [
            "wp.uint8",
            "wp.uint16",
            "wp.uint32",
            "wp.uint64",
            "wp.int64",
        ][self.rng.below(5)];
        match self.rng.below(16) {
            0..=4 => v.to_string(),
            5 => format!("{}", self.rng.below(4)),
            6 => format!("-{}", 1 + self.rng.below(3)),
            7 | 8 => format!("{v} % {x}.shape[{axis}]"),
            9 => format!("{} % {x}.shape[{axis}]", self.rng.below(5)),
            10 => format!("int({cast}({v}) % {cast}({x}.shape[{axis}]))"),
            11 => format!("int({cast}(n) % {cast}({x}.shape[{axis}]))"),
            12 => format!("({v} - 1) % {x}.shape[{axis}]"),
            13 => format!("n % {x}.shape[{axis}]"),
            _ => "c".to_string(),
        }
    }
    /// An index of axis `axis` of array `x` (its coordinate is `v`).
    fn index(&mut self, v: &str, x: &str, axis: usize) -> String {
        let c = self.small();
        match self.rng.below(16) {
            14 => "-1".to_string(),
            15 => format!("{v} - {x}.shape[{axis}]"),
            0..=5 => v.to_string(),
            6 => format!("{v} + {c}"),
            7 => format!("{v} - {c}"),
            8 => c.to_string(),
            9 => format!("{v} % {x}.shape[{axis}]"),
            10 => format!("({v} + {c}) % {x}.shape[{axis}]"),
            11 => format!("{x}.shape[{axis}] - 1 - {v}"),
            12 => format!("{v} // 2"),
            _ => format!("{v} * 2"),
        }
    }
    /// A guard on coordinate `v` against array `x`'s axis `axis`, or none.
    fn guard(&mut self, v: &str, x: &str, axis: usize) -> Option<String> {
        let c = self.small();
        Some(match self.rng.below(10) {
            9 => format!("if {v} >= {c}:"),
            0 | 1 => return None,
            2 => format!("if {v} < {x}.shape[{axis}]:"),
            3 => format!("if {v} <= {x}.shape[{axis}]:"),
            4 => format!("if {v} + {c} < {x}.shape[{axis}]:"),
            5 => format!("if {v} >= {c} and {v} < {x}.shape[{axis}]:"),
            6 => format!("if {x}.shape[{axis}] > {v}:"),
            7 => format!("if {v} < {x}.shape[{axis}] - {c}:"),
            _ => "if n > 0:".to_string(),
        })
    }
}

/// The generator of modules.
pub struct Generator {
    modules: usize,
    /// Only this family (`FUZZ_WARP_MIX`), else all.
    pub only: Option<&'static str>,
}

impl Generator {
    pub fn new(only: Option<&'static str>) -> Generator {
        Generator { modules: 0, only }
    }

    /// A module of `kernels` kernels; of every 8 modules one has a user
    /// preamble (fewer kernels, all of which must come out unproven) and
    /// one native helpers (fewer kernels, half of them calling the helpers:
    /// those must come out unproven); native kernels are only in the latter.
    pub fn module(&mut self, rng: &mut Rng, kernels: usize, seed: u64) -> GenModule {
        let name = format!("fzw_{seed}_{}", self.modules);
        let preamble = self.modules % 8 == 7;
        let native = self.modules % 8 == 3;
        self.modules += 1;
        let mut text = String::from(HEADER);
        if preamble {
            text.push_str(
                "wp.set_module_options({\"extra_build_options\": wp.ModuleBuildOptions(extra_cpu_preamble=\"#define WPL_FUZZ_PREAMBLE 1\\n\", extra_cuda_preamble=\"#define WPL_FUZZ_PREAMBLE 1\\n\")})\n",
            );
        }
        text.push_str(HELPERS);
        if native {
            text.push_str(NATIVE);
        }
        let count = if preamble || native {
            kernels.min(6)
        } else {
            kernels
        };
        let mut out = Vec::new();
        for n in 0..count {
            let family = match self.only {
                Some(f) => f,
                None if native && n % 2 == 0 => ["native", "native-chain"][rng.below(2)],
                None => FAMILIES[rng.below(FAMILIES.len() - 2)],
            };
            if !native && family.starts_with("native") {
                // Native families need native helpers: not in this module.
                continue;
            }
            let mut k = kernel(rng, family, &format!("k{n}"));
            // A kernel that reaches native code (its family says so) or is in a
            // module with a preamble; others of a native module may be proven.
            k.gk.must_be_unproven |= preamble;
            let (gk, src) = k.finish();
            text.push_str(&src);
            out.push(gk);
        }
        GenModule {
            name,
            text,
            kernels: out,
        }
    }
}

struct Built {
    gk: GenKernel,
    params: Vec<(String, PKind)>,
    body: Vec<String>,
}

impl Built {
    fn finish(self) -> (GenKernel, String) {
        let mut s = String::from("\n@wp.kernel\n");
        let sig: Vec<String> = self
            .params
            .iter()
            .map(|(n, k)| {
                let t = match k {
                    PKind::Arr { ndim: 1, dt } => format!("wp.array(dtype={})", dt.py()),
                    PKind::Arr { ndim, dt } => format!("wp.array{ndim}d(dtype={})", dt.py()),
                    PKind::Int => "int".into(),
                    PKind::Float => "float".into(),
                    PKind::Struct => "S".into(),
                };
                format!("{n}: {t}")
            })
            .collect();
        let _ = writeln!(s, "def {}({}):", self.gk.name, sig.join(", "));
        for l in &self.body {
            let _ = writeln!(s, "{l}");
        }
        let mut gk = self.gk;
        gk.params = self.params;
        (gk, s)
    }
}

/// One kernel of `family`.
fn kernel(rng: &mut Rng, family: &'static str, name: &str) -> Built {
    let tid = match family {
        "dims" | "view" => 2 + rng.below(2),
        "coords" => 1 + rng.below(3),
        "reassign" => 1 + usize::from(rng.below(3) == 0),
        "mat" | "fixed" => 1 + rng.below(2),
        "struct" | "func" | "native" | "native-chain" | "loop" | "shape" => 1,
        _ => 1 + usize::from(rng.below(4) == 0),
    };
    let mut k = K {
        rng,
        params: Vec::new(),
        body: Vec::new(),
        tid,
    };
    let vars = ["i", "j", "k"];
    if family == "coords" && k.chance(2) {
        k.permuted_tid_line();
    } else {
        k.tid_line();
    }
    let mut must_be_unproven = false;
    match family {
        "plain" | "offset" | "guard" | "modulo" | "dims" => {
            let dt_a = [Dt::F32, Dt::I32, Dt::V3][k.rng.below(3)];
            let dt_b = [Dt::F32, Dt::I32][k.rng.below(2)];
            let nd = tid;
            k.arr("a", nd, dt_a);
            k.arr("b", nd, dt_b);
            k.params.push(("n".into(), PKind::Int));
            let mut depth = 0;
            for (axis, v) in vars.iter().enumerate().take(nd) {
                let x = if k.chance(2) { "a" } else { "b" };
                if family != "plain"
                    && let Some(g) = k.guard(v, x, axis)
                {
                    k.line(depth, g);
                    depth += 1;
                }
            }
            if family == "guard" && k.chance(2) {
                let x = k.pick(&["a", "b"]);
                let c = k.small();
                k.line(depth, format!("if i >= {x}.shape[0] - {c}:"));
                k.line(depth + 1, "return");
            }
            let mut ia = Vec::new();
            let mut ib = Vec::new();
            for (axis, v) in vars.iter().enumerate().take(nd) {
                if family == "plain" {
                    ia.push(v.to_string());
                    ib.push(v.to_string());
                } else if family == "modulo" {
                    let x = k.pick(&["a", "b"]);
                    let y = k.pick(&["a", "b"]);
                    let c = k.small();
                    ia.push(format!("{v} % {x}.shape[{axis}]"));
                    ib.push(match k.rng.below(3) {
                        0 => format!("({v} + {c}) % {y}.shape[{axis}]"),
                        1 => format!("{v} % {y}.shape[{axis}]"),
                        _ => v.to_string(),
                    });
                } else {
                    ia.push(k.index(v, "a", axis));
                    ib.push(k.index(v, "b", axis));
                }
            }
            if family == "dims" && k.chance(2) {
                ia.swap(0, 1);
            } else if family == "dims" && k.chance(3) {
                ia[1] = ia[0].clone();
            }
            let read = dt_a.to_float(&format!("a[{}]", ia.join(", ")));
            let val = dt_b.of_float(&format!("{read} + 1.0"));
            k.line(depth, format!("b[{}] = {val}", ib.join(", ")));
        }
        "coords" => {
            let nd_a = if k.chance(3) { 1 + k.rng.below(3) } else { tid };
            let nd_b = if k.chance(3) { 1 + k.rng.below(3) } else { tid };
            let dt = [Dt::F32, Dt::V3][k.rng.below(2)];
            k.arr("a", nd_a, dt);
            k.arr("b", nd_b, Dt::F32);
            k.params.push(("n".into(), PKind::Int));
            let held = k.chance(4);
            if held {
                k.params.push(("s".into(), PKind::Struct));
            }
            let arrays: Vec<(&str, usize)> = if held {
                vec![("a", nd_a), ("b", nd_b), ("s.a", 1), ("s.b", 1)]
            } else {
                vec![("a", nd_a), ("b", nd_b)]
            };
            // `c`: a copy of a coordinate.
            let v = ["i", "j", "k"][k.rng.below(tid)];
            k.line(0, format!("c = {v}"));
            let ia: Vec<String> = (0..nd_a).map(|_| k.coord_index(&arrays)).collect();
            let ib: Vec<String> = (0..nd_b).map(|_| k.coord_index(&arrays)).collect();
            let read = dt.to_float(&format!("a[{}]", ia.join(", ")));
            let (target, at) = if held {
                let is: String = k.coord_index(&arrays);
                let it: String = k.coord_index(&arrays);
                ("s.b", format!("{it}] = s.a[{is}] + {read}"))
            } else {
                ("b", format!("{}] = {read}", ib.join(", ")))
            };
            let (at, value) = at.split_once("] = ").unwrap_or((&at, "0.0"));
            match k.rng.below(5) {
                0 => k.line(0, format!("{target}[{at}] += {value}")),
                1 => k.line(0, format!("wp.atomic_add({target}, {at}, {value})")),
                2 => k.line(0, format!("wp.atomic_max({target}, {at}, {value})")),
                _ => k.line(0, format!("{target}[{at}] = {value}")),
            }
        }
        "reassign" => {
            // A coordinate changed after wp.tid(), then used as an index.
            k.arr("a", tid, Dt::F32);
            k.arr("b", tid, Dt::F32);
            k.params.push(("n".into(), PKind::Int));
            let c = 1 + k.rng.below(2);
            match k.rng.below(7) {
                0 => {
                    k.line(0, "if n > 1:");
                    k.line(1, format!("i = i + {c}"));
                }
                1 => {
                    k.line(0, "if n > 1:");
                    k.line(1, "i = n");
                    k.line(0, "else:");
                    k.line(1, "i = i + 0");
                }
                2 => {
                    k.line(0, format!("for q in range({c}):"));
                    k.line(1, "i = i + 1");
                }
                3 => {
                    k.line(0, "while i < n:");
                    k.line(1, "i = i + 1");
                }
                4 if tid == 1 => k.line(0, "i = wp.tid()"),
                5 => {
                    k.line(0, "t = i");
                    k.line(0, "i = 0");
                    k.line(0, "i = t");
                }
                _ => {
                    k.line(0, "i = i * 1");
                }
            }
            let at = vars[..tid].join(", ");
            if tid == 2 && k.chance(2) {
                k.line(0, "i, j = wp.tid()");
            }
            k.line(0, format!("b[{at}] = a[{at}]"));
        }
        "shape" => {
            let nd = 1 + k.rng.below(3);
            k.arr("a", nd, Dt::F32);
            k.arr("b", 1, Dt::I32);
            k.params.push(("n".into(), PKind::Int));
            let c = k.rng.below(4);
            let e = match k.rng.below(5) {
                4 => "a.shape[n]".into(),
                0 => format!("a.shape[{c}]"),
                1 => "a.shape[i % 4]".into(),
                2 => "a.shape[i % 5]".into(),
                _ => format!("a.shape[{}] + b.shape[0]", nd - 1),
            };
            if k.chance(2) {
                k.line(0, "if i < b.shape[0]:");
                k.line(1, format!("b[i] = {e}"));
            } else {
                k.line(0, format!("b[i] = {e}"));
            }
        }
        "vec" => {
            k.arr("a", tid, Dt::F32);
            k.arr("b", tid, Dt::F32);
            k.params.push(("n".into(), PKind::Int));
            let idx: Vec<String> = vars.iter().take(tid).map(|s| s.to_string()).collect();
            let at = idx.join(", ");
            let (ctor, len) = match k.rng.below(3) {
                0 => ("wp.vec3(1.0, 2.0, 3.0)", 3),
                1 => ("wp.vec4(1.0, 2.0, 3.0, 4.0)", 4),
                _ => ("wp.quat(0.0, 0.0, 0.0, 1.0)", 4),
            };
            k.line(0, format!("v = {ctor}"));
            let comp = |k: &mut K, len: usize| -> String {
                let c = k.rng.below(len);
                match k.rng.below(8) {
                    6 => "n".into(),
                    7 => format!("n % {len}"),
                    0 => c.to_string(),
                    1 => format!("i % {len}"),
                    2 => format!("i % {}", len + 1),
                    3 => "i".into(),
                    4 => format!("(i + {c}) % {len}"),
                    _ => format!("int(a.shape[0]) % {len}"),
                }
            };
            let w = comp(&mut k, len);
            let r = comp(&mut k, len);
            if k.chance(2) {
                k.line(0, format!("v[{w}] = a[{at}]"));
            }
            if k.chance(3) {
                k.line(0, format!("if {r} < {len}:"));
                k.line(1, format!("b[{at}] = v[{r}]"));
            } else {
                k.line(0, format!("b[{at}] = v[{r}]"));
            }
        }
        "mat" => {
            k.arr("a", tid, Dt::F32);
            k.arr("b", tid, Dt::F32);
            k.params.push(("n".into(), PKind::Int));
            let at = vars[..tid].join(", ");
            k.line(
                0,
                "m = wp.mat33(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)",
            );
            let second = if tid > 1 { "j" } else { "i" };
            let r = match k.rng.below(5) {
                4 => "n".to_string(),
                0 => "i % 3".to_string(),
                1 => "i % 4".to_string(),
                2 => k.rng.below(3).to_string(),
                _ => second.to_string(),
            };
            let c = match k.rng.below(3) {
                0 => format!("{second} % 3"),
                1 => k.rng.below(3).to_string(),
                _ => format!("({second} + 1) % 3"),
            };
            match k.rng.below(3) {
                0 => k.line(0, format!("m[{r}] = wp.vec3(a[{at}])")),
                1 => k.line(0, format!("m[{r}, {c}] = a[{at}]")),
                _ => {}
            }
            k.line(0, format!("b[{at}] = m[{r}, {c}] + m[{c}][{r}]"));
        }
        "fixed" => {
            k.arr("a", tid, Dt::F32);
            k.arr("b", tid, Dt::F32);
            k.params.push(("n".into(), PKind::Int));
            let at = vars[..tid].join(", ");
            let n = [1, 3, 4][k.rng.below(3)];
            k.line(0, format!("arr = wp.zeros(shape=({n},), dtype=float)"));
            let w = match k.rng.below(5) {
                4 => "n".to_string(),
                0 => format!("i % {n}"),
                1 => format!("i % {}", n + 1),
                2 => k.rng.below(n).to_string(),
                _ => "i".into(),
            };
            let r = match k.rng.below(3) {
                0 => format!("i % {n}"),
                1 => format!("(i + 1) % {n}"),
                _ => k.rng.below(n).to_string(),
            };
            k.line(0, format!("arr[{w}] = a[{at}]"));
            k.line(0, format!("b[{at}] = arr[{r}]"));
        }
        "func" => {
            k.arr("a", 1, Dt::F32);
            k.arr("b", 1, Dt::F32);
            let c = k.small();
            let read = match k.rng.below(5) {
                0 => "get(a, i)".to_string(),
                1 => format!("get(a, i + {c})"),
                2 => "get_next(a, i)".into(),
                3 => format!("guarded(a, i + {c})"),
                _ => "a[i]".into(),
            };
            match k.rng.below(3) {
                0 => k.line(0, format!("put(b, i, {read})")),
                1 => k.line(0, format!("put(b, i - {c}, {read})")),
                _ => k.line(0, format!("b[i] = {read}")),
            }
        }
        "struct" => {
            k.params.push(("s".into(), PKind::Struct));
            let c = k.small();
            let w = match k.rng.below(3) {
                0 => "i".to_string(),
                1 => format!("i + {c}"),
                _ => "i % s.b.shape[0]".into(),
            };
            let r = match k.rng.below(3) {
                0 => "i".to_string(),
                1 => format!("i - {c}"),
                _ => "i % s.a.shape[0]".into(),
            };
            if k.chance(2) {
                k.line(0, "if i < s.b.shape[0]:");
                k.line(1, format!("s.b[{w}] = s.a[{r}] * s.scale"));
            } else {
                k.line(0, format!("s.b[{w}] = s.a[{r}] * s.scale"));
            }
        }
        "view" => {
            k.arr("a", tid, Dt::F32);
            k.arr("b", 1, Dt::F32);
            k.line(0, "r = a[i]");
            if tid == 2 {
                let jj = k.pick(&["j", "j + 1", "j % r.shape[0]"]);
                k.line(0, format!("b[i] = r[{jj}]"));
            } else {
                let kk = k.pick(&["k", "k + 1", "0"]);
                k.line(0, format!("b[i] = r[j, {kk}] + get2(a[i], j, k)"));
            }
        }
        "loop" => {
            k.arr("a", 1, Dt::F32);
            k.arr("b", 1, Dt::F32);
            let c = 1 + k.rng.below(3);
            k.line(0, "t = float(0.0)");
            match k.rng.below(3) {
                0 => k.line(0, format!("for q in range({c}):")),
                1 => k.line(0, "for q in range(a.shape[0]):"),
                _ => k.line(0, "for q in range(b.shape[0] + 1):"),
            }
            k.line(1, "t += a[q]");
            k.line(0, "b[i] = t");
        }
        "native" | "native-chain" => {
            must_be_unproven = true;
            k.arr("a", 1, Dt::F32);
            k.arr("b", 1, Dt::F32);
            let f = if family == "native" {
                "native_get"
            } else {
                "via_native"
            };
            k.line(0, format!("b[i] = {f}(a, i)"));
        }
        other => unreachable!("family {other}"),
    }
    Built {
        gk: GenKernel {
            name: name.to_string(),
            tid,
            params: Vec::new(),
            family,
            must_be_unproven,
        },
        params: k.params,
        body: k.body,
    }
}
