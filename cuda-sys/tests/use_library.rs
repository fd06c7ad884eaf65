//! `nvrtc::use_library`: one NVRTC per process, chosen by the first call.
//! Where `CUDA_SYS_NVRTC_LIBRARY` names an NVRTC (`cargo xtask test` sets
//! it), that library is chosen and a second one is refused naming both;
//! elsewhere an empty directory is refused naming what was tried.

use cuda_sys::nvrtc::{LIBRARY_ENV, NvrtcLoadError};

/// `nvrtc::use_library` on `dir`.
fn use_library(dir: &std::path::Path) -> Result<&'static cuda_sys::nvrtc::Nvrtc, NvrtcLoadError> {
    // SAFETY: `dir` is `CUDA_SYS_NVRTC_LIBRARY` (an NVRTC, as `cargo xtask
    // test` sets it) or an empty directory (nothing is opened).
    unsafe { cuda_sys::nvrtc::use_library(dir) }
}

/// A directory with no library, removed at the end.
struct Empty(std::path::PathBuf);

impl Empty {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Empty {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn the_first_choice_holds_and_another_is_refused() {
    let dir = std::env::temp_dir().join(format!("cuda-sys-no-nvrtc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = Empty(dir);
    match std::env::var_os(LIBRARY_ENV) {
        Some(dir) => {
            let lib = use_library(std::path::Path::new(&dir)).unwrap_or_else(|e| panic!("{e}"));
            assert!(lib.version >= 12000, "{lib:?}");
            // Asking again for the same one is fine.
            assert_eq!(
                use_library(std::path::Path::new(&dir)).unwrap().path,
                lib.path
            );
            let e = use_library(empty.path()).unwrap_err();
            assert!(
                matches!(&e, NvrtcLoadError::OtherLibraryLoaded { loaded, .. } if *loaded == lib.path),
                "{e}"
            );
            assert!(e.to_string().contains("one NVRTC per process"), "{e}");
        }
        None => {
            let e = use_library(empty.path()).unwrap_err();
            let NvrtcLoadError::LibraryNotFound { tried } = &e else {
                panic!("{e}")
            };
            assert!(
                tried
                    .iter()
                    .all(|(p, _)| p.starts_with(&*empty.path().to_string_lossy())),
                "{tried:?}"
            );
        }
    }
}
