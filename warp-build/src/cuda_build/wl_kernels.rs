//! `.cu` files written against `warp_launch.h` (the proof grammar): read
//! with warp-proof's CUDA C reader, as warp-launch's `CudaModule` reads
//! them at run time, into the launchers' parameters and verdicts.

use std::path::Path;

use serde::{Deserialize, Serialize};
use warp_proof::cuda_c::{Weaken, array_element, dtype_of, read_text};
use warp_proof::elements::{ELEMENT_TYPES, HALF_ELEMENT_TYPES};
use warp_proof::{Accesses, DType};

use super::error::CudaBuildError;

/// One parameter of a `warp_launch.h` kernel after its launch bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WlParam {
    /// The C name.
    pub name: String,
    /// The C type as the reader spells it (`wl::array_t<float>`).
    pub c_type: String,
    /// The dtype, by Warp's name (`float32`).
    pub dtype: String,
    /// The Rust element or value type (`f32`, `[f32; 3]`).
    pub rust: String,
    /// Whether it is a `wl::array_t<T>`, and its dimensions when the body
    /// shows them (`Some(None)`: an array of any dimension count).
    pub array: Option<Option<u8>>,
}

/// What a `warp_launch.h` kernel's launcher is made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WlKernel {
    /// `N` of its `wl::launch_bounds_t<N>`.
    pub dim: usize,
    /// The parameters after the launch bounds.
    pub params: Vec<WlParam>,
    /// Why its accesses are not proven (`file:line: reason`), when they
    /// are not: then it has only `unsafe` launches.
    pub unproven: Option<String>,
}

/// A `warp_launch.h` text as read: the text NVRTC compiles and each
/// kernel's name, line and launcher.
pub(crate) struct WlText {
    pub emitted: String,
    pub kernels: Vec<(String, u32, WlKernel)>,
}

/// Whether `text` includes `warp_launch.h` (a line of its own, as the
/// reader accepts it): its kernels are then read as the proof grammar.
pub(crate) fn includes_warp_launch(text: &str) -> bool {
    text.lines().any(|l| {
        let l: String = l.split_whitespace().collect();
        l == "#include\"warp_launch.h\"" || l == "#include<warp_launch.h>"
    })
}

/// The Rust type launchers spell for `dtype` (warp-launch's `Element`).
fn element(dtype: &DType) -> Option<&'static str> {
    ELEMENT_TYPES
        .iter()
        .chain(HALF_ELEMENT_TYPES)
        .find(|(d, _)| std::ptr::eq(*d, dtype))
        .map(|(_, r)| *r)
}

/// Reads `text` (the file `path`) as warp-launch's `CudaModule` does.
pub(crate) fn read(path: &Path, text: &str) -> Result<WlText, CudaBuildError> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let read = read_text(text, &file_name, Weaken::Nothing).map_err(|e| {
        CudaBuildError::Signature {
            file: path.to_path_buf(),
            line: 0,
            kernel: String::new(),
            problem: format!(
                "the file includes warp_launch.h, so its kernels are read as warp-launch's CudaModule reads them, and the reader refuses it: {e}"
            ),
        }
    })?;
    let mut kernels = Vec::new();
    for k in &read.kernels {
        let line = u32::try_from(k.line).unwrap_or(u32::MAX);
        let refuse = |problem: String| CudaBuildError::Signature {
            file: path.to_path_buf(),
            line,
            kernel: k.name.clone(),
            problem,
        };
        let dim = k.kernel_dim.ok_or_else(|| {
            refuse(
                "a kernel of a file that includes warp_launch.h takes a wl::launch_bounds_t<N> first (N from 1 to 4); move other kernels to a .cu file without warp_launch.h".into(),
            )
        })?;
        let mut params = Vec::new();
        for p in k.params.iter().skip(1) {
            params.push(param(&p.name, &p.cpp_type, k.ndims.get(&p.name).copied()).ok_or_else(
                || {
                    refuse(format!(
                        "parameter `{}` has type `{}`: a warp_launch.h kernel takes wl::array_t<T> and Warp's scalar, vector and matrix types whose Rust element type warp-launch has (float, int, wl::vec3f, ...)",
                        p.name, p.cpp_type
                    ))
                },
            )?);
        }
        let unproven = match &k.accesses {
            Accesses::Checked(_) => None,
            Accesses::Unproven(u) => Some(format!("{}: {}", u.location, u.reason)),
        };
        kernels.push((
            k.name.clone(),
            line,
            WlKernel {
                dim,
                params,
                unproven,
            },
        ));
    }
    Ok(WlText {
        emitted: read.emitted.unwrap_or_else(|| text.to_string()),
        kernels,
    })
}

fn param(name: &str, cpp: &str, ndim: Option<u8>) -> Option<WlParam> {
    let (dtype, array) = match array_element(cpp) {
        Some(elem) => (dtype_of(elem)?, Some(ndim)),
        None => (dtype_of(cpp)?, None),
    };
    Some(WlParam {
        name: name.to_string(),
        c_type: cpp.to_string(),
        dtype: dtype.name.to_string(),
        rust: element(dtype)?.to_string(),
        array,
    })
}

/// The first warning in an NVRTC log (`file(LINE): warning ...`): its
/// line and text, as warp-launch's `CudaModule` reads it.
pub(crate) fn first_warning(log: &str) -> Option<(usize, String)> {
    log.lines().find_map(|l| {
        let (at, rest) = l.split_once(": warning")?;
        let line = at
            .rsplit_once('(')
            .and_then(|(_, r)| r.strip_suffix(')'))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Some((line, format!("warning{}", rest.trim_end())))
    })
}

/// `kernels` with every proven one made unproven by NVRTC's `warning`
/// about file `name` (a proven kernel compiles without warnings).
pub(crate) fn demote(
    kernels: &mut [(String, u32, WlKernel)],
    name: &str,
    warning: &(usize, String),
) {
    for (_, _, k) in kernels {
        if k.unproven.is_none() {
            k.unproven = Some(format!(
                "{name}:{}: NVRTC warns about the text ({}); a proven kernel compiles without warnings",
                warning.0, warning.1
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_include_is_found_as_the_reader_accepts_it() {
        assert!(includes_warp_launch("#include \"warp_launch.h\"\n"));
        assert!(includes_warp_launch("  #  include <warp_launch.h>\n"));
        assert!(!includes_warp_launch(
            "// warp_launch.h\n#include \"other.h\"\n"
        ));
    }

    #[test]
    fn warnings_are_read_with_their_line() {
        let log = "/a/k.cu(12): warning #177-D: variable \"x\" was declared but never referenced\n";
        let (line, text) = first_warning(log).unwrap();
        assert_eq!(line, 12);
        assert!(text.starts_with("warning #177-D"), "{text}");
        assert_eq!(first_warning("k.cu(3): error: nope\n"), None);
    }

    #[test]
    fn parameters_map_to_warp_launch_types() {
        let p = param("a", "wl::array_t<float>", Some(2)).unwrap();
        assert_eq!(
            (p.dtype.as_str(), p.rust.as_str(), p.array),
            ("float32", "f32", Some(Some(2)))
        );
        let v = param("v", "wl::vec3f", None).unwrap();
        assert_eq!((v.rust.as_str(), v.array), ("[f32; 3]", None));
        assert_eq!(
            param("p", "float *", None),
            None,
            "raw pointers are not the grammar's"
        );
    }
}
