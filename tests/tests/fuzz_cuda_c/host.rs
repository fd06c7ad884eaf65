//! The host side of the differential fuzzer: what a proven kernel's head
//! and accesses say (read from the text NVRTC compiles), and the batch
//! program that runs launches of proven kernels on the CPU.
//!
//! A batch is one C++ file: the emitted texts of several proven CUDA C
//! texts (each after a `#line 1 "tN.cu"`, so a compiler error names its
//! text), then `tests/fuzz-host/wl_host_runner.h` and, per kernel, a
//! function that makes its arguments from a case and runs every thread of
//! the case's grid. It is compiled once with g++ against
//! `tests/fuzz-host/warp_launch.h` (the host build of the header, which
//! checks every `wl::address`) and `-fsanitize=address`, and run over a
//! file of cases; each case runs in a child process of its own.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A parameter as the kernel's head spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// `wl::launch_bounds_t<N>`.
    Bounds(usize),
    /// `wl::array_t<T>`: the element type as spelled.
    Array(String),
    /// A value of the spelled type.
    Value(String),
}

/// One axis of an access as the text spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// `c.i` .. `c.l`: the coordinate's axis.
    Coord(usize),
    /// A bare name: the work item, as far as a proven text goes.
    Work,
    /// `blockIdx.x`.
    Block,
    /// An integer constant.
    Const(i64),
    /// Anything else (only in texts the reader refuses).
    Other,
}

/// A kernel's head and the accesses of its body, read from a text.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    /// The kernel's name.
    pub name: String,
    /// Parameters after the bounds: name and kind.
    pub params: Vec<(String, Param)>,
    /// `N` of its launch bounds.
    pub n_dims: usize,
    /// Each array's accesses: for each `wl::index` / `wl::address`, its axes.
    pub accesses: HashMap<String, Vec<Vec<Axis>>>,
}

/// Tokens of a text for the head reader: names, numbers, strings,
/// punctuation (`::` whole); directive lines and comments skipped.
fn tokens(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' && line_start {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        line_start = false;
        if text[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 4 + e);
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || b[i] == b'_'
                    || b[i] == b'.' && c.is_ascii_digit())
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
        } else if text[i..].starts_with("::") {
            i += 2;
            out.push("::".into());
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
            out.push(text[start..i].to_string());
        }
    }
    out
}

/// The index after the bracket that closes the one at `open`.
fn close(toks: &[String], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.as_str() {
            "(" | "{" | "[" => depth += 1,
            ")" | "}" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level, comma-separated arguments between `open` (a `(`) and
/// its `)`; `<`/`>` nest too when `angles`.
fn arguments(toks: &[String], open: usize, angles: bool) -> Option<(Vec<Vec<String>>, usize)> {
    let mut args = vec![Vec::new()];
    let mut depth = 0i32;
    let mut k = open + 1;
    while let Some(t) = toks.get(k) {
        match t.as_str() {
            "(" | "[" | "{" => depth += 1,
            "<" if angles => depth += 1,
            ">" if angles => depth -= 1,
            ")" if depth == 0 => return Some((args, k + 1)),
            ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                args.push(Vec::new());
                k += 1;
                continue;
            }
            _ => {}
        }
        args.last_mut().expect("an argument").push(t.clone());
        k += 1;
    }
    None
}

/// Reads kernel `name`'s head and accesses from `text`.
pub fn kernel_info(text: &str, name: &str) -> Option<KernelInfo> {
    let toks = tokens(text);
    // The name after `void` (and `__launch_bounds__(...)`), then `(`.
    let at = (0..toks.len()).find(|&k| {
        toks[k] == name
            && toks.get(k + 1).is_some_and(|t| t == "(")
            && k > 0
            && (toks[k - 1] == "void" || toks[k - 1] == ")")
            && toks[..k].iter().rev().take(16).any(|t| t == "__global__")
    })?;
    let (args, end) = arguments(&toks, at + 1, true)?;
    let mut params = Vec::new();
    let mut n_dims = 0;
    for (k, a) in args.iter().enumerate() {
        let a: Vec<&String> = a.iter().filter(|t| *t != "const").collect();
        let (pname, ty) = a.split_last()?;
        let ty: Vec<&str> = ty.iter().map(|t| t.as_str()).collect();
        let spelled = ty.join(" ");
        let stripped: Vec<&str> = ty.iter().copied().skip_while(|t| *t == "::").collect();
        let kind = match stripped.as_slice() {
            ["wl", "::", "launch_bounds_t", "<", n, ">"] => Param::Bounds(n.parse().ok()?),
            ["wl", "::", "array_t", "<", elem @ .., ">"] => Param::Array(elem.join(" ")),
            _ => Param::Value(spelled),
        };
        if k == 0 {
            let Param::Bounds(n) = kind else { return None };
            n_dims = n;
        } else {
            params.push(((*pname).clone(), kind));
        }
    }
    let body_end = close(&toks, end)?;
    let mut accesses: HashMap<String, Vec<Vec<Axis>>> = HashMap::new();
    let mut k = end;
    while k + 4 < body_end {
        let access = toks[k] == "wl"
            && toks[k + 1] == "::"
            && (toks[k + 2] == "index" || toks[k + 2] == "address")
            && toks[k + 3] == "(";
        if access && let Some((args, _)) = arguments(&toks, k + 3, false) {
            let array = args[0].join("");
            let axes = args[1..].iter().map(|a| axis(a)).collect();
            accesses.entry(array).or_default().push(axes);
        }
        k += 1;
    }
    Some(KernelInfo {
        name: name.to_string(),
        params,
        n_dims,
        accesses,
    })
}

/// The part of `emitted` the host compiles: its `#include` and `#pragma
/// once` lines and the kernels named (the others, unproven, may be anything the grammar
/// refuses), everything else blanked with its line breaks kept, so line
/// numbers stay the text's. `None` when a kernel's extent is not found.
pub fn only_kernels(emitted: &str, names: &[&str]) -> Option<String> {
    let b = emitted.as_bytes();
    let word_at = |k: usize, w: &str| {
        emitted[k..].starts_with(w)
            && (k == 0 || !(b[k - 1].is_ascii_alphanumeric() || b[k - 1] == b'_'))
            && b.get(k + w.len())
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
    };
    let mut keep = vec![false; b.len()];
    let mut line_start = 0;
    for line in emitted.split_inclusive('\n') {
        let l = line.trim_start();
        if l.starts_with("#include") || l.starts_with("#pragma once") {
            keep[line_start..line_start + line.len()]
                .iter_mut()
                .for_each(|x| *x = true);
        }
        line_start += line.len();
    }
    for name in names {
        // The name followed by `(`, after `void` (or a `)` of launch bounds).
        let at = (0..b.len()).find(|&k| {
            word_at(k, name) && emitted[k + name.len()..].trim_start().starts_with('(') && {
                let before = emitted[..k].trim_end();
                before.ends_with("void") || before.ends_with(')')
            }
        })?;
        let start = emitted[..at].rfind("extern")?;
        let open = at + emitted[at..].find('{')?;
        let mut depth = 0usize;
        let mut end = None;
        for (k, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        keep[start..end?].iter_mut().for_each(|x| *x = true);
    }
    Some(
        emitted
            .char_indices()
            .map(|(k, c)| if keep[k] || c == '\n' { c } else { ' ' })
            .collect(),
    )
}

/// One index argument's form.
fn axis(arg: &[String]) -> Axis {
    let t: Vec<&str> = arg.iter().map(String::as_str).collect();
    let inner: &[&str] = match t.as_slice() {
        ["int" | "size_t" | "unsigned", "(", rest @ .., ")"] => rest,
        ["(", "int" | "size_t" | "unsigned", ")", rest @ ..] => rest,
        all => all,
    };
    let number = |s: &str| {
        let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
        match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => i64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        }
    };
    match inner {
        ["blockIdx", ".", "x"] => Axis::Block,
        [_, ".", f] => ["i", "j", "k", "l"]
            .iter()
            .position(|x| x == f)
            .map_or(Axis::Other, Axis::Coord),
        ["-", n] => number(n).map_or(Axis::Other, |v| Axis::Const(-v)),
        [n] if n.starts_with(|c: char| c.is_ascii_digit()) => {
            number(n).map_or(Axis::Other, Axis::Const)
        }
        [n] if n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => Axis::Work,
        _ => Axis::Other,
    }
}

/// One launch for the host: the kernel's number in the batch and the case
/// line (see `wl_host_runner.h`).
#[derive(Clone, Debug)]
pub struct HostCase {
    /// The case's number (unique in the batch).
    pub id: u64,
    /// The line the driver reads.
    pub line: String,
}

/// The outcome of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every access in range.
    Pass,
    /// `wl::address` or a checked member subscript out of range.
    OutOfRange,
    /// AddressSanitizer's report.
    Asan,
    /// The case ran past its time (a loop the text never leaves).
    Hang,
    /// Skipped after a hang of the same kernel.
    Skipped,
    /// Killed by a signal (a division by zero).
    Trap(String),
    /// The driver failed (its exit code).
    Driver(String),
}

/// A batch of proven texts and their cases.
#[derive(Default)]
pub struct Batch {
    /// Each text: its label (`t3`) and emitted text.
    pub texts: Vec<(String, String)>,
    /// Each kernel: its text's index and what it takes.
    pub kernels: Vec<(usize, KernelInfo)>,
    /// The cases to run.
    pub cases: Vec<HostCase>,
}

impl Batch {
    /// Whether a text with these kernels can join (kernel names are
    /// unique in a batch: they are `extern "C"` symbols of one program).
    pub fn fits(&self, names: &[&str]) -> bool {
        !names
            .iter()
            .any(|n| self.kernels.iter().any(|(_, k)| k.name == *n))
    }

    /// Adds a text; its index.
    pub fn add_text(&mut self, emitted: &str) -> usize {
        let label = format!("t{}", self.texts.len());
        self.texts.push((label, emitted.to_string()));
        self.texts.len() - 1
    }

    /// Adds a kernel of text `text`; its number.
    pub fn add_kernel(&mut self, text: usize, info: KernelInfo) -> usize {
        self.kernels.push((text, info));
        self.kernels.len() - 1
    }

    /// The C++ program of the batch (without the texts in `skip`).
    fn program(&self, skip: &[usize]) -> String {
        let mut s = String::from(
            "// The differential fuzzer's host batch (tests/tests/fuzz_cuda_c.rs).\n#include \"warp_launch.h\"\n",
        );
        for (k, (label, text)) in self.texts.iter().enumerate() {
            if skip.contains(&k) {
                continue;
            }
            let _ = write!(s, "#line 1 \"{label}.cu\"\n{text}\n");
        }
        s.push_str("#line 1 \"driver\"\n#include \"wl_host_runner.h\"\n");
        let mut entries = Vec::new();
        for (n, (text, k)) in self.kernels.iter().enumerate() {
            if skip.contains(text) {
                entries.push(format!("{{\"{}\", nullptr}}", k.name));
                continue;
            }
            let _ = writeln!(s, "#line 1 \"run-{}\"", self.texts[*text].0);
            let _ = writeln!(s, "static void run_{n}(const wl_host::Case& cs) {{");
            let _ = writeln!(
                s,
                "    wl::launch_bounds_t<{}> p0;\n    wl_host::bounds(p0, cs);",
                k.n_dims
            );
            let mut args = vec!["p0".to_string()];
            for (j, (pname, p)) in k.params.iter().enumerate() {
                let v = format!("p{}", j + 1);
                match p {
                    Param::Array(elem) => {
                        let _ = writeln!(
                            s,
                            "    wl::array_t<{elem}> {v};\n    wl_host::array({v}, cs, {j}, \"{pname}\");"
                        );
                    }
                    Param::Value(ty) => {
                        let _ = writeln!(
                            s,
                            "    {ty} {v};\n    wl_host::value({v}, cs, {j}, \"{pname}\");"
                        );
                    }
                    Param::Bounds(b) => {
                        let _ = writeln!(
                            s,
                            "    wl::launch_bounds_t<{b}> {v};\n    wl_host::bounds({v}, cs);"
                        );
                    }
                }
                args.push(v);
            }
            let _ = writeln!(
                s,
                "    wl_host::threads(cs, [&] {{ {}({}); }});\n}}",
                k.name,
                args.join(", ")
            );
            entries.push(format!("{{\"{}\", run_{n}}}", k.name));
        }
        let _ = writeln!(
            s,
            "static const wl_host::Entry KERNELS[] = {{{}}};\nint main(int argc, char** argv) {{ return wl_host::main(argc, argv, KERNELS, {}); }}",
            if entries.is_empty() {
                "{nullptr, nullptr}".to_string()
            } else {
                entries.join(",\n    ")
            },
            entries.len()
        );
        s
    }
}

/// The host compiler: `CXX`, else `g++`.
pub fn compiler() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "g++".into())
}

/// The result of building a batch: the program, and the texts the host
/// compiler refused (their index and its first error line).
pub struct Built {
    /// The executable.
    pub exe: PathBuf,
    /// Texts left out, with the compiler's message.
    pub refused: Vec<(usize, String)>,
}

/// Compiles the batch in `dir` (`batch.cpp`, `batch`); a text whose code
/// the compiler refuses is left out and named (at most three rounds).
///
/// # Errors
///
/// The compiler cannot run, or refuses the batch for a reason no text
/// explains (the driver).
pub fn build(batch: &Batch, dir: &Path, include: &Path) -> Result<Built, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("batch.cpp");
    let exe = dir.join("batch");
    let mut skip: Vec<usize> = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..4 {
        std::fs::write(&src, batch.program(&skip))
            .map_err(|e| format!("{}: {e}", src.display()))?;
        let out: Output = Command::new(compiler())
            .args([
                "-std=c++17",
                "-O0",
                "-g0",
                "-fwrapv",
                "-fno-strict-aliasing",
                "-fsanitize=address",
                "-fno-omit-frame-pointer",
                "-w",
                "-fmax-errors=50",
            ])
            .arg("-I")
            .arg(include)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .map_err(|e| {
                format!(
                    "cannot run the host compiler `{}` (set CXX): {e}",
                    compiler()
                )
            })?;
        if out.status.success() {
            return Ok(Built { exe, refused });
        }
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        let first_error = log
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("")
            .to_string();
        let mut found = false;
        for label in labels(&log) {
            if let Some(k) = batch.texts.iter().position(|(t, _)| *t == label)
                && !skip.contains(&k)
            {
                skip.push(k);
                let why = log
                    .lines()
                    .find(|l| l.contains("error") && labels(l).contains(&label))
                    .unwrap_or(&first_error);
                refused.push((k, why.to_string()));
                found = true;
            }
        }
        if !found {
            return Err(format!(
                "the host compiler refused the batch {}:\n{}",
                src.display(),
                log.lines().take(30).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    Err(format!(
        "the host compiler still refuses the batch {} after leaving texts out",
        src.display()
    ))
}

/// The text labels (`t3`) a compiler log names: `t3.cu:LINE` and
/// `run-t3:LINE`, errors and the lines that say where they were required.
fn labels(log: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in log.split(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
        let word = word.trim_start_matches("run-");
        let Some((label, rest)) = word.split_once(':') else {
            continue;
        };
        let label = label.strip_suffix(".cu").unwrap_or(label);
        let numbered = label
            .strip_prefix('t')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if numbered
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && !out.iter().any(|l| l == label)
        {
            out.push(label.to_string());
        }
    }
    out
}

/// Runs the batch's cases: each case's outcome and report lines.
///
/// # Errors
///
/// The program cannot run or its output is cut short.
pub fn run(
    exe: &Path,
    cases: &[HostCase],
    dir: &Path,
) -> Result<HashMap<u64, (Outcome, Vec<String>)>, String> {
    let file = dir.join("cases.txt");
    let mut text = String::new();
    for c in cases {
        text.push_str(&c.line);
        text.push('\n');
    }
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    let out = Command::new(exe)
        .arg(&file)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut results = HashMap::new();
    let mut report: Vec<String> = Vec::new();
    for l in stdout.lines() {
        if l.starts_with("BEGIN ") {
            report.clear();
        } else if let Some(rest) = l.strip_prefix("RESULT ") {
            let mut it = rest.split_whitespace();
            let id: u64 = it
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad result line `{l}`"))?;
            let outcome = match it.next().unwrap_or("") {
                "pass" => Outcome::Pass,
                "out-of-range" => Outcome::OutOfRange,
                "asan" => Outcome::Asan,
                "hang" => Outcome::Hang,
                "skipped" => Outcome::Skipped,
                "trap" => Outcome::Trap(it.collect::<Vec<_>>().join(" ")),
                other => Outcome::Driver(format!("{other} {}", it.collect::<Vec<_>>().join(" "))),
            };
            results.insert(id, (outcome, std::mem::take(&mut report)));
        } else if report.len() < 60 {
            report.push(l.to_string());
        }
    }
    if !out.status.success() || results.len() != cases.len() {
        return Err(format!(
            "the host batch {} ended ({}) after {} of {} cases:\n{}",
            exe.display(),
            out.status,
            results.len(),
            cases.len(),
            stdout
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    Ok(results)
}
