//! Random CUDA C kernels inside the grammar of the CUDA C proof reader
//! (`warp-proof/src/source/cuda_c/mod.rs`), and mutations across it.
//!
//! A clean kernel uses every form of the grammar the host build emulates:
//! 1- to 4-D launch bounds, grid-stride loops and the lean prologue,
//! coordinate definitions, scalar, vector and matrix locals, `__shared__`
//! scalars, `if`/`else`, `for` (with `#pragma unroll`), `while`,
//! `do`/`while`, jumps, reads and writes through `wl::index` with every
//! index form (coordinates, also of axes past the launch's, the work item,
//! `blockIdx.x`, constants, casts), atomics on `wl::address` and on shared
//! scalars, constant components of vector and matrix elements and
//! parameters, and the arithmetic, shuffle and barrier built-ins. It is
//! written to compile with NVRTC without a warning: every local is read,
//! no statement follows a jump, no comparison is pointless.
//!
//! A mutated kernel has an [`Attack`] planted: one statement (or head, or
//! whole body) from a class of ways out of the grammar that a compiler
//! reads differently from a token-level reader. Each class holds the
//! attacks of `/work/shared/attacks/cuda-c/` and more of their kind, and
//! each plants a write whose index is out of range once the attack works.
//! [`token_mutation`] edits a text's tokens blindly (delete, duplicate,
//! swap, replace, insert).

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::engine::Rng;

/// A C scalar type the generator declares, casts and computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// `int`.
    Int,
    /// `unsigned int`.
    UInt,
    /// `long long`.
    LongLong,
    /// `unsigned long long`.
    ULongLong,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `size_t` (locals only: no Warp dtype).
    SizeT,
}

impl Scalar {
    /// The parameter and element types (every one has a Warp dtype).
    const WARP: [Scalar; 6] = [
        Scalar::Int,
        Scalar::UInt,
        Scalar::LongLong,
        Scalar::ULongLong,
        Scalar::Float,
        Scalar::Double,
    ];

    /// One of the type's spellings (C's or Warp's).
    fn spell(self, rng: &mut Rng) -> &'static str {
        let names: &[&str] = match self {
            Scalar::Int => &["int", "int", "wl::int32", "int32_t"],
            Scalar::UInt => &["unsigned int", "unsigned", "wl::uint32", "uint32_t"],
            Scalar::LongLong => &["long long", "wl::int64", "int64_t"],
            Scalar::ULongLong => &["unsigned long long", "wl::uint64", "uint64_t"],
            Scalar::Float => &["float", "float", "wl::float32"],
            Scalar::Double => &["double", "wl::float64"],
            Scalar::SizeT => &["size_t"],
        };
        names[rng.below(names.len())]
    }

    /// The type as a cast: `T(x)` for one-word names, `(T)x` otherwise.
    fn cast(self, rng: &mut Rng, x: &str) -> String {
        let one_word = match self {
            Scalar::Int => Some("int"),
            Scalar::UInt => Some("unsigned"),
            Scalar::Float => Some("float"),
            Scalar::Double => Some("double"),
            Scalar::SizeT => Some("size_t"),
            Scalar::LongLong | Scalar::ULongLong => None,
        };
        let c_name = match self {
            Scalar::Int => "int",
            Scalar::UInt => "unsigned int",
            Scalar::LongLong => "long long",
            Scalar::ULongLong => "unsigned long long",
            Scalar::Float => "float",
            Scalar::Double => "double",
            Scalar::SizeT => "size_t",
        };
        match one_word {
            Some(w) if rng.below(8) == 0 => format!("{w}({x})"),
            _ => format!("(({c_name}){x})"),
        }
    }

    /// Whether the type is an integer.
    fn is_int(self) -> bool {
        !matches!(self, Scalar::Float | Scalar::Double)
    }

    /// A small literal of the type, never 0 (no pointless comparison, no
    /// division by zero).
    fn literal(self, rng: &mut Rng) -> String {
        let l: &[&str] = match self {
            Scalar::Int => &["1", "2", "3", "5", "7", "0x10", "9"],
            Scalar::UInt | Scalar::SizeT => &["1u", "2u", "3u", "7u", "0x8u", "5U"],
            Scalar::LongLong => &["1ll", "3ll", "5LL", "2ll"],
            Scalar::ULongLong => &["1ull", "2ull", "6ULL"],
            Scalar::Float => &["1.0f", "0.5f", "2.0f", "3.25f", "0.125f", "1e-3f", "1.5F"],
            Scalar::Double => &["1.0", "0.5", "2.5", "1e-2", "0.75"],
        };
        l[rng.below(l.len())].to_string()
    }
}

/// A value's type: a scalar, a vector, a matrix (of a scalar), a quaternion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// A scalar.
    S(Scalar),
    /// `vec_t<L, T>`.
    V(u8, Scalar),
    /// `mat_t<R, C, T>`.
    M(u8, u8, Scalar),
    /// `quat_t<float>` (no component the grammar reads).
    Q,
}

impl Ty {
    /// Warp's spelling of a composite type, a scalar's C or Warp spelling.
    fn spell(self, rng: &mut Rng) -> String {
        let suffix = |s: Scalar| match s {
            Scalar::Double => "d",
            Scalar::Int => "i",
            _ => "f",
        };
        match self {
            Ty::S(s) => s.spell(rng).to_string(),
            Ty::V(6, s) => format!("wl::spatial_vector{}", suffix(s)),
            Ty::V(l, Scalar::Float) if rng.below(3) == 0 => format!("wl::vec{l}"),
            Ty::V(l, s) => format!("wl::vec{l}{}", suffix(s)),
            Ty::M(6, _, s) => format!("wl::spatial_matrix{}", suffix(s)),
            Ty::M(r, c, Scalar::Float) if rng.below(3) == 0 => format!("wl::mat{r}{c}"),
            Ty::M(r, c, s) => format!("wl::mat{r}{c}{}", suffix(s)),
            Ty::Q => "wl::quatf".to_string(),
        }
    }

    /// The scalar a component (or the value) holds.
    fn scalar(self) -> Scalar {
        match self {
            Ty::S(s) | Ty::V(_, s) | Ty::M(_, _, s) => s,
            Ty::Q => Scalar::Float,
        }
    }

    /// A random type of a parameter, an element or a local.
    fn random(rng: &mut Rng) -> Ty {
        match rng.below(10) {
            0 | 1 => Ty::V(
                [2, 3, 4, 6][rng.below(4)],
                [Scalar::Float, Scalar::Double][rng.below(2)],
            ),
            2 => Ty::V([2, 3, 4][rng.below(3)], Scalar::Int),
            3 => {
                let r = [2, 3, 4, 6][rng.below(4)];
                Ty::M(r, r, [Scalar::Float, Scalar::Double][rng.below(2)])
            }
            _ => Ty::S(Scalar::WARP[rng.below(Scalar::WARP.len())]),
        }
    }

    /// A constant component of the type (`.c[K]`, `.data[R][C]`), empty
    /// for a scalar.
    fn component(self, rng: &mut Rng) -> String {
        match self {
            Ty::V(l, _) => format!(".c[{}]", rng.below(usize::from(l))),
            Ty::M(r, c, _) => format!(
                ".data[{}][{}]",
                rng.below(usize::from(r)),
                rng.below(usize::from(c))
            ),
            Ty::S(_) | Ty::Q => String::new(),
        }
    }
}

/// The classes of planted attacks. Each is a way a text can reach memory
/// outside its arrays that a reader of tokens may miss; every variant
/// plants a write that goes out of range once the attack works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// `c.i += n;` and every other plain write of a coordinate (the hole
    /// `Weaken::CoordinateWrites` opens).
    CoordinateWrite,
    /// `(c.i) += n;` (paren-write-coordinate.cu).
    ParenWrite,
    /// `(n > 0 ? c.i : c.j) += n;`: a conditional is an lvalue in C++.
    TernaryWrite,
    /// `auto&& r = c.i; r += n;` (rvalue-ref-alias.cu) and other references.
    ReferenceAlias,
    /// `atomicAdd(&c.i, n);`: an atomic writes what it points to.
    AtomicOnCoordinate,
    /// `int q = 0, idx = n;` (comma-declarator-shadow.cu).
    CommaShadow,
    /// `if (int idx = n)`, `for (int idx = n; ...)`: declarations in
    /// conditions and loop heads, and plain shadowing in an inner block.
    Shadow,
    /// A parameter named `blockIdx` (blockidx-parameter.cu), and locals
    /// hiding built-ins.
    BuiltinShadow,
    /// `(f)(...)`: a parenthesised callee (paren-call-memset.cu).
    ParenCall,
    /// `/* ... */ #define i i + n` (define-after-comment.cu) and other
    /// directives the compiler obeys.
    Directive,
    /// `*\` + newline + `/` ends a block comment (splice-ends-block-comment.cu).
    Splice,
    /// `switch`/`case` into a loop (switch-into-loop.cu), `goto`.
    Jump,
    /// An index that is no coordinate, work item, `blockIdx.x` or
    /// constant: `c.i + n`, `n`, narrowing casts of constants, ...
    IndexForm,
    /// A write to the work-item index: `idx += n;`, `++idx;`.
    WorkItemWrite,
    /// A write to the launch bounds: `dim.size += n;`.
    BoundsWrite,
    /// `dim.shape[K]` past the launch's dimensions.
    ShapePastDims,
    /// A coordinate copied or made from something other than the work item.
    CoordinateCopy,
    /// An array copied or aliased: `wl::array_t<float> b = a;`.
    ArrayAlias,
    /// A pointer: `float* p = &wl::index(a, c.i); p[n] = 1;`.
    Pointer,
    /// A component past a vector's or matrix's extent, or not constant.
    Component,
    /// Lexical tricks: universal character names, digraphs, character
    /// literals, raw strings, non-ASCII names, odd pragmas.
    Lexical,
    /// A lambda that writes a coordinate.
    Lambda,
    /// A lean prologue that does not bound the work item.
    LeanHead,
    /// A hand-rolled or altered grid-stride loop.
    GridStride,
}

impl Attack {
    /// Every class, in the order a focus or a seed picks them.
    pub const ALL: [Attack; 24] = [
        Attack::CoordinateWrite,
        Attack::ParenWrite,
        Attack::TernaryWrite,
        Attack::ReferenceAlias,
        Attack::AtomicOnCoordinate,
        Attack::CommaShadow,
        Attack::Shadow,
        Attack::BuiltinShadow,
        Attack::ParenCall,
        Attack::Directive,
        Attack::Splice,
        Attack::Jump,
        Attack::IndexForm,
        Attack::WorkItemWrite,
        Attack::BoundsWrite,
        Attack::ShapePastDims,
        Attack::CoordinateCopy,
        Attack::ArrayAlias,
        Attack::Pointer,
        Attack::Component,
        Attack::Lexical,
        Attack::Lambda,
        Attack::LeanHead,
        Attack::GridStride,
    ];

    /// The class's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Attack::CoordinateWrite => "coordinate-write",
            Attack::ParenWrite => "paren-write",
            Attack::TernaryWrite => "ternary-write",
            Attack::ReferenceAlias => "reference-alias",
            Attack::AtomicOnCoordinate => "atomic-on-coordinate",
            Attack::CommaShadow => "comma-shadow",
            Attack::Shadow => "shadow",
            Attack::BuiltinShadow => "builtin-shadow",
            Attack::ParenCall => "paren-call",
            Attack::Directive => "directive",
            Attack::Splice => "splice",
            Attack::Jump => "jump",
            Attack::IndexForm => "index-form",
            Attack::WorkItemWrite => "work-item-write",
            Attack::BoundsWrite => "bounds-write",
            Attack::ShapePastDims => "shape-past-dims",
            Attack::CoordinateCopy => "coordinate-copy",
            Attack::ArrayAlias => "array-alias",
            Attack::Pointer => "pointer",
            Attack::Component => "component",
            Attack::Lexical => "lexical",
            Attack::Lambda => "lambda",
            Attack::LeanHead => "lean-head",
            Attack::GridStride => "grid-stride",
        }
    }
}

/// Where a text came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A clean kernel of the grammar.
    Clean,
    /// A clean kernel with an attack planted.
    Planted(Attack),
    /// A text whose tokens were edited blindly ([`token_mutation`]).
    TokenMutated,
    /// A kept regression text.
    Regression,
}

impl Origin {
    /// The origin's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Clean => "clean",
            Origin::Planted(a) => a.name(),
            Origin::TokenMutated => "token-mutation",
            Origin::Regression => "regression",
        }
    }
}

/// One generated text.
#[derive(Clone, Debug)]
pub struct Text {
    /// The CUDA C text.
    pub text: String,
    /// Where it came from.
    pub origin: Origin,
    /// The kernel an attack is planted in.
    pub attacked: Option<String>,
}

/// What the generator mixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// Clean, planted (every class) and token-edited texts.
    Default,
    /// Clean texts only.
    Clean,
    /// Every text with an attack of this class planted.
    Focus(Attack),
}

impl Mix {
    /// `default`, `clean` or an attack class's name ([`Attack::name`]).
    pub fn parse(s: &str) -> Option<Mix> {
        match s {
            "default" => Some(Mix::Default),
            "clean" => Some(Mix::Clean),
            _ => Attack::ALL
                .iter()
                .find(|a| a.name() == s)
                .map(|&a| Mix::Focus(a)),
        }
    }
}

/// The generator: kernel names stay unique over its life (`k0`, `k1`, ...),
/// so the texts of a batch link into one host program.
pub struct Generator {
    next_kernel: u64,
    mix: Mix,
}

impl Generator {
    /// A generator of the given mix.
    pub fn new(mix: Mix) -> Self {
        Generator {
            next_kernel: 0,
            mix,
        }
    }

    /// One text: one or two kernels, clean, with an attack planted, or with
    /// its tokens edited.
    pub fn text(&mut self, rng: &mut Rng) -> Text {
        let (attack, token) = match self.mix {
            Mix::Focus(a) => (Some(a), false),
            Mix::Clean => (None, false),
            Mix::Default => match rng.below(20) {
                0..=5 => (None, false),
                6..=16 => (Some(Attack::ALL[rng.below(Attack::ALL.len())]), false),
                _ => (None, true),
            },
        };
        let kernels = if rng.below(5) == 0 { 2 } else { 1 };
        let attacked = rng.below(kernels);
        let mut text = String::from(if rng.below(4) == 0 {
            "#include <warp_launch.h>\n"
        } else {
            "#include \"warp_launch.h\"\n"
        });
        if rng.below(6) == 0 {
            text.push_str("#pragma once\n");
        }
        let mut attacked_name = None;
        for k in 0..kernels {
            let name = format!("k{}", self.next_kernel);
            self.next_kernel += 1;
            let plant = if k == attacked { attack } else { None };
            if plant.is_some() {
                attacked_name = Some(name.clone());
            }
            text.push_str(&KernelGen::new(rng, name, plant).kernel());
        }
        if token {
            return Text {
                text: token_mutation(rng, &text),
                origin: Origin::TokenMutated,
                attacked: None,
            };
        }
        Text {
            text,
            origin: attack.map_or(Origin::Clean, Origin::Planted),
            attacked: attacked_name,
        }
    }
}

/// A name the body declared, with what the generator knows of it.
#[derive(Clone, Debug)]
struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
    shared: bool,
    read: bool,
}

/// An array parameter.
#[derive(Clone, Debug)]
struct Arr {
    name: String,
    elem: Ty,
    ndim: usize,
}

/// What kind of statement list is being generated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Region {
    /// Before the work loop (no work item, no coordinate).
    Outside,
    /// Inside the work region: a work item is in scope.
    Work,
}

/// The state of one kernel under generation.
struct KernelGen<'r> {
    rng: &'r mut Rng,
    name: String,
    plant: Option<Attack>,
    planted: bool,
    out: Vec<String>,
    indent: usize,
    n_dims: usize,
    dim: String,
    arrays: Vec<Arr>,
    values: Vec<Var>,
    /// The int parameter attacks offset indices by, and its type.
    offset: String,
    offset_scalar: Scalar,
    /// Scopes of locals (innermost last).
    scopes: Vec<Vec<Var>>,
    /// Work items in scope (innermost last).
    work: Vec<String>,
    /// Coordinates in scope, each with whether it was read.
    coords: Vec<(String, bool, usize)>,
    /// Enclosing loops (break and continue allowed when not empty).
    loops: usize,
    /// Every name used so far (no name is declared twice).
    taken: HashSet<String>,
    counter: usize,
    lean: bool,
    budget: usize,
}

/// Names of the launch bounds, arrays, values, work items and coordinates:
/// disjoint pools, so no generated name hides another.
const BOUNDS_NAMES: &[&str] = &["dim", "bounds", "launch", "dom"];
const ARRAY_NAMES: &[&str] = &[
    "a", "b", "x", "y", "out", "src", "dst", "acc", "v", "grid_", "field",
];
const VALUE_NAMES: &[&str] = &[
    "s", "alpha", "scale", "u", "m", "p", "q3", "beta", "gain", "w0",
];
const OFFSET_NAMES: &[&str] = &["n", "off", "count", "shift"];
const WORK_NAMES: &[&str] = &["idx", "tid", "item", "gi", "w"];
const COORD_NAMES: &[&str] = &["c", "co", "pos", "at", "ct"];

impl<'r> KernelGen<'r> {
    fn new(rng: &'r mut Rng, name: String, plant: Option<Attack>) -> Self {
        let n_dims = 1 + rng.below(4);
        KernelGen {
            rng,
            name,
            plant,
            planted: false,
            out: Vec::new(),
            indent: 0,
            n_dims,
            dim: String::new(),
            arrays: Vec::new(),
            values: Vec::new(),
            offset: String::new(),
            offset_scalar: Scalar::Int,
            scopes: Vec::new(),
            work: Vec::new(),
            coords: Vec::new(),
            loops: 0,
            taken: HashSet::new(),
            counter: 0,
            lean: false,
            budget: 0,
        }
    }

    fn pick<'a>(&mut self, xs: &'a [&'a str]) -> &'a str {
        xs[self.rng.below(xs.len())]
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.rng.below(one_in) == 0
    }

    /// A fresh name from `pool` (with a number when the pool's names are
    /// taken).
    fn fresh(&mut self, pool: &[&str]) -> String {
        for _ in 0..8 {
            let n = self.pick(pool).to_string();
            if self.taken.insert(n.clone()) {
                return n;
            }
        }
        loop {
            self.counter += 1;
            let n = format!("{}{}", self.pick(pool), self.counter);
            if self.taken.insert(n.clone()) {
                return n;
            }
        }
    }

    /// A fresh local name (`t3`, `f4`, ...).
    fn local_name(&mut self, prefix: &str) -> String {
        self.counter += 1;
        let n = format!("{prefix}{}", self.counter);
        self.taken.insert(n.clone());
        n
    }

    fn line(&mut self, s: impl AsRef<str>) {
        let pad = "    ".repeat(self.indent);
        self.out.push(format!("{pad}{}", s.as_ref()));
    }

    /// A raw line (no indentation: directives, splices).
    fn raw(&mut self, s: impl Into<String>) {
        self.out.push(s.into());
    }

    // ---- the kernel ----

    fn kernel(mut self) -> String {
        self.dim = self.fresh(BOUNDS_NAMES);
        self.offset = self.fresh(OFFSET_NAMES);
        let n_arrays = 1 + self.rng.below(3);
        for k in 0..n_arrays {
            let name = self.fresh(ARRAY_NAMES);
            // The first array holds scalars: sinks and planted writes use it.
            let elem = if k == 0 {
                Ty::S(Scalar::WARP[self.rng.below(Scalar::WARP.len())])
            } else {
                Ty::random(self.rng)
            };
            let ndim = if self.chance(3) {
                1 + self.rng.below(4)
            } else {
                self.n_dims.min(1 + self.rng.below(4))
            };
            self.arrays.push(Arr { name, elem, ndim });
        }
        if matches!(self.plant, Some(Attack::Component))
            && !self
                .arrays
                .iter()
                .any(|a| matches!(a.elem, Ty::V(..) | Ty::M(..)))
        {
            let name = self.fresh(ARRAY_NAMES);
            self.arrays.push(Arr {
                name,
                elem: Ty::V(3, Scalar::Float),
                ndim: 1,
            });
        }
        for _ in 0..self.rng.below(3) {
            let name = self.fresh(VALUE_NAMES);
            let ty = if self.chance(6) {
                Ty::Q
            } else {
                Ty::random(self.rng)
            };
            let mutable = !self.chance(4);
            self.values.push(Var {
                name,
                ty,
                mutable,
                shared: false,
                read: false,
            });
        }
        self.lean = self.chance(3) || matches!(self.plant, Some(Attack::LeanHead));
        if matches!(self.plant, Some(Attack::GridStride | Attack::Jump)) {
            self.lean = false;
        }
        let head = self.head();
        self.out.push(head);
        self.indent = 1;
        self.scopes.push(Vec::new());
        self.budget = 6 + self.rng.below(14);
        if matches!(self.plant, Some(Attack::Jump)) && self.chance(2) {
            self.switch_into_loop();
        } else if self.lean {
            self.lean_body();
        } else {
            self.grid_stride_body();
        }
        self.sinks();
        // A by-value parameter written and never read: NVRTC warns.
        let written: Vec<Var> = self
            .values
            .iter()
            .filter(|v| v.shared && !v.read)
            .cloned()
            .collect();
        for v in written {
            let a = self.scalar_array();
            let idx = self.indices(&a);
            let comp = v.ty.component(self.rng);
            let val = Scalar::Double.cast(self.rng, &format!("{}{comp}", v.name));
            self.line(format!(
                "wl::index({}, {}) += {val};",
                a.name,
                idx.join(", ")
            ));
        }
        self.scopes.pop();
        self.indent = 0;
        self.line("}");
        assert!(
            self.plant.is_none() || self.planted,
            "{}: the attack {:?} was not planted",
            self.name,
            self.plant
        );
        let mut s = self.out.join("\n");
        s.push('\n');
        s
    }

    fn head(&mut self) -> String {
        let mut h = String::from("extern \"C\" __global__ ");
        if self.chance(5) {
            let _ = write!(
                h,
                "__launch_bounds__({}) ",
                ["64", "128", "256", "1024"][self.rng.below(4)]
            );
        }
        let _ = write!(h, "void {}(", self.name);
        if self.chance(6) {
            h.push_str("const ");
        }
        let _ = write!(h, "wl::launch_bounds_t<{}> {}", self.n_dims, self.dim);
        // Parameters in a random order: arrays, values, the offset, and
        // what an attack needs.
        let mut params: Vec<String> = Vec::new();
        for a in self.arrays.clone() {
            let c = if self.chance(8) { "const " } else { "" };
            params.push(format!(
                "{c}wl::array_t<{}> {}",
                a.elem.spell(self.rng),
                a.name
            ));
        }
        for v in self.values.clone() {
            let c = if v.mutable { "" } else { "const " };
            params.push(format!("{c}{} {}", v.ty.spell(self.rng), v.name));
        }
        let offset_ty = ["int", "int", "wl::int32", "int32_t", "long long"][self.rng.below(5)];
        if offset_ty == "long long" {
            self.offset_scalar = Scalar::LongLong;
        }
        params.push(format!("{offset_ty} {}", self.offset));
        let shadow_param = self.chance(2);
        match self.plant {
            Some(Attack::BuiltinShadow) if shadow_param => {
                let (ty, name) = [
                    ("wl::quatf", "blockIdx"),
                    ("wl::quatf", "threadIdx"),
                    ("int", "warpSize"),
                    ("wl::quatf", "gridDim"),
                ][self.rng.below(4)];
                params.push(format!("{ty} {name}"));
                self.taken.insert(name.to_string());
            }
            Some(Attack::ParenCall) => {
                params.push("unsigned long long addr".to_string());
                self.taken.insert("addr".into());
            }
            _ => {}
        }
        // Shuffle (the bounds, in the head already, stay first).
        for k in (1..params.len()).rev() {
            let j = self.rng.below(k + 1);
            params.swap(k, j);
        }
        for p in params {
            let _ = write!(h, ", {p}");
        }
        h.push_str(") {");
        h
    }

    fn lean_body(&mut self) {
        let w = self.fresh(WORK_NAMES);
        if matches!(self.plant, Some(Attack::LeanHead)) {
            self.planted = true;
            self.bad_lean_head(&w);
        } else {
            let c = if self.chance(5) { "const " } else { "" };
            self.line(format!("{c}size_t {w} = wl::lean_index();"));
            let dim = self.dim.clone();
            if self.chance(3) {
                self.line(format!("if ({w} >= {dim}.size) return;"));
            } else {
                self.line(format!("if ({w} >= {dim}.size)"));
                self.line("    return;");
            }
        }
        self.work.push(w);
        if !self.chance(8) {
            self.coord_decl();
        }
        self.statements(0, Region::Work, self.budget);
        self.plant_now();
    }

    fn grid_stride_body(&mut self) {
        let loops = if self.chance(6) { 2 } else { 1 };
        let pre = self.rng.below(3);
        self.statements(1, Region::Outside, pre);
        for _ in 0..loops {
            let w = self.fresh(WORK_NAMES);
            let dim = self.dim.clone();
            if matches!(self.plant, Some(Attack::GridStride)) && !self.planted {
                self.planted = true;
                self.bad_grid_stride(&w);
                continue;
            }
            // A braced body where an attack is still to be planted.
            let braces = !self.chance(10) || (self.plant.is_some() && !self.planted);
            self.line(format!(
                "WL_GRID_STRIDE_LOOP({w}, {dim}){}",
                if braces { " {" } else { "" }
            ));
            self.indent += 1;
            self.work.push(w);
            self.scopes.push(Vec::new());
            self.loops += 1;
            if braces {
                if !self.chance(8) {
                    self.coord_decl();
                }
                let b = self.budget;
                self.statements(0, Region::Work, b);
                self.plant_now();
                self.sinks();
            } else {
                // A single statement as the loop's body.
                let a = self.scalar_array();
                let idx = self.indices(&a);
                let v = a.elem.scalar().literal(self.rng);
                self.line(format!("wl::index({}, {}) = {v};", a.name, idx.join(", ")));
            }
            self.loops -= 1;
            self.scopes.pop();
            self.work.pop();
            self.coords.retain(|c| c.2 <= self.scopes.len());
            self.indent -= 1;
            if braces {
                self.line("}");
            }
        }
        let post = self.rng.below(2);
        self.statements(1, Region::Outside, post);
    }

    /// `[const] wl::coord_t C = wl::coord(W, DIM);`
    fn coord_decl(&mut self) {
        let c = self.fresh(COORD_NAMES);
        let w = self.work.last().cloned().unwrap_or_default();
        let k = if self.chance(6) { "const " } else { "" };
        let dim = self.dim.clone();
        self.line(format!("{k}wl::coord_t {c} = wl::coord({w}, {dim});"));
        self.coords.push((c, false, self.scopes.len()));
    }

    // ---- statements ----

    fn statements(&mut self, depth: usize, region: Region, count: usize) {
        for _ in 0..count {
            if region == Region::Work && self.plant.is_some() && !self.planted && self.chance(4) {
                self.plant_now();
                continue;
            }
            self.statement(depth, region);
        }
    }

    fn statement(&mut self, depth: usize, region: Region) {
        let deep = depth >= 3;
        match self.rng.below(if deep { 9 } else { 16 }) {
            0 | 1 => self.declare_local(),
            2 | 3 => self.array_write(),
            4 => self.atomic(),
            5 => self.assign_local(),
            6 => self.shared_decl(),
            7 => self.barrier(),
            8 => {
                if self.chance(2) {
                    self.line(";");
                } else {
                    self.array_write();
                }
            }
            9 | 10 => self.if_statement(depth, region),
            11 => self.for_loop(depth, region),
            12 => self.while_loop(depth, region),
            13 => self.do_loop(depth, region),
            14 => self.block(depth, region),
            _ => {
                if region == Region::Work && !self.coords.is_empty() && self.chance(3) {
                    // A second coordinate of the same work item.
                    self.coord_decl();
                } else if self.lean && region == Region::Work && self.chance(3) {
                    self.nested_grid_stride(depth);
                } else {
                    self.array_write();
                }
            }
        }
    }

    fn block(&mut self, depth: usize, region: Region) {
        self.line("{");
        self.inner(depth, region, None);
        self.line("}");
    }

    /// The statements of a braced body (the caller wrote the `{` and
    /// writes the `}`); `jump` ends it with that jump.
    fn inner(&mut self, depth: usize, region: Region, jump: Option<&str>) {
        self.indent += 1;
        self.scopes.push(Vec::new());
        let n = 1 + self.rng.below(3);
        self.statements(depth + 1, region, n);
        self.sinks();
        if let Some(j) = jump {
            self.line(j);
        }
        self.scopes.pop();
        self.coords.retain(|c| c.2 <= self.scopes.len());
        self.indent -= 1;
    }

    fn if_statement(&mut self, depth: usize, region: Region) {
        let cond = self.cond(2);
        self.line(format!("if ({cond}) {{"));
        let jump = if self.chance(3) {
            if self.loops > 0 {
                Some(["break;", "continue;", "return;"][self.rng.below(3)])
            } else {
                Some("return;")
            }
        } else {
            None
        };
        self.inner(depth, region, jump);
        if self.chance(3) {
            self.line("} else {");
            self.inner(depth, region, None);
        }
        self.line("}");
    }

    fn for_loop(&mut self, depth: usize, region: Region) {
        let t = self.local_name("t");
        let bound = 1 + self.rng.below(4);
        match self.rng.below(4) {
            0 => self.raw("#pragma unroll".to_string()),
            1 => {
                let k = 1 + self.rng.below(4);
                self.raw(format!("#pragma unroll {k}"));
            }
            _ => {}
        }
        let (ty, lit) = if self.chance(3) {
            ("unsigned", format!("{bound}u"))
        } else {
            ("int", bound.to_string())
        };
        let step = ["++{t}", "{t}++", "{t} += 1"][self.rng.below(3)].replace("{t}", &t);
        self.line(format!("for ({ty} {t} = 0; {t} < {lit}; {step}) {{"));
        self.scopes.push(vec![Var {
            name: t,
            ty: Ty::S(if ty == "int" {
                Scalar::Int
            } else {
                Scalar::UInt
            }),
            mutable: false,
            shared: false,
            read: true,
        }]);
        self.loops += 1;
        self.inner(depth, region, None);
        self.loops -= 1;
        self.scopes.pop();
        self.line("}");
    }

    fn while_loop(&mut self, depth: usize, region: Region) {
        let t = self.local_name("w");
        self.line(format!("int {t} = 0;"));
        let k = 1 + self.rng.below(3);
        self.line(format!("while ({t}++ < {k}) {{"));
        self.loops += 1;
        self.inner(depth, region, None);
        self.loops -= 1;
        self.line("}");
    }

    fn do_loop(&mut self, depth: usize, region: Region) {
        let t = self.local_name("d");
        self.line(format!("int {t} = 0;"));
        self.line("do {");
        self.loops += 1;
        self.inner(depth, region, None);
        self.loops -= 1;
        let k = 1 + self.rng.below(3);
        self.line(format!("}} while (++{t} < {k});"));
    }

    /// A grid-stride loop inside a lean kernel's body (its own work item).
    fn nested_grid_stride(&mut self, depth: usize) {
        let w = self.fresh(WORK_NAMES);
        let dim = self.dim.clone();
        self.line(format!("WL_GRID_STRIDE_LOOP({w}, {dim}) {{"));
        self.work.push(w);
        self.indent += 1;
        self.scopes.push(Vec::new());
        self.coord_decl();
        self.loops += 1;
        let n = 1 + self.rng.below(2);
        self.statements(depth + 1, Region::Work, n);
        self.loops -= 1;
        self.sinks();
        self.scopes.pop();
        self.coords.retain(|c| c.2 <= self.scopes.len());
        self.indent -= 1;
        self.work.pop();
        self.line("}");
    }

    fn declare_local(&mut self) {
        let ty = if self.chance(4) {
            match self.composite_source() {
                Some((ty, src)) => {
                    let name = self.local_name("v");
                    // Not `auto`: the reader takes the components of a
                    // local whose declaration names its type, only.
                    let spelled = ty.spell(self.rng);
                    self.line(format!("{spelled} {name} = {src};"));
                    self.scopes.last_mut().expect("a scope").push(Var {
                        name,
                        ty,
                        mutable: true,
                        shared: false,
                        read: false,
                    });
                    return;
                }
                None => Scalar::Float,
            }
        } else {
            [
                Scalar::Int,
                Scalar::Int,
                Scalar::Float,
                Scalar::Float,
                Scalar::UInt,
                Scalar::Double,
                Scalar::LongLong,
                Scalar::SizeT,
            ][self.rng.below(8)]
        };
        // A constant initialised with a constant is one: no `const` then.
        let e = self.expr(ty, 2);
        let name = self.local_name(if ty.is_int() { "t" } else { "f" });
        let constant = self.chance(5) && !constant(&e);
        let spelled = if self.chance(8) {
            "auto".to_string()
        } else {
            Ty::S(ty).spell(self.rng)
        };
        self.line(format!(
            "{}{spelled} {name} = {e};",
            if constant { "const " } else { "" }
        ));
        self.scopes.last_mut().expect("a scope").push(Var {
            name,
            ty: Ty::S(ty),
            mutable: !constant,
            shared: false,
            read: false,
        });
    }

    /// A vector or matrix value to copy into a local: an element or a
    /// by-value parameter.
    fn composite_source(&mut self) -> Option<(Ty, String)> {
        let arrays: Vec<Arr> = self
            .arrays
            .iter()
            .filter(|a| matches!(a.elem, Ty::V(..) | Ty::M(..)))
            .cloned()
            .collect();
        let values: Vec<Var> = self
            .values
            .iter()
            .filter(|v| matches!(v.ty, Ty::V(..) | Ty::M(..)))
            .cloned()
            .collect();
        if !arrays.is_empty() && (values.is_empty() || self.chance(2)) {
            let a = arrays[self.rng.below(arrays.len())].clone();
            let idx = self.indices(&a);
            return Some((a.elem, format!("wl::index({}, {})", a.name, idx.join(", "))));
        }
        let v = values.get(self.rng.below(values.len().max(1)))?.clone();
        Some((v.ty, v.name))
    }

    fn shared_decl(&mut self) {
        let ty = [Scalar::Int, Scalar::UInt, Scalar::Float][self.rng.below(3)];
        let name = self.local_name("sh");
        let spelled = Ty::S(ty).spell(self.rng);
        self.line(format!("__shared__ {spelled} {name};"));
        let v = match ty {
            Scalar::Float => "1.0f",
            Scalar::UInt => "1u",
            _ => "1",
        };
        let op = if ty == Scalar::Float {
            "atomicAdd"
        } else {
            ["atomicAdd", "atomicMax", "atomicOr", "atomicExch"][self.rng.below(4)]
        };
        self.line(format!("{op}(&{name}, {v});"));
        self.scopes.last_mut().expect("a scope").push(Var {
            name,
            ty: Ty::S(ty),
            mutable: true,
            shared: true,
            read: false,
        });
    }

    fn barrier(&mut self) {
        let b = [
            "__syncthreads();",
            "__syncwarp();",
            "__threadfence();",
            "__threadfence_block();",
            "__syncwarp(0xffffffffu);",
        ];
        let s = b[self.rng.below(b.len())];
        self.line(s);
    }

    /// `local OP= expr;`, `++local;`, a component of a composite local or
    /// parameter.
    fn assign_local(&mut self) {
        let mut targets: Vec<Var> = self
            .scopes
            .iter()
            .flatten()
            .filter(|v| v.mutable && !v.shared)
            .cloned()
            .collect();
        targets.extend(
            self.values
                .iter()
                .filter(|v| v.mutable && v.ty != Ty::Q)
                .cloned(),
        );
        if targets.is_empty() {
            return self.array_write();
        }
        let v = targets[self.rng.below(targets.len())].clone();
        // (`shared` marks a written parameter: see `kernel`.)
        for p in &mut self.values {
            if p.name == v.name {
                p.shared = true;
            }
        }
        let comp = v.ty.component(self.rng);
        let s = v.ty.scalar();
        let lhs = format!("{}{comp}", v.name);
        if self.chance(5) {
            let form = ["++{}", "{}++", "--{}", "{}--"][self.rng.below(4)].replace("{}", &lhs);
            self.line(format!("{form};"));
        } else {
            let ops: &[&str] = if s.is_int() {
                &["=", "+=", "-=", "*=", "^=", "|=", "&="]
            } else {
                &["=", "+=", "-=", "*="]
            };
            let op = ops[self.rng.below(ops.len())];
            // (The literal form first: an expression generated and then
            // dropped would leave its locals marked as read.)
            let line = match self.literal_op(&lhs, s) {
                Some(l) => l,
                None => format!("{lhs} {op} {};", self.expr(s, 2)),
            };
            self.line(line);
        }
    }

    /// Sometimes `lhs /= K;`, `%=`, `<<=`, `>>=` with a literal (never a
    /// division by zero or an undefined shift).
    fn literal_op(&mut self, lhs: &str, s: Scalar) -> Option<String> {
        if !self.chance(5) {
            return None;
        }
        let k = s.literal(self.rng);
        Some(if s.is_int() {
            match self.rng.below(4) {
                0 => format!("{lhs} /= {k};"),
                1 => format!("{lhs} %= {k};"),
                2 => format!("{lhs} <<= {};", 1 + self.rng.below(3)),
                _ => format!("{lhs} >>= {};", 1 + self.rng.below(3)),
            }
        } else {
            format!("{lhs} /= {k};")
        })
    }

    fn array_write(&mut self) {
        let a = self.arrays[self.rng.below(self.arrays.len())].clone();
        let idx = self.indices(&a);
        let comp = a.elem.component(self.rng);
        let s = a.elem.scalar();
        let target = format!("wl::index({}, {}){comp}", a.name, idx.join(", "));
        if self.chance(6) {
            let form = ["++{}", "{}++", "--{}"][self.rng.below(3)].replace("{}", &target);
            self.line(format!("{form};"));
            return;
        }
        let ops: &[&str] = if s.is_int() {
            &["=", "+=", "-=", "*=", "|="]
        } else {
            &["=", "+=", "-=", "*="]
        };
        let op = ops[self.rng.below(ops.len())];
        let line = match self.literal_op(&target, s) {
            Some(l) => l,
            None => format!("{target} {op} {};", self.expr(s, 3)),
        };
        self.line(line);
    }

    fn atomic(&mut self) {
        let candidates: Vec<Arr> = self
            .arrays
            .iter()
            .filter(|a| matches!(a.elem, Ty::S(_)))
            .cloned()
            .collect();
        let shared: Vec<Var> = self
            .scopes
            .iter()
            .flatten()
            .filter(|v| v.shared)
            .cloned()
            .collect();
        if !shared.is_empty() && self.chance(3) {
            let v = shared[self.rng.below(shared.len())].clone();
            let (op, val) = match v.ty.scalar() {
                Scalar::Float => ("atomicAdd", self.expr(Scalar::Float, 1)),
                Scalar::UInt => (
                    ["atomicAdd", "atomicInc", "atomicMin", "atomicXor"][self.rng.below(4)],
                    self.expr(Scalar::UInt, 1),
                ),
                _ => (
                    ["atomicAdd", "atomicSub", "atomicMax", "atomicAnd"][self.rng.below(4)],
                    self.expr(Scalar::Int, 1),
                ),
            };
            self.line(format!("{op}(&{}, {val});", v.name));
            return;
        }
        let Some(a) = candidates
            .get(self.rng.below(candidates.len().max(1)))
            .cloned()
        else {
            return self.array_write();
        };
        let s = a.elem.scalar();
        let ops: &[&str] = match s {
            Scalar::Int => &[
                "atomicAdd",
                "atomicSub",
                "atomicExch",
                "atomicMin",
                "atomicMax",
                "atomicAnd",
                "atomicOr",
                "atomicXor",
                "atomicCAS",
            ],
            Scalar::UInt => &[
                "atomicAdd",
                "atomicSub",
                "atomicExch",
                "atomicMin",
                "atomicMax",
                "atomicInc",
                "atomicDec",
                "atomicAnd",
                "atomicOr",
                "atomicXor",
                "atomicCAS",
            ],
            Scalar::ULongLong => &[
                "atomicAdd",
                "atomicExch",
                "atomicMin",
                "atomicMax",
                "atomicAnd",
                "atomicOr",
                "atomicXor",
                "atomicCAS",
            ],
            Scalar::LongLong => &["atomicMin", "atomicMax"],
            Scalar::Float => &["atomicAdd", "atomicExch"],
            Scalar::Double => &["atomicAdd"],
            Scalar::SizeT => &["atomicAdd"],
        };
        let op = ops[self.rng.below(ops.len())];
        let idx = self.indices(&a);
        let mut args = vec![self.expr(s, 1)];
        if op == "atomicCAS" {
            args.push(self.expr(s, 1));
        }
        let call = format!(
            "{op}(wl::address({}, {}), {})",
            a.name,
            idx.join(", "),
            args.join(", ")
        );
        let mutable: Vec<Var> = self
            .scopes
            .iter()
            .flatten()
            .filter(|v| v.mutable && !v.shared && matches!(v.ty, Ty::S(_)))
            .cloned()
            .collect();
        if !mutable.is_empty() && self.chance(3) {
            let v = &mutable[self.rng.below(mutable.len())];
            self.line(format!("{} += {call};", v.name));
        } else {
            self.line(format!("{call};"));
        }
    }

    /// Reads every local of the innermost scope and every coordinate not
    /// read yet (NVRTC warns of a variable never read).
    fn sinks(&mut self) {
        let depth = self.scopes.len();
        let unread: Vec<Var> = self
            .scopes
            .last()
            .map(|s| s.iter().filter(|v| !v.read).cloned().collect())
            .unwrap_or_default();
        for v in unread {
            let a = self.scalar_array();
            let idx = self.indices(&a);
            let comp = v.ty.component(self.rng);
            let val = Scalar::Double.cast(self.rng, &format!("{}{comp}", v.name));
            self.line(format!(
                "wl::index({}, {}) += {val};",
                a.name,
                idx.join(", ")
            ));
        }
        if let Some(s) = self.scopes.last_mut() {
            for v in s.iter_mut() {
                v.read = true;
            }
        }
        let unread_coords: Vec<String> = self
            .coords
            .iter()
            .filter(|c| !c.1 && c.2 >= depth)
            .map(|c| c.0.clone())
            .collect();
        for c in unread_coords {
            let a = self.scalar_array();
            let f = ["i", "j", "k", "l"][self.rng.below(self.n_dims.min(4))];
            let rest = self.indices(&a);
            let mut idx = rest;
            let p = self.rng.below(idx.len());
            idx[p] = format!("{c}.{f}");
            let v = a.elem.scalar().literal(self.rng);
            self.line(format!("wl::index({}, {}) = {v};", a.name, idx.join(", ")));
            for x in &mut self.coords {
                if x.0 == c {
                    x.1 = true;
                }
            }
        }
    }

    fn scalar_array(&mut self) -> Arr {
        let s: Vec<Arr> = self
            .arrays
            .iter()
            .filter(|a| matches!(a.elem, Ty::S(_)))
            .cloned()
            .collect();
        s[self.rng.below(s.len())].clone()
    }

    // ---- indices and expressions ----

    /// One safe index: a coordinate (of any axis), the work item,
    /// `blockIdx.x` or a constant, maybe in a cast.
    fn index(&mut self, axis: usize) -> String {
        let mut atom = match self.rng.below(20) {
            0..=11 if !self.coords.is_empty() => {
                let k = self.rng.below(self.coords.len());
                self.coords[k].1 = true;
                let f = if axis < self.n_dims && !self.chance(5) {
                    axis
                } else {
                    self.rng.below(4)
                };
                format!("{}.{}", self.coords[k].0, ["i", "j", "k", "l"][f])
            }
            12 | 13 if !self.work.is_empty() => self.work[self.rng.below(self.work.len())].clone(),
            14 => "blockIdx.x".to_string(),
            15 => ["-1", "-2", "-3"][self.rng.below(3)].to_string(),
            _ => ["0", "1", "2", "3", "0u", "0x1", "2ll"][self.rng.below(7)].to_string(),
        };
        // A negative constant in an unsigned cast makes NVRTC warn.
        if self.chance(6) && !atom.starts_with('-') {
            atom = match self.rng.below(5) {
                0 => format!("int({atom})"),
                1 => format!("(int){atom}"),
                2 => format!("size_t({atom})"),
                3 => format!("(unsigned){atom}"),
                _ => format!("unsigned({atom})"),
            };
        }
        atom
    }

    fn indices(&mut self, a: &Arr) -> Vec<String> {
        (0..a.ndim).map(|k| self.index(k)).collect()
    }

    /// A boolean condition.
    fn cond(&mut self, depth: usize) -> String {
        if depth > 0 && self.chance(4) {
            let a = self.cond(depth - 1);
            let b = self.cond(depth - 1);
            let op = if self.chance(2) { "&&" } else { "||" };
            return format!("({a} {op} {b})");
        }
        if depth > 0 && self.chance(8) {
            return format!("!{}", self.cond(depth - 1));
        }
        if depth > 0 && self.chance(16) {
            // A literal next to a varying condition (never a constant one).
            let c = self.cond(0);
            let (l, op) = if self.chance(2) {
                ("true", "&&")
            } else {
                ("false", "||")
            };
            return format!("({l} {op} {c})");
        }
        let ty = [
            Scalar::Int,
            Scalar::Float,
            Scalar::UInt,
            Scalar::SizeT,
            Scalar::Double,
        ][self.rng.below(5)];
        // Never two constants: NVRTC warns of a condition it decides.
        let a = self.varying(ty, 1);
        let a = self.lead(a);
        let b = if self.chance(2) {
            ty.literal(self.rng)
        } else {
            self.expr(ty, 1)
        };
        // Literals are never 0: no pointless comparison of an unsigned value.
        let op = ["<", ">", "<=", ">=", "!=", "=="][self.rng.below(6)];
        format!("({a} {op} {b})")
    }

    /// An expression of C++ type `ty` (parenthesised when compound).
    fn expr(&mut self, ty: Scalar, depth: usize) -> String {
        if depth == 0 {
            return self.leaf(ty);
        }
        match self.rng.below(10) {
            0..=2 => self.leaf(ty),
            3..=5 => {
                // A varying left operand: no constant folds to 0 (NVRTC
                // warns of a pointless comparison with it).
                let a = self.varying(ty, depth - 1);
                let a = self.lead(a);
                if ty.is_int() {
                    match self.rng.below(9) {
                        0 => format!("({a} / {})", ty.literal(self.rng)),
                        1 => format!("({a} % {})", ty.literal(self.rng)),
                        2 => format!("({a} << {})", 1 + self.rng.below(3)),
                        3 => format!("({a} >> {})", 1 + self.rng.below(3)),
                        k => {
                            let b = self.expr(ty, depth - 1);
                            format!("({a} {} {b})", ["+", "-", "*", "&", "|", "^", "+"][k - 4])
                        }
                    }
                } else if self.chance(4) {
                    format!("({a} / {})", ty.literal(self.rng))
                } else {
                    let b = self.expr(ty, depth - 1);
                    format!("({a} {} {b})", ["+", "-", "*"][self.rng.below(3)])
                }
            }
            6 => {
                let c = self.cond(1);
                let a = self.expr(ty, depth - 1);
                let b = self.expr(ty, depth - 1);
                format!("({c} ? {a} : {b})")
            }
            7 => {
                let a = self.expr(ty, depth - 1);
                match (ty.is_int(), self.rng.below(3)) {
                    (true, 0) => format!("(-{a})"),
                    (true, 1) => format!("(~{a})"),
                    (false, _) | (true, _) => format!("(-{a})"),
                }
            }
            _ => self.call(ty, depth - 1),
        }
    }

    /// A built-in call of result type `ty`.
    fn call(&mut self, ty: Scalar, depth: usize) -> String {
        let e = |g: &mut Self, t: Scalar| g.expr(t, depth);
        match ty {
            Scalar::Float => match self.rng.below(16) {
                0 => format!("sqrtf(fabsf({}))", e(self, ty)),
                1 => format!("fminf({}, {})", e(self, ty), e(self, ty)),
                2 => format!("fmaxf({}, {})", e(self, ty), e(self, ty)),
                3 => format!("floorf({})", e(self, ty)),
                4 => format!("sinf({})", e(self, ty)),
                5 => format!("__saturatef({})", e(self, ty)),
                6 => format!("__fdividef({}, 2.0f)", e(self, ty)),
                7 => format!("rsqrtf(1.0f + fabsf({}))", e(self, ty)),
                8 => format!("copysignf({}, {})", e(self, ty), e(self, ty)),
                9 => format!("fmaf({}, {}, {})", e(self, ty), e(self, ty), e(self, ty)),
                10 => format!("__shfl_sync(0xffffffffu, {}, 0)", e(self, ty)),
                11 => format!("__shfl_down_sync(0xffffffffu, {}, 1u)", e(self, ty)),
                12 => format!("__shfl_xor_sync(0xffffffffu, {}, 1)", e(self, ty)),
                13 => format!("expf(fminf({}, 2.0f))", e(self, ty)),
                14 => format!("__int_as_float({})", e(self, Scalar::Int)),
                _ => format!("hypotf({}, {})", e(self, ty), e(self, ty)),
            },
            Scalar::Double => match self.rng.below(5) {
                0 => format!("sqrt(fabs({}))", e(self, ty)),
                1 => format!("fmin({}, {})", e(self, ty), e(self, ty)),
                2 => format!("fmax({}, {})", e(self, ty), e(self, ty)),
                3 => format!("floor({})", e(self, ty)),
                _ => format!("__shfl_sync(0xffffffffu, {}, 0)", e(self, ty)),
            },
            Scalar::Int => match self.rng.below(11) {
                0 => format!("min({}, {})", e(self, ty), e(self, ty)),
                1 => format!("max({}, {})", e(self, ty), e(self, ty)),
                2 => format!("abs({})", e(self, ty)),
                3 => format!("__popc({})", e(self, Scalar::UInt)),
                4 => format!("__clz({})", e(self, ty)),
                5 => format!("__ffs({})", e(self, ty)),
                6 => format!("__mulhi({}, {})", e(self, ty), e(self, ty)),
                7 => format!("__shfl_sync(0xffffffffu, {}, 0)", e(self, ty)),
                8 => {
                    let c = self.cond(1);
                    format!("__syncthreads_count({c})")
                }
                9 => {
                    let c = self.cond(1);
                    format!("__any_sync(0xffffffffu, {c})")
                }
                _ => format!("__float_as_int({})", e(self, Scalar::Float)),
            },
            Scalar::UInt => match self.rng.below(7) {
                0 => format!("min({}, {})", e(self, ty), e(self, ty)),
                1 => format!("max({}, {})", e(self, ty), e(self, ty)),
                2 => format!("__brev({})", e(self, ty)),
                3 => format!("__umulhi({}, {})", e(self, ty), e(self, ty)),
                4 => {
                    let c = self.cond(1);
                    format!("__ballot_sync(0xffffffffu, {c})")
                }
                5 => "__activemask()".to_string(),
                _ => format!("__float_as_uint({})", e(self, Scalar::Float)),
            },
            Scalar::LongLong => match self.rng.below(3) {
                0 => format!("min({}, {})", e(self, ty), e(self, ty)),
                1 => format!("llabs({})", e(self, ty)),
                _ => format!("max({}, {})", e(self, ty), e(self, ty)),
            },
            Scalar::ULongLong => format!("max({}, {})", e(self, ty), e(self, ty)),
            Scalar::SizeT => self.leaf(ty),
        }
    }

    /// A leaf of C++ type `ty`: a literal, a local, a parameter, a
    /// component, an element, a coordinate, the work item, the bounds, a
    /// built-in variable.
    fn leaf(&mut self, ty: Scalar) -> String {
        let (expr, of) = match self.rng.below(14) {
            0 if ty == Scalar::SizeT && self.chance(3) => {
                let t = ["float", "double", "wl::vec3f", "int", "wl::mat22d"][self.rng.below(5)];
                return format!("sizeof({t})");
            }
            0 | 1 => return ty.literal(self.rng),
            2 | 3 => {
                let vars: Vec<Var> = self
                    .scopes
                    .iter()
                    .flatten()
                    .filter(|v| !v.shared || v.ty != Ty::Q)
                    .cloned()
                    .collect();
                if vars.is_empty() {
                    return ty.literal(self.rng);
                }
                let v = vars[self.rng.below(vars.len())].clone();
                self.mark_read(&v.name);
                (
                    format!("{}{}", v.name, v.ty.component(self.rng)),
                    v.ty.scalar(),
                )
            }
            4 => {
                let vals: Vec<Var> = self
                    .values
                    .iter()
                    .filter(|v| v.ty != Ty::Q)
                    .cloned()
                    .collect();
                if vals.is_empty() {
                    return ty.literal(self.rng);
                }
                let v = vals[self.rng.below(vals.len())].clone();
                for p in &mut self.values {
                    if p.name == v.name {
                        p.read = true;
                    }
                }
                (
                    format!("{}{}", v.name, v.ty.component(self.rng)),
                    v.ty.scalar(),
                )
            }
            5 | 6 => {
                let a = self.arrays[self.rng.below(self.arrays.len())].clone();
                let idx = self.indices(&a);
                (
                    format!(
                        "wl::index({}, {}){}",
                        a.name,
                        idx.join(", "),
                        a.elem.component(self.rng)
                    ),
                    a.elem.scalar(),
                )
            }
            7 | 8 if !self.coords.is_empty() => {
                let k = self.rng.below(self.coords.len());
                self.coords[k].1 = true;
                (
                    format!(
                        "{}.{}",
                        self.coords[k].0,
                        ["i", "j", "k", "l"][self.rng.below(4)]
                    ),
                    Scalar::Int,
                )
            }
            9 if !self.work.is_empty() => (
                self.work[self.rng.below(self.work.len())].clone(),
                Scalar::SizeT,
            ),
            10 if self.chance(2) => (format!("{}.size", self.dim), Scalar::SizeT),
            10 => (
                format!("{}.shape[{}]", self.dim, self.rng.below(self.n_dims)),
                Scalar::UInt,
            ),
            11 => {
                let b = ["threadIdx", "blockIdx", "blockDim", "gridDim"][self.rng.below(4)];
                (
                    format!("{b}.{}", ["x", "y", "z"][self.rng.below(3)]),
                    Scalar::UInt,
                )
            }
            12 => ("warpSize".to_string(), Scalar::Int),
            _ => (self.offset.clone(), self.offset_scalar),
        };
        if of == ty && !self.chance(4) {
            expr
        } else {
            ty.cast(self.rng, &expr)
        }
    }

    /// `a` as the first operand after a `(`: a functional cast there
    /// (`(float(n) + x)`) is mostly written as a C cast instead, since the
    /// reader (as of ece47d4) takes `(` and a type word for a C cast, refusing
    /// the text; one in 16 stays, so the refusal stays in the counts.
    fn lead(&mut self, a: String) -> String {
        const WORDS: &[&str] = &["int(", "float(", "double(", "unsigned(", "size_t("];
        let Some(w) = WORDS.iter().find(|w| a.starts_with(**w)) else {
            return a;
        };
        if self.chance(16) {
            return a;
        }
        let open = w.len() - 1;
        let mut depth = 0;
        for (k, ch) in a.char_indices().skip(open) {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let ty = &w[..open];
                        return format!("(({ty})({})){}", &a[open + 1..k], &a[k + 1..]);
                    }
                }
                _ => {}
            }
        }
        a
    }

    /// An expression of type `ty` that is no constant.
    fn varying(&mut self, ty: Scalar, depth: usize) -> String {
        for _ in 0..8 {
            let e = self.expr(ty, depth);
            if !constant(&e) {
                return e;
            }
        }
        let n = self.offset.clone();
        ty.cast(self.rng, &n)
    }

    fn mark_read(&mut self, name: &str) {
        for v in self.scopes.iter_mut().flatten() {
            if v.name == name {
                v.read = true;
            }
        }
    }

    // ---- planted attacks ----

    /// Plants the kernel's attack here (once).
    fn plant_now(&mut self) {
        let Some(attack) = self.plant else { return };
        if self.planted {
            return;
        }
        self.planted = true;
        if self.coords.is_empty() && !self.work.is_empty() {
            self.coord_decl();
        }
        let c = self
            .coords
            .last()
            .map(|c| c.0.clone())
            .unwrap_or_else(|| "c".into());
        for x in &mut self.coords {
            x.1 = true;
        }
        let w = self.work.last().cloned().unwrap_or_else(|| "idx".into());
        let n = self.offset.clone();
        let dim = self.dim.clone();
        let f = ["i", "j", "k", "l"][self.rng.below(self.n_dims)];
        let g = ["i", "j", "k", "l"][self.rng.below(4)];
        let cf = format!("{c}.{f}");
        match attack {
            Attack::CoordinateWrite => {
                let s = [
                    "{cf} += {n};",
                    "{cf} = {n};",
                    "{cf} -= {n};",
                    "++{cf};",
                    "{cf}++;",
                    "{cf} = {cf} + {n};",
                    "{cf} *= {n};",
                ][self.rng.below(7)];
                let s = s.replace("{cf}", &cf).replace("{n}", &n);
                self.line(s);
                self.hazard(&cf);
            }
            Attack::ParenWrite => {
                let s = [
                    "({cf}) += {n};",
                    "(({cf})) = {n};",
                    "++({cf});",
                    "({cf})++;",
                    "({c}).{f} += {n};",
                ][self.rng.below(5)];
                self.line(
                    s.replace("{cf}", &cf)
                        .replace("{n}", &n)
                        .replace("{c}", &c)
                        .replace("{f}", f),
                );
                self.hazard(&cf);
            }
            Attack::TernaryWrite => {
                let s = [
                    "({n} > 0 ? {cf} : {c}.{g}) += {n};",
                    "(true ? {cf} : {cf}) = {n};",
                    "({n} ? {cf} : {cf})++;",
                    "(false ?: {cf}) += {n};",
                ][self.rng.below(4)];
                self.line(
                    s.replace("{cf}", &cf)
                        .replace("{n}", &n)
                        .replace("{c}", &c)
                        .replace("{g}", g),
                );
                self.hazard(&cf);
            }
            Attack::ReferenceAlias => {
                let r = self.local_name("r");
                let s = [
                    "auto&& {r} = {cf};",
                    "int& {r} = {cf};",
                    "auto& {r} = {cf};",
                    "int &{r} = {cf};",
                    "decltype(auto) {r} = ({cf});",
                    "int&& {r} = static_cast<int&&>({cf});",
                ][self.rng.below(6)];
                self.line(s.replace("{r}", &r).replace("{cf}", &cf));
                self.line(format!("{r} += {n};"));
                self.hazard(&cf);
            }
            Attack::AtomicOnCoordinate => {
                let s = [
                    "atomicAdd(&{cf}, {n});",
                    "atomicExch(&{cf}, {n});",
                    "atomicAdd(&({cf}), {n});",
                    "atomicMax(&{cf}, {n});",
                    "atomicAdd(& {cf}, {n});",
                ][self.rng.below(5)];
                self.line(s.replace("{cf}", &cf).replace("{n}", &n));
                self.hazard(&cf);
            }
            Attack::CommaShadow => {
                let q = self.local_name("q");
                let a = self.scalar_array();
                let val = a.elem.scalar().literal(self.rng);
                let decl = [
                    "int {q} = 0, {w} = {n};",
                    "int {q} = 0, {w}{{n}};",
                    "int {q} = 0, {w}({n});",
                    "size_t {q} = 0, {w} = {n};",
                    "const int {q} = 0, {w} = {n};",
                ][self.rng.below(5)];
                let decl = decl
                    .replace("{q}", &q)
                    .replace("{w}", &w)
                    .replace("{n}", &n);
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                idx[p] = w.clone();
                let write = format!("wl::index({}, {}) = {val};", a.name, idx.join(", "));
                if self.chance(3) {
                    self.line(format!(
                        "for ({}; {q} < 1; ++{q}) {write}",
                        decl.trim_end_matches(';')
                    ));
                } else {
                    self.line(format!("{{ {decl} {write} {q} += 1; }}"));
                }
            }
            Attack::Shadow => {
                let a = self.scalar_array();
                let val = a.elem.scalar().literal(self.rng);
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                let variant = self.rng.below(8);
                let (open, name) = match variant {
                    0 => (format!("if (int {w} = {n}) {{"), w.clone()),
                    1 => (format!("if (size_t {w} = {n}; {w} > 0) {{"), w.clone()),
                    2 => (
                        format!("for (int {w} = {n}; {w} < {n} + 1; ++{w}) {{"),
                        w.clone(),
                    ),
                    3 => (format!("{{ int {w} = {n};"), w.clone()),
                    4 => (format!("{{ size_t {w} = {n};"), w.clone()),
                    5 => (format!("{{ auto {w} = {n};"), w.clone()),
                    6 => (
                        format!("{{ wl::coord_t {c} = {{{n}, {n}, {n}, {n}}};"),
                        cf.clone(),
                    ),
                    _ => (format!("while (int {w} = {n}) {{"), w.clone()),
                };
                idx[p] = name;
                self.line(open);
                self.line(format!(
                    "    wl::index({}, {}) = {val};",
                    a.name,
                    idx.join(", ")
                ));
                if variant == 7 {
                    // The `while` needs a way out.
                    self.line("    break;");
                }
                self.line("}");
            }
            Attack::BuiltinShadow => {
                let names: Vec<&str> = ["blockIdx", "threadIdx", "warpSize", "gridDim"]
                    .into_iter()
                    .filter(|b| self.taken.contains(*b))
                    .collect();
                let b = match names.first() {
                    Some(b) => (*b).to_string(),
                    None => {
                        let b = ["blockIdx", "threadIdx"][self.rng.below(2)].to_string();
                        self.line(format!("wl::quatf {b};"));
                        self.line(format!("{b}.x = {n};"));
                        b
                    }
                };
                let index = if b == "warpSize" { b } else { format!("{b}.x") };
                self.hazard(&index);
            }
            Attack::ParenCall => {
                let a = self.scalar_array();
                let s = match self.rng.below(4) {
                    0 => {
                        "(__gen_nvvm_memset)((__cvta_global_to_generic)(addr), 64, 4);".to_string()
                    }
                    1 => format!("(wl::index)({}, {n}) = 7;", a.name),
                    2 => format!("(atomicAdd)(wl::address({}, {n}), 1);", a.name),
                    _ => format!(
                        "(wl::index)({}, {}) = 7;",
                        a.name,
                        (0..a.ndim)
                            .map(|_| n.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                self.line(s);
                self.line("addr += 1;");
                let idx = self.indices(&a).join(", ");
                self.line(format!("wl::index({}, {idx}) += double(addr);", a.name));
            }
            Attack::Directive => {
                let s = [
                    "/* tuning */ #define {f} {f} + {n}",
                    "/**/#define {f} {f} + {n}",
                    "/* a */ # define {f} {f} + {n}",
                    "/* multi",
                ][self.rng.below(4)];
                if s == "/* multi" {
                    self.raw("/* a comment over");
                    self.raw(format!("   two lines */ #define {f} {f} + {n}"));
                } else {
                    self.raw(s.replace("{f}", f).replace("{n}", &n));
                }
                self.hazard(&cf);
                self.raw(format!("#undef {f}"));
            }
            Attack::Splice => {
                let a = self.scalar_array();
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                idx[p] = cf.clone();
                let safe = format!("wl::index({}, {}) = 1;", a.name, idx.join(", "));
                idx[p] = format!("{cf} + {n}");
                let bad = format!("wl::index({}, {}) = 7;", a.name, idx.join(", "));
                match self.rng.below(3) {
                    0 => {
                        self.line(format!("{safe} /* the reader's comment goes on *\\"));
                        self.raw(format!("/ {bad} /* up to here */"));
                    }
                    1 => {
                        self.line(format!("{safe} /* ends here *\\"));
                        self.raw("\\".to_string());
                        self.raw(format!("/ {bad} /* and here */"));
                    }
                    _ => {
                        self.line(format!("{safe} /\\"));
                        self.raw(format!("* a comment? */ {bad}"));
                    }
                }
            }
            Attack::Jump => {
                let a = self.scalar_array();
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                idx[p] = format!("{cf} + {n}");
                let bad = format!("wl::index({}, {}) = 7;", a.name, idx.join(", "));
                self.line(format!("if ({n} > 0) goto skip_{};", self.counter));
                self.line(format!("skip_{}: {bad}", self.counter));
            }
            Attack::IndexForm => {
                let forms = [
                    format!("{cf} + {n}"),
                    format!("{cf} + 1"),
                    n.clone(),
                    format!("{cf} * 2"),
                    format!("{cf} - 1"),
                    format!("-{cf}"),
                    format!("{w} + 1"),
                    "threadIdx.x".into(),
                    "blockIdx.y".into(),
                    "blockDim.x".into(),
                    "gridDim.x".into(),
                    "warpSize".into(),
                    format!("({cf})"),
                    format!("{cf}++"),
                    format!("++{cf}"),
                    format!("({n}, {cf})"),
                    format!("{n} ? {cf} : {c}.{g}"),
                    "(unsigned char)-1".into(),
                    "(unsigned short)-1".into(),
                    "(char)200".into(),
                    "(short)40000".into(),
                    "(unsigned char)(-1)".into(),
                    "(uint8_t)-1".into(),
                    "int(-1)".into(),
                    format!("int({n})"),
                    format!("unsigned({n})"),
                    format!("size_t({w}) + 1"),
                    "2147483648".into(),
                    "4294967295u".into(),
                    "-2147483648".into(),
                    "0x100000000".into(),
                    "010".into(),
                    "1e1".into(),
                    "true".into(),
                    "sizeof(double)".into(),
                    "(int)1.5e1".into(),
                    format!("{dim}.size"),
                    format!("{dim}.shape[0]"),
                    format!("wl::index({}, {cf})", self.arrays[0].name),
                    format!("{cf} | 8"),
                    format!("+{cf}"),
                    format!("-(-{cf})"),
                    format!("{cf} - -1"),
                    "0x7fffffff".into(),
                    "- 0x7fffffff".into(),
                    "-0".into(),
                    "int(unsigned(-16))".into(),
                    "(int)(unsigned)-1".into(),
                    "unsigned(-2147483647)".into(),
                    format!("{n}u"),
                    "0b11".into(),
                    "3.0".into(),
                    "0x3p0".into(),
                    "1'0".into(),
                    "L'a'".into(),
                ];
                let form = forms[self.rng.below(forms.len())].clone();
                self.hazard(&form);
            }
            Attack::WorkItemWrite => {
                let s = [
                    "{w} += {n};",
                    "++{w};",
                    "{w} = {n};",
                    "{w}--;",
                    "({w}) += {n};",
                    "{w} *= 2;",
                    "{w} |= {n};",
                ][self.rng.below(7)];
                self.line(s.replace("{w}", &w).replace("{n}", &n));
                self.hazard(&w);
            }
            Attack::BoundsWrite => {
                let k = self.rng.below(self.n_dims);
                let s = [
                    "{d}.size += {n};",
                    "{d}.shape[{k}] += {n};",
                    "({d}).size = {n};",
                    "atomicAdd(&{d}.shape[{k}], {n});",
                    "{d}.size *= 2;",
                    "++{d}.shape[{k}];",
                ][self.rng.below(6)];
                self.line(
                    s.replace("{d}", &dim)
                        .replace("{n}", &n)
                        .replace("{k}", &k.to_string()),
                );
                if self.chance(2) {
                    self.hazard(&w);
                } else {
                    let d = self.local_name("cd");
                    self.line(format!("wl::coord_t {d} = wl::coord({w}, {dim});"));
                    self.hazard(&format!("{d}.{f}"));
                }
            }
            Attack::ShapePastDims => {
                let k = [
                    self.n_dims.to_string(),
                    "4".into(),
                    "-1".into(),
                    "5".into(),
                    "0x4".into(),
                ][self.rng.below(5)]
                .clone();
                let q = self.local_name("t");
                self.line(format!("unsigned int {q} = {dim}.shape[{k}];"));
                let a = self.scalar_array();
                let idx = self.indices(&a).join(", ");
                self.line(format!("wl::index({}, {idx}) += {q};", a.name));
            }
            Attack::CoordinateCopy => {
                let d = self.local_name("cc");
                let s = [
                    "wl::coord_t {d} = {c}; {d}.{f} += {n};",
                    "auto {d} = {c}; {d}.{f} += {n};",
                    "wl::coord_t {d} = wl::coord({w} + {n}, {dim});",
                    "wl::coord_t {d} = wl::coord({n}, {dim});",
                    "wl::coord_t {d} = {{{n}, {n}, {n}, {n}}};",
                    "wl::coord_t {d} = wl::coord({w}, {dim}); {d} = wl::coord({w} * 2, {dim});",
                    "const wl::coord_t {d} = wl::coord(({w}), {dim});",
                    "wl::coord_t {d} = wl::coord({w}, {dim}), {d}2 = wl::coord({n}, {dim});",
                ][self.rng.below(8)];
                self.line(
                    s.replace("{d}", &d)
                        .replace("{c}", &c)
                        .replace("{f}", f)
                        .replace("{n}", &n)
                        .replace("{w}", &w)
                        .replace("{dim}", &dim),
                );
                self.hazard(&format!("{d}.{f}"));
            }
            Attack::ArrayAlias => {
                let a = self.scalar_array();
                let b = self.local_name("al");
                let s = [
                    format!("wl::array_t<{}> {b} = {};", a.elem.spell(self.rng), a.name),
                    format!("auto {b} = {};", a.name),
                    format!("auto {b} = {}; {b}.shape[0] += {n};", a.name),
                    format!("auto {b} = {}; {b}.data += {n};", a.name),
                ][self.rng.below(4)]
                .clone();
                self.line(s);
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                idx[p] = cf.clone();
                self.line(format!("wl::index({b}, {}) = 7;", idx.join(", ")));
            }
            Attack::Pointer => {
                let a = self.scalar_array();
                let t = a.elem.spell(self.rng);
                let idx = self.indices(&a).join(", ");
                let p = self.local_name("p");
                let s = [
                    format!("{t}* {p} = &wl::index({}, {idx}); {p}[{n}] = 1;", a.name),
                    format!("*(wl::address({}, {idx}) + {n}) = 1;", a.name),
                    format!("wl::address({}, {idx})[{n}] = 1;", a.name),
                    format!("{t}& {p} = wl::index({}, {idx}); (&{p})[{n}] = 1;", a.name),
                    format!(
                        "auto {p} = wl::address({}, {idx}); {p} += {n}; *{p} = 1;",
                        a.name
                    ),
                    format!("(&wl::index({}, {idx}))[{n}] = 1;", a.name),
                ][self.rng.below(6)]
                .clone();
                self.line(s);
            }
            Attack::Component => {
                let comps: Vec<Arr> = self
                    .arrays
                    .iter()
                    .filter(|a| matches!(a.elem, Ty::V(..) | Ty::M(..)))
                    .cloned()
                    .collect();
                let a = comps[self.rng.below(comps.len())].clone();
                let idx = self.indices(&a).join(", ");
                let sub = match a.elem {
                    Ty::V(l, _) => [
                        format!(".c[{l}]"),
                        ".c[-1]".into(),
                        format!(".c[{n}]"),
                        format!(".c[{cf}]"),
                        format!(".c[{l}u]"),
                        format!(".c[0x{l:x}]"),
                        ".c[4294967296]".into(),
                        format!(".c[{}]", l + 7),
                    ][self.rng.below(8)]
                    .clone(),
                    Ty::M(r, col, _) => [
                        format!(".data[{r}][0]"),
                        format!(".data[0][{col}]"),
                        format!(".data[0][{n}]"),
                        ".data[-1][0]".into(),
                        format!(".data[{}][{}]", r - 1, col),
                    ][self.rng.below(5)]
                    .clone(),
                    _ => ".c[3]".into(),
                };
                if self.chance(2) {
                    self.line(format!("wl::index({}, {idx}){sub} = 1;", a.name));
                } else {
                    let v = self.local_name("v");
                    let spelled = a.elem.spell(self.rng);
                    self.line(format!("{spelled} {v} = wl::index({}, {idx});", a.name));
                    self.line(format!("{v}{sub} = 1;"));
                    self.line(format!("wl::index({}, {idx}) = {v};", a.name));
                }
            }
            Attack::Lexical => {
                let a = self.scalar_array();
                let mut idx = self.indices(&a);
                let p = self.rng.below(idx.len());
                let (prefix, index) = match self.rng.below(12) {
                    0 => (String::new(), format!("{c}.\\u0069")),
                    1 => (String::new(), "'\\x10'".into()),
                    2 => (String::new(), "sizeof(R\"(abcdefgh)\")".into()),
                    3 => (format!("int \u{e9} = {n};"), "\u{e9}".into()),
                    4 => (String::new(), format!("{cf} ??' {n}")),
                    5 => (format!("int q<:2:> = {{0, {n}}};"), "q<:1:>".into()),
                    6 => ("#pragma unroll (4)".into(), cf.clone()),
                    7 => ("_Pragma(\"unroll\")".into(), cf.clone()),
                    8 => ("#pragma once".into(), cf.clone()),
                    9 => (format!("%:define {f} {f} + {n}"), cf.clone()),
                    10 => (
                        "#include \"warp_launch.h\"".into(),
                        format!("{cf} \\\n + {n}"),
                    ),
                    _ => (format!("int q = 0{}1;", '\''), format!("{cf} + q")),
                };
                if !prefix.is_empty() {
                    if prefix.starts_with('#') || prefix.starts_with('%') {
                        self.raw(prefix);
                    } else {
                        self.line(prefix);
                    }
                }
                idx[p] = index;
                self.line(format!("wl::index({}, {}) = 7;", a.name, idx.join(", ")));
            }
            Attack::Lambda => {
                let l = self.local_name("fn");
                let s = [
                    format!("auto {l} = [&]() {{ {cf} += {n}; }}; {l}();"),
                    format!("[&] {{ {cf} += {n}; }}();"),
                    format!(
                        "auto {l} = [&]({} x) {{ return x + {n}; }}; {cf} = {l}({cf});",
                        "int"
                    ),
                ][self.rng.below(3)]
                .clone();
                self.line(s);
                self.hazard(&cf);
            }
            Attack::LeanHead | Attack::GridStride => {
                // Planted with the head or the loop; a coordinate use here.
                self.hazard(&cf);
            }
        }
    }

    /// A write whose index at one axis is `index`, the others safe.
    fn hazard(&mut self, index: &str) {
        let a = self.scalar_array();
        let mut idx = self.indices(&a);
        let p = self.rng.below(idx.len());
        idx[p] = index.to_string();
        let v = a.elem.scalar().literal(self.rng);
        self.line(format!("wl::index({}, {}) = {v};", a.name, idx.join(", ")));
    }

    /// A lean prologue that does not keep the work item below the size.
    fn bad_lean_head(&mut self, w: &str) {
        let d = self.dim.clone();
        let n = self.offset.clone();
        let (a, b) = match self.rng.below(10) {
            0 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} > {d}.size) return;"),
            ),
            1 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size + 1) return;"),
            ),
            2 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size) {{}}"),
            ),
            3 => (
                format!("size_t {w} = wl::lean_index() + {n};"),
                format!("if ({w} >= {d}.size) return;"),
            ),
            4 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.shape[0]) return;"),
            ),
            5 => (
                format!("int {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size) return;"),
            ),
            6 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size) return; {w} += {n};"),
            ),
            7 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({d}.size <= {w} + {n}) return;"),
            ),
            8 => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size) return; else {w} = {n};"),
            ),
            _ => (
                format!("size_t {w} = wl::lean_index();"),
                format!("if ({w} >= {d}.size || {n} > 0) ; else return;"),
            ),
        };
        self.line(a);
        self.line(b);
    }

    /// A grid-stride loop other than the header's.
    fn bad_grid_stride(&mut self, w: &str) {
        let d = self.dim.clone();
        let n = self.offset.clone();
        let head = match self.rng.below(6) {
            0 => format!(
                "for (size_t {w} = blockIdx.x * blockDim.x + threadIdx.x; {w} <= {d}.size; {w} += blockDim.x * gridDim.x) {{"
            ),
            1 => format!("WL_GRID_STRIDE_LOOP({w}, ({d})) {{"),
            2 => format!("WL_GRID_STRIDE_LOOP({w} + {n}, {d}) {{"),
            3 => format!("for (size_t {w} = threadIdx.x; {w} < {d}.size + {n}; ++{w}) {{"),
            4 => format!("WL_GRID_STRIDE_LOOP({w}, {d}) {{ {w} += {n};"),
            _ => format!("WL_GRID_STRIDE_LOOP({w}, {d}) if ({w} + 1 < {d}.size) {{ ++{w};"),
        };
        self.line(head);
        self.indent += 1;
        self.work.push(w.to_string());
        self.scopes.push(Vec::new());
        self.coord_decl();
        let c = self.coords.last().map(|c| c.0.clone()).unwrap_or_default();
        self.hazard(w);
        self.hazard(&format!("{c}.i"));
        self.scopes.pop();
        self.work.pop();
        self.coords.pop();
        self.indent -= 1;
        self.line("}");
    }

    /// The body of switch-into-loop.cu, over this kernel's names.
    fn switch_into_loop(&mut self) {
        self.planted = true;
        let d = self.dim.clone();
        let n = self.offset.clone();
        let w = self.fresh(WORK_NAMES);
        let a = self.scalar_array();
        let mut idx = self.indices(&a);
        let p = self.rng.below(idx.len());
        idx[p] = format!("int({w})");
        // `indices` may have named no coordinate: none is in scope here.
        let idx: Vec<String> = idx
            .into_iter()
            .map(|i| {
                if i.contains('.') && !i.contains("blockIdx") {
                    "0".into()
                } else {
                    i
                }
            })
            .collect();
        let label = if self.chance(2) {
            "case 1:"
        } else {
            "default:"
        };
        self.line("for (int pass = 0; pass < 2; ++pass) {");
        self.line(format!("    switch (pass * {n}) {{"));
        self.line("    case 0:");
        self.line(format!("        WL_GRID_STRIDE_LOOP({w}, {d}) {{"));
        self.line(format!("    {label}"));
        self.line(format!(
            "            wl::index({}, {}) = 7;",
            a.name,
            idx.join(", ")
        ));
        self.line("        }");
        self.line("    }");
        self.line("}");
    }
}

/// Whether an expression is a constant: it names nothing but types.
fn constant(e: &str) -> bool {
    // Type words, and `sizeof` of the types the generator names.
    const TYPES: &[&str] = &[
        "int", "unsigned", "float", "double", "size_t", "long", "short", "char", "sizeof", "wl",
        "vec3f", "mat22d",
    ];
    let mut word = String::new();
    let mut names = false;
    for ch in e.chars().chain(std::iter::once(' ')) {
        if ch.is_ascii_alphanumeric()
            || ch == '_'
            || (ch == '.' && word.starts_with(|c: char| c.is_ascii_digit()))
        {
            word.push(ch);
            continue;
        }
        if word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && !TYPES.contains(&word.as_str())
        {
            names = true;
        }
        word.clear();
    }
    !names
}

/// Tokens [`token_mutation`] inserts.
const INSERTS: &[&str] = &[
    "&",
    "*",
    "[",
    "]",
    "(",
    ")",
    ",",
    "++",
    "--",
    "-",
    "=",
    "+=",
    "?",
    ":",
    ".",
    "c",
    "i",
    "idx",
    "n",
    "0",
    "1",
    "{",
    "}",
    ";",
    "auto",
    "&&",
    "int",
    "const",
    "__shared__",
    "wl",
    "::",
    "index",
    "address",
    "#",
    "\\",
    "'",
    "\"",
    "/*",
    "*/",
    "//",
    "\n",
    "-1",
    "2147483647",
    "blockIdx",
    ".x",
    "return",
    "break",
    "size_t",
    "static",
];

/// Numbers [`token_mutation`] puts in place of a number.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2147483647",
    "4294967295u",
    "0x7fffffff",
    "3u",
    "1.5f",
    "-2",
    "65536",
    "0x80000000",
];

/// Edits `text`'s tokens blindly: one to three deletions, duplications,
/// swaps, replacements (a name by another of the text, a number by an
/// interesting one) or insertions.
pub fn token_mutation(rng: &mut Rng, text: &str) -> String {
    let mut toks = rough_tokens(text);
    let names: Vec<String> = toks
        .iter()
        .filter(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .cloned()
        .collect();
    for _ in 0..1 + rng.below(3) {
        // Leave the include line alone (the first few tokens).
        let lo = toks.iter().position(|t| t == "extern").unwrap_or(0);
        if toks.len() <= lo + 1 {
            break;
        }
        let k = lo + rng.below(toks.len() - lo);
        match rng.below(6) {
            0 => {
                toks.remove(k);
            }
            1 => {
                let t = toks[k].clone();
                toks.insert(k, t);
            }
            2 if k + 1 < toks.len() => toks.swap(k, k + 1),
            3 if toks[k].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && !names.is_empty() =>
            {
                toks[k] = names[rng.below(names.len())].clone();
            }
            4 if toks[k].starts_with(|c: char| c.is_ascii_digit()) => {
                toks[k] = NUMBERS[rng.below(NUMBERS.len())].to_string();
            }
            _ => toks.insert(k, INSERTS[rng.below(INSERTS.len())].to_string()),
        }
    }
    let mut out = String::new();
    for t in toks {
        if t == "\n" || t.starts_with('#') {
            if !out.ends_with('\n') && !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t);
            if t.starts_with('#') {
                out.push('\n');
            }
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(&t);
    }
    out.push('\n');
    out
}

/// Tokens of a text, roughly: names, numbers, strings, directives (whole
/// lines), newlines and punctuation (`::`, `++`, `--`, `&&`, `+=`, `->`
/// kept whole).
fn rough_tokens(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'\n' {
            out.push("\n".to_string());
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#'
            && text[..i]
                .rsplit('\n')
                .next()
                .is_some_and(|l| l.trim().is_empty())
        {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            out.push(text[start..i].to_string());
        } else if c.is_ascii_alphanumeric()
            || c == b'_'
            || c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)
        {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'_'
                    || (b[i] == b'.' && c.is_ascii_digit()))
            {
                i += 1;
            }
            out.push(text[start..i].to_string());
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push(text[start..i].to_string());
        } else {
            let two = text.get(i..i + 2).unwrap_or("");
            let len = if [
                "::", "++", "--", "&&", "||", "+=", "-=", "->", "<=", ">=", "==", "!=", "/*", "*/",
                "//",
            ]
            .contains(&two)
            {
                2
            } else {
                text[i..].chars().next().map_or(1, char::len_utf8)
            };
            i += len;
            out.push(text[start..i].to_string());
        }
    }
    out
}
